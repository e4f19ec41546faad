/* What the kernel offers, asked without changing the calling process: every
 * question here is a query that installs, sets or keeps nothing. */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "syscalls.h"

static int probe_seccomp(void)
{
    /* Asks whether the action the filter uses exists; installs nothing. */
    uint32_t action = SECCOMP_RET_ERRNO;
    if (syscall(__NR_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0)
        return 1;
    return -errno;
}

static int probe_no_new_privs(void)
{
    return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) >= 0 ? 1 : -errno;
}

static int probe_pidfd(void)
{
    long fd = syscall(__NR_pidfd_open, getpid(), 0);
    if (fd < 0)
        return -errno;
    (void)close((int)fd); /* our own descriptor, never shared */
    return 1;
}

void pynox_probe_kernel(struct pynox_probe *out)
{
    if (out == NULL)
        return;
    out->landlock_abi = pynox_landlock_abi();
    out->seccomp_filter = probe_seccomp();
    out->no_new_privs = probe_no_new_privs();
    out->pidfd = probe_pidfd();
    out->capabilities = pynox_capabilities_droppable();
}
