/* Resource limits. Each one is set with soft = hard: an unprivileged process
 * may lower a hard limit but never raise it, so the program cannot undo them. */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "internal.h"

static int set_limit(int resource, const char *name, rlim_t value, char *err, size_t err_len)
{
    struct rlimit cur;
    if (getrlimit(resource, &cur) != 0)
        return pynox_fail(err, err_len, "getrlimit(%s) failed: %s", name, strerror(errno));
    /* A tighter hard limit is already in force and raising it needs
     * CAP_SYS_RESOURCE; keeping it is at least as strict as asked. */
    if (cur.rlim_max != RLIM_INFINITY && cur.rlim_max < value)
        value = cur.rlim_max;
    struct rlimit lim = {.rlim_cur = value, .rlim_max = value};
    if (setrlimit(resource, &lim) != 0)
        return pynox_fail(err, err_len, "setrlimit(%s) failed: %s", name, strerror(errno));
    return 0;
}

/* Every descriptor can hold kernel memory that RLIMIT_AS does not count: a
 * socketpair() end holds up to its send buffer (about 230 KiB at the default
 * net.core.wmem_default), a pipe 64 KiB, and as many again can sit in
 * socket queues without a descriptor (SCM_RIGHTS; the kernel caps those at
 * RLIMIT_NOFILE too). Under a memory limit the program gets one descriptor
 * per MiB of it, between 64 and 1024 (a common default), which keeps what it
 * can hold that way to about half the limit. */
#define BYTES_PER_DESCRIPTOR (1LL << 20)
#define MIN_DESCRIPTORS 64
#define MAX_DESCRIPTORS 1024

static rlim_t descriptors_for(long long memory_bytes)
{
    long long count = memory_bytes / BYTES_PER_DESCRIPTOR;
    if (count < MIN_DESCRIPTORS)
        return MIN_DESCRIPTORS;
    return count > MAX_DESCRIPTORS ? MAX_DESCRIPTORS : (rlim_t)count;
}

int pynox_set_limits(long long memory_bytes, long long max_file_size, char *err, size_t err_len)
{
    /* A core dump would write the process's memory somewhere Landlock may
     * not govern (core_pattern can pipe it to a helper). */
    if (set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, err, err_len) != 0)
        return -1;
    if (memory_bytes > 0 &&
        set_limit(RLIMIT_AS, "RLIMIT_AS", (rlim_t)memory_bytes, err, err_len) != 0)
        return -1;
    if (memory_bytes > 0 &&
        set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", descriptors_for(memory_bytes), err, err_len) != 0)
        return -1;
    if (max_file_size > 0 &&
        set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", (rlim_t)max_file_size, err, err_len) != 0)
        return -1;
    return 0;
}
