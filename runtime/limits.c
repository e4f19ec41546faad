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

int pynox_set_limits(long long memory_bytes, long long max_file_size, char *err, size_t err_len)
{
    /* A core dump would write the process's memory somewhere Landlock may
     * not govern (core_pattern can pipe it to a helper). */
    if (set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0, err, err_len) != 0)
        return -1;
    if (memory_bytes > 0 &&
        set_limit(RLIMIT_AS, "RLIMIT_AS", (rlim_t)memory_bytes, err, err_len) != 0)
        return -1;
    if (max_file_size > 0 &&
        set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", (rlim_t)max_file_size, err, err_len) != 0)
        return -1;
    return 0;
}
