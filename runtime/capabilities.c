/* Capabilities: the process may run as root, and root's capabilities would
 * let it raise hard limits, reconfigure the network, load modules and so on.
 * It leaves here with empty ambient, bounding, effective, permitted and
 * inheritable sets (or, lacking CAP_SETPCAP, with no capability to lose). */
#include <errno.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#endif
#ifndef PR_CAP_AMBIENT_CLEAR_ALL
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

typedef struct __user_cap_data_struct cap_sets[_LINUX_CAPABILITY_U32S_3];

static int read_caps(cap_sets data)
{
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    memset(data, 0, sizeof(cap_sets));
    return (int)syscall(__NR_capget, &header, data);
}

static int holds_any(const cap_sets data)
{
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
        if (data[i].effective || data[i].permitted || data[i].inheritable)
            return 1;
    return 0;
}

/* The highest capability this kernel knows: PR_CAPBSET_READ says EINVAL past
 * it. Asking the kernel needs no file, unlike /proc/sys/kernel/cap_last_cap. */
static int last_cap(char *err, size_t err_len)
{
    int cap = 0;
    while (cap < 64 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0)
        cap++;
    if (cap == 64 || errno != EINVAL)
        return pynox_fail(err, err_len, "prctl(PR_CAPBSET_READ, %d) failed: %s", cap,
                          cap == 64 ? "no end to the capability list" : strerror(errno));
    if (cap == 0)
        return pynox_fail(err, err_len, "the kernel reports no capabilities at all");
    return cap - 1;
}

static int empty_bounding_set(int holds_caps, char *err, size_t err_len)
{
    int last = last_cap(err, err_len);
    if (last < 0)
        return -1;
    for (int cap = 0; cap <= last; cap++) {
        int in_set = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (in_set < 0)
            return pynox_fail(err, err_len, "prctl(PR_CAPBSET_READ, %d) failed: %s", cap,
                              strerror(errno));
        if (in_set == 0 || prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
            continue;
        /* EPERM: no CAP_SETPCAP. Harmless for a process that holds nothing,
         * since no_new_privs keeps execve from granting it anything. */
        if (errno == EPERM && !holds_caps)
            return 0;
        return pynox_fail(err, err_len,
                          "cannot drop capability %d from the bounding set: %s", cap,
                          errno == EPERM ? "the process holds capabilities but not CAP_SETPCAP"
                                         : strerror(errno));
    }
    return 0;
}

int pynox_drop_capabilities(char *err, size_t err_len)
{
    /* EINVAL: a kernel before 4.3 has no ambient set to clear. */
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        return pynox_fail(err, err_len, "clearing the ambient capabilities failed: %s",
                          strerror(errno));

    cap_sets data;
    if (read_caps(data) != 0)
        return pynox_fail(err, err_len, "capget() failed: %s", strerror(errno));
    /* The bounding set goes first: dropping from it needs CAP_SETPCAP, which
     * the capset below takes away. */
    if (empty_bounding_set(holds_any(data), err, err_len) != 0)
        return -1;

    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    cap_sets none;
    memset(none, 0, sizeof(none));
    if (syscall(__NR_capset, &header, none) != 0)
        return pynox_fail(err, err_len, "capset() to no capabilities failed: %s", strerror(errno));

    /* Trust, but verify: a root process must end with nothing. */
    if (read_caps(data) != 0)
        return pynox_fail(err, err_len, "capget() failed: %s", strerror(errno));
    if (holds_any(data))
        return pynox_fail(err, err_len, "capabilities remain after capset() cleared them");
    return 0;
}
