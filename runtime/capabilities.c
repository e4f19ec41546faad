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

#define CAP_SETPCAP_BIT (1u << CAP_SETPCAP) /* in the first word of a set */

int pynox_capabilities_droppable(void)
{
    cap_sets data;
    if (read_caps(data) != 0)
        return -errno;
    if (!holds_any(data) || data[0].effective & CAP_SETPCAP_BIT)
        return 1;
    return -EPERM;
}

/* Drops every capability from the bounding set: 0, 1, ... until the kernel says
 * EINVAL, past the highest it knows. One call per capability, not a read and a
 * drop each: as root, where the set is full, that halves the calls. */
static int empty_bounding_set(int holds_caps, char *err, size_t err_len)
{
    for (int cap = 0; cap < 64; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
            continue;
        if (errno == EINVAL && cap > 0)
            return 0; /* past the last capability: the set is empty */
        /* EPERM: no CAP_SETPCAP. Harmless for a process that holds nothing,
         * since no_new_privs keeps execve from granting it anything. */
        if (errno == EPERM && !holds_caps)
            return 0;
        if (errno == EPERM)
            return pynox_fail(err, err_len,
                              "the process holds capabilities but not CAP_SETPCAP, which "
                              "dropping them all takes; start pynox with no capabilities "
                              "(no ambient or file capabilities), or with CAP_SETPCAP too");
        return pynox_fail(err, err_len, "cannot drop capability %d from the bounding set: %s",
                          cap, strerror(errno));
    }
    return pynox_fail(err, err_len, "prctl(PR_CAPBSET_DROP) found no end to the capability list");
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
