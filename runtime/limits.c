/* Resource limits. Each one is lowered, never raised: neither its soft limit nor
 * its hard one ends above what it was, so a program gets no more than the host gave
 * pynox (a lower soft limit the host set stays, as it does for python). The hard
 * limit, which an unprivileged process may lower but never raise, holds it: the
 * program cannot undo them. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>

#include "internal.h"

static rlim_t lower_of(rlim_t a, rlim_t b)
{
    return a < b ? a : b; /* RLIM_INFINITY is the largest rlim_t */
}

static int set_rlimit(int resource, const char *name, struct rlimit lim, char *err,
                      size_t err_len)
{
    if (setrlimit(resource, &lim) != 0)
        return pynox_fail(err, err_len, "setrlimit(%s) failed: %s", name, strerror(errno));
    return 0;
}

static int get_rlimit(int resource, const char *name, struct rlimit *cur, char *err,
                      size_t err_len)
{
    if (getrlimit(resource, cur) != 0)
        return pynox_fail(err, err_len, "getrlimit(%s) failed: %s", name, strerror(errno));
    return 0;
}

/* Lowers both limits of resource to at most value. */
static int lower_limit(int resource, const char *name, rlim_t value, char *err, size_t err_len)
{
    struct rlimit cur;
    if (get_rlimit(resource, name, &cur, err, err_len) != 0)
        return -1;
    struct rlimit lim = {.rlim_cur = lower_of(cur.rlim_cur, value),
                         .rlim_max = lower_of(cur.rlim_max, value)};
    return set_rlimit(resource, name, lim, err, err_len);
}

/* --memory is the memory a program may use, not the address space it may
 * reserve. RLIMIT_DATA (Linux 4.7 and later) counts every private writable
 * mapping: the heap (brk), anonymous memory, thread stacks, private writable
 * file mappings, and whatever mprotect() or mremap() makes writable or
 * larger. It does not count what holds no memory of its own: PROT_NONE
 * reservations (each thread's malloc arena reserves 64 MiB this way), code
 * and read-only data of libraries. Under RLIMIT_AS alone, importing numpy and
 * pandas needed 190 MiB of address space on a two-core machine (and 64 MiB
 * more for every thread that allocates) while it used 117 MiB.
 *
 * RLIMIT_DATA leaves out shared mappings: MAP_SHARED|MAP_ANONYMOUS memory,
 * /dev/zero and files mapped shared all hold pages the program fills. The
 * address space stays capped as a backstop, at a multiple of the limit, so
 * that what a program can hold that way is bounded (measured: 512 MiB of
 * shared anonymous memory under RLIMIT_DATA alone at 64 MiB). glibc gives up
 * a malloc arena it cannot reserve and shares another, so programs with many
 * threads still run under it. */
#define ADDRESS_SPACE_FACTOR 4

static rlim_t address_space_for(long long memory_bytes)
{
    if (memory_bytes > LLONG_MAX / ADDRESS_SPACE_FACTOR)
        return RLIM_INFINITY;
    return (rlim_t)memory_bytes * ADDRESS_SPACE_FACTOR;
}

/* The main thread's stack is not data either: it grows up to RLIMIT_STACK,
 * which the host may leave unlimited. Under a memory limit it grows at most
 * as far as the limit (it keeps a smaller limit it already has). */
static int cap_stack(long long memory_bytes, char *err, size_t err_len)
{
    struct rlimit cur;
    if (get_rlimit(RLIMIT_STACK, "RLIMIT_STACK", &cur, err, err_len) != 0)
        return -1;
    /* Its hard limit too is the soft one it started with, if lower: what the
     * stack holds counts against no other limit. */
    return lower_limit(RLIMIT_STACK, "RLIMIT_STACK", lower_of(cur.rlim_cur, (rlim_t)memory_bytes),
                       err, err_len);
}

/* Every descriptor can hold kernel memory that no rlimit counts: a
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

static int set_memory_limits(long long memory_bytes, char *err, size_t err_len)
{
    if (lower_limit(RLIMIT_DATA, "RLIMIT_DATA", (rlim_t)memory_bytes, err, err_len) != 0)
        return -1;
    if (lower_limit(RLIMIT_AS, "RLIMIT_AS", address_space_for(memory_bytes), err, err_len) != 0)
        return -1;
    if (cap_stack(memory_bytes, err, err_len) != 0)
        return -1;
    return lower_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", descriptors_for(memory_bytes), err, err_len);
}

static int limit_core_dumps(char *err, size_t err_len)
{
    struct rlimit cur;
    if (get_rlimit(RLIMIT_CORE, "RLIMIT_CORE", &cur, err, err_len) != 0)
        return -1;
    rlim_t value = lower_of(cur.rlim_max, 1);
    struct rlimit lim = {.rlim_cur = value, .rlim_max = value};
    return set_rlimit(RLIMIT_CORE, "RLIMIT_CORE", lim, err, err_len);
}

int pynox_set_limits(long long memory_bytes, long long max_file_size, char *err, size_t err_len)
{
    /* A core dump would write the process's memory somewhere Landlock may
     * not govern. 1, not 0: the kernel ignores the limit when core_pattern pipes
     * the dump to a helper, except for exactly 1, which aborts the dump; and a
     * file dump needs at least a page, so 1 stops that too. Both limits are 1,
     * even over a soft limit of 0, which would let a piped dump through; a
     * hard limit of 0 stays 0. */
    if (limit_core_dumps(err, err_len) != 0)
        return -1;
    if (memory_bytes > 0 && set_memory_limits(memory_bytes, err, err_len) != 0)
        return -1;
    if (max_file_size > 0 &&
        lower_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", (rlim_t)max_file_size, err, err_len) != 0)
        return -1;
    return 0;
}

int pynox_lowest_limit(enum pynox_limit which, unsigned long long *bytes)
{
    /* What an allocation or a write runs into: RLIMIT_STACK and RLIMIT_NOFILE, which
     * --memory sets too, have hints of their own. */
    static const int memory[] = {RLIMIT_DATA, RLIMIT_AS};
    static const int file_size[] = {RLIMIT_FSIZE};
    const int *resources = which == PYNOX_LIMIT_MEMORY ? memory : file_size;
    size_t count = which == PYNOX_LIMIT_MEMORY ? sizeof memory / sizeof *memory : 1;
    *bytes = ULLONG_MAX;
    for (size_t i = 0; i < count; i++) {
        struct rlimit cur;
        if (getrlimit(resources[i], &cur) != 0)
            return -1;
        /* The soft limit: what the program runs into, and never above the hard one. */
        if (cur.rlim_cur != RLIM_INFINITY && cur.rlim_cur < *bytes)
            *bytes = cur.rlim_cur;
    }
    return 0;
}
