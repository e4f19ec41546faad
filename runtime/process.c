/* The process as a whole: one thread, tied to its parent, its own session. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "internal.h"

/* Returns the thread count from /proc/self/status, or 0 when it cannot be
 * read (no /proc); the caller then has to trust the documented contract. */
static long thread_count(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == sizeof(buf) - 1)
            break;
    }
    (void)close(fd); /* read-only: nothing to lose on a failed close */
    buf[len] = '\0';
    const char *line = strstr(buf, "\nThreads:");
    if (line == NULL)
        return 0;
    return strtol(line + strlen("\nThreads:"), NULL, 10);
}

int pynox_require_single_thread(char *err, size_t err_len)
{
    long threads = thread_count();
    if (threads > 1)
        return pynox_fail(err, err_len,
                          "the process has %ld threads, but the sandbox can only confine a "
                          "single-threaded process",
                          threads);
    return 0;
}

int pynox_bind_to_parent(int parent_pid, char *err, size_t err_len)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        return pynox_fail(err, err_len, "prctl(PR_SET_PDEATHSIG) failed: %s", strerror(errno));
    /* The parent may have died before the death signal was armed. */
    if (getppid() != (pid_t)parent_pid)
        return pynox_fail(err, err_len, "the parent process %d has already exited", parent_pid);
    return 0;
}

int pynox_new_session(char *err, size_t err_len)
{
    /* A new session has no controlling terminal, so TIOCSTI-style tricks on
     * the user's terminal and its job-control signals no longer reach us. */
    if (setsid() < 0)
        return pynox_fail(err, err_len, "setsid() failed: %s", strerror(errno));
    return 0;
}
