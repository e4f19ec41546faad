/* Close every inherited descriptor above 2 except the kept ones, so that the
 * program cannot reach files, sockets or pipes Landlock never sees (an open
 * descriptor bypasses every path rule). */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "syscalls.h"

/* Upper bound for the fallback loop: the highest descriptor number the
 * process could hold. */
static unsigned int fallback_limit(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        return 1U << 20; /* the kernel's default nr_open */
    rlim_t top = lim.rlim_cur;
    /* Descriptors opened before the soft limit was lowered can sit above it. */
    if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max > top)
        top = lim.rlim_max;
    if (top == RLIM_INFINITY || top > (1U << 20))
        top = 1U << 20;
    return (unsigned int)top;
}

/* Closes [first, last]; returns 0 or -errno. */
static int close_span(unsigned int first, unsigned int last, int *use_loop)
{
    if (first > last)
        return 0;
    if (!*use_loop) {
        if (syscall(__NR_close_range, first, last, 0) == 0)
            return 0;
        if (errno != ENOSYS)
            return -errno;
        *use_loop = 1; /* Linux < 5.9 */
    }
    unsigned int top = fallback_limit();
    if (first >= top)
        return 0;
    if (last >= top)
        last = top - 1;
    for (unsigned int fd = first; fd <= last && fd >= first; fd++) {
        /* EBADF: not open. Linux frees the slot even when close reports
         * EINTR or EIO, so no other error leaves the descriptor open. */
        (void)close((int)fd);
    }
    return 0;
}

/* The smallest kept descriptor >= from, or -1. Policies keep a handful of
 * descriptors, so a linear scan beats sorting a copy. */
static long next_kept(const int *keep_fds, size_t keep_count, unsigned int from)
{
    long best = -1;
    for (size_t i = 0; i < keep_count; i++) {
        int fd = keep_fds[i];
        if (fd < 0 || (unsigned int)fd < from)
            continue;
        if (best < 0 || fd < best)
            best = fd;
    }
    return best;
}

int pynox_close_descriptors(const int *keep_fds, size_t keep_count, char *err, size_t err_len)
{
    int use_loop = 0;
    unsigned int from = 3;
    for (;;) {
        long kept = next_kept(keep_fds, keep_count, from);
        unsigned int last = kept < 0 ? UINT_MAX : (unsigned int)kept - 1;
        int rc = close_span(from, last, &use_loop);
        if (rc != 0)
            return pynox_fail(err, err_len, "closing descriptors %u to %u failed: %s", from, last,
                              strerror(-rc));
        if (kept < 0)
            return 0;
        from = (unsigned int)kept + 1;
    }
}
