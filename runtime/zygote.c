/* The pool zygote's loop (part of pynox._native).
 *
 * The zygote forks a spare child whenever the pool server orders one, tells the
 * server the child's pid (with a pidfd), and tells it how each child ended. Its
 * children share its memory until either side writes to a page, which the kernel
 * then copies for the writer. The same loop in Python wrote to about ninety pages
 * of its own after every fork (frames, reference counts, allocations), each one a
 * copy; this one writes to its stack.
 *
 * The messages are fixed-size records; their layouts are exported as struct
 * formats (ZYGOTE_ORDER_FORMAT, ZYGOTE_WORD_FORMAT), which pynox.pool.zygote uses
 * on the server's side:
 *   order (server to zygote): int64 token, uint8 wanted_now; with the child's
 *     descriptors;
 *   word (zygote to server): uint8 kind, int64 id, int32 value; SPAWNED: id the
 *     token, value the pid, with a pidfd; EXITED: id the pid, value its wait status.
 */
#include "native.h"
#include "syscalls.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif

#define ORDER_FORMAT "=qB"
#define ORDER_SIZE 9
#define WORD_FORMAT "=Bqi"
#define WORD_SIZE 13
#define WORD_SPAWNED 1
#define WORD_EXITED 2
/* The most descriptors an order may carry (a child's pipes and channel). */
#define MAX_CHILD_FDS 8
/* How long a word whose pidfd the kernel refuses for now waits before it is sent again. */
#define PIDFD_RETRY_NS 20000000L

struct order {
    int64_t token;
    uint8_t wanted_now;
    int fds[MAX_CHILD_FDS];
};

static void close_all(const int *fds, int count)
{
    for (int i = 0; i < count; i++) {
        (void)close(fds[i]); /* ours to drop; nothing to do if it fails */
    }
}

/* A message of one buffer, without ancillary data yet. */
static void one_buffer(struct msghdr *message, struct iovec *iov, void *data, size_t size)
{
    iov->iov_base = data;
    iov->iov_len = size;
    memset(message, 0, sizeof *message);
    message->msg_iov = iov;
    message->msg_iovlen = 1;
}

/* The server's next order with exactly `wanted` descriptors: 1; or 0 when the
 * server is gone or sent anything else (its descriptors are closed then). */
static int receive_order(int sock, int wanted, struct order *order)
{
    memset(order, 0, sizeof *order);
    unsigned char data[ORDER_SIZE + 1]; /* one more: a longer record shows as such */
    union {
        struct cmsghdr align;
        char buffer[CMSG_SPACE(sizeof(int) * MAX_CHILD_FDS)];
    } control;
    struct iovec iov;
    struct msghdr message;
    one_buffer(&message, &iov, data, sizeof data);
    message.msg_control = control.buffer;
    message.msg_controllen = sizeof control.buffer;
    ssize_t got;
    do {
        got = recvmsg(sock, &message, MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    int count = 0;
    /* The kernel hands every passed descriptor over in one SCM_RIGHTS header (and
     * closes those that did not fit, setting MSG_CTRUNC). */
    struct cmsghdr *c = got > 0 ? CMSG_FIRSTHDR(&message) : NULL;
    if (c != NULL && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n && count < MAX_CHILD_FDS; i++) {
            memcpy(&order->fds[count++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        }
    }
    if (got != ORDER_SIZE || (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0
        || count != wanted) {
        close_all(order->fds, count);
        return 0;
    }
    memcpy(&order->token, data, sizeof order->token);
    order->wanted_now = data[8];
    return 1;
}

/* 0, or -1 when the server is gone. fd: one descriptor to pass along, or -1. */
static int send_word(int sock, uint8_t kind, int64_t id, int32_t value, int fd)
{
    unsigned char data[WORD_SIZE];
    data[0] = kind;
    memcpy(data + 1, &id, sizeof id);
    memcpy(data + 9, &value, sizeof value);
    union {
        struct cmsghdr align;
        char buffer[CMSG_SPACE(sizeof(int))];
    } control;
    struct iovec iov;
    struct msghdr message;
    one_buffer(&message, &iov, data, sizeof data);
    if (fd >= 0) {
        memset(&control, 0, sizeof control);
        message.msg_control = control.buffer;
        message.msg_controllen = sizeof control.buffer;
        struct cmsghdr *c = CMSG_FIRSTHDR(&message);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    for (;;) {
        ssize_t sent = sendmsg(sock, &message, MSG_NOSIGNAL);
        if (sent >= 0) {
            return sent == WORD_SIZE ? 0 : -1;
        }
        if (errno == ETOOMANYREFS) {
            /* The user's descriptors in flight on Unix sockets are past the kernel's
             * bound (its limit on open files), held by any process of the user: a
             * program the pool runs can hold that many. They come back as their holder
             * reads them or ends (the server kills a run at its timeout), so the word
             * waits for them, rather than the pool losing its zygote. */
            struct timespec pause = {0, PIDFD_RETRY_NS};
            if (nanosleep(&pause, NULL) != 0 && errno != EINTR) {
                return -1;
            }
        } else if (errno != EINTR) {
            return -1;
        }
    }
}

/* Tells the server of every child that has ended; -1 when the server is gone. */
static int report_ended(int sock)
{
    for (;;) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0 || (pid < 0 && errno == ECHILD)) {
            return 0;
        }
        if (pid < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1; /* cannot happen with these arguments; leave rather than spin */
        }
        if (send_word(sock, WORD_EXITED, pid, status, -1) != 0) {
            return -1;
        }
    }
}

/* Empties the signalfd: its readiness only says that some child ended. */
static void drain(int signals)
{
    struct signalfd_siginfo info;
    while (read(signals, &info, sizeof info) > 0) {
    }
}

/* The pool server is gone (or broke the protocol): the zygote ends, and the
 * spares it forked with it (each is bound to its parent). */
_Noreturn static void leave(void)
{
    _exit(0);
}

/* A spare that cannot become one ends at once: the server sees it end unready. */
_Noreturn static void spare_fails(const char *why)
{
    static const char prefix[] = "pynox: a pool spare cannot start: ";
    if (write(2, prefix, sizeof prefix - 1) < 0 || write(2, why, strlen(why)) < 0
        || write(2, "\n", 1) < 0) {
        /* stderr is gone: the exit status still tells */
    }
    _exit(1);
}

/* The child's half of a fork: Python's own state first, then what the loop set up. */
static PyObject *become_spare(const struct order *order, int count, int signals,
                              const sigset_t *mask)
{
    PyOS_AfterFork_Child();
    if (close(signals) != 0 || sigprocmask(SIG_SETMASK, mask, NULL) != 0) {
        spare_fails(strerror(errno));
    }
    PyObject *fds = PyList_New(count);
    for (int i = 0; fds != NULL && i < count; i++) {
        PyObject *fd = PyLong_FromLong(order->fds[i]);
        if (fd == NULL) {
            Py_CLEAR(fds);
            break;
        }
        PyList_SET_ITEM(fds, i, fd);
    }
    PyObject *spare = NULL;
    if (fds != NULL) {
        spare = Py_BuildValue("(NO)", fds, order->wanted_now ? Py_True : Py_False);
    }
    if (spare == NULL) {
        spare_fails("out of memory");
    }
    return spare;
}

/* Forks a spare for the order; its pid and pidfd go to the server. In the new
 * child: 1 and *spare set. -1 with a Python error (the fork failed). */
static int fork_spare(int sock, const struct order *order, int count, int signals,
                      const sigset_t *mask, PyObject **spare)
{
    if (PySys_Audit("os.fork", NULL) < 0) {
        return -1;
    }
    PyOS_BeforeFork();
    pid_t pid = fork();
    if (pid == 0) {
        *spare = become_spare(order, count, signals, mask);
        return 1;
    }
    int fork_error = errno;
    PyOS_AfterFork_Parent();
    close_all(order->fds, count);
    if (pid < 0) {
        errno = fork_error;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    long pidfd = syscall(__NR_pidfd_open, pid, 0);
    if (pidfd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    int lost = send_word(sock, WORD_SPAWNED, order->token, pid, (int)pidfd) != 0;
    (void)close((int)pidfd);
    if (lost) {
        leave();
    }
    return 0;
}

static PyObject *serve_spares(PyObject *module, PyObject *args)
{
    (void)module;
    int sock = -1;
    int count = 0;
    if (!PyArg_ParseTuple(args, "ii", &sock, &count)) {
        return NULL;
    }
    if (count < 1 || count > MAX_CHILD_FDS) {
        PyErr_Format(PyExc_ValueError, "a spare takes 1 to %d descriptors, not %d",
                     MAX_CHILD_FDS, count);
        return NULL;
    }
    /* Every signal stays blocked but while the loop waits (ppoll), so that one whose
     * Python handler must run cannot slip in between the check below and the wait.
     * SIGCHLD stays blocked there too: the loop reads it from a signalfd. */
    sigset_t every, child_ended, mask, waiting;
    if (sigfillset(&every) != 0 || sigemptyset(&child_ended) != 0
        || sigaddset(&child_ended, SIGCHLD) != 0
        || sigprocmask(SIG_BLOCK, &every, &mask) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    waiting = mask;
    int signals = -1;
    if (sigaddset(&waiting, SIGCHLD) != 0
        || (signals = signalfd(-1, &child_ended, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        (void)sigprocmask(SIG_SETMASK, &mask, NULL);
        return NULL;
    }
    PyObject *spare = NULL;
    for (;;) {
        if (PyErr_CheckSignals() != 0) {
            break; /* a Python handler raised (KeyboardInterrupt, say) */
        }
        struct pollfd ready[2] = {{sock, POLLIN, 0}, {signals, POLLIN, 0}};
        if (ppoll(ready, 2, NULL, &waiting) < 0) {
            if (errno != EINTR) {
                PyErr_SetFromErrno(PyExc_OSError);
                break;
            }
            continue; /* a signal: its Python handler runs above */
        }
        if (ready[1].revents != 0) {
            drain(signals);
            if (report_ended(sock) != 0) {
                leave();
            }
        }
        if (ready[0].revents == 0) {
            continue;
        }
        struct order order;
        if (!receive_order(sock, count, &order)) {
            leave();
        }
        int forked = fork_spare(sock, &order, count, signals, &mask, &spare);
        if (forked == 1) {
            return spare; /* in the new spare: its descriptors and flag */
        }
        if (forked < 0) {
            break;
        }
    }
    /* A Python error ends the loop: the zygote's caller sees it. */
    (void)close(signals);
    (void)sigprocmask(SIG_SETMASK, &mask, NULL);
    return NULL;
}

PyMethodDef pynox_zygote_methods[] = {
    {"serve_spares", serve_spares, METH_VARARGS,
     "serve_spares(sock, fds_per_spare) -> (fds, wanted_now): the pool zygote's loop "
     "over its socket with the pool server; returns only in a new spare, with the "
     "descriptors and flag of its order. Ends the process when the server is gone."},
    {NULL, NULL, 0, NULL},
};

int pynox_zygote_add_constants(PyObject *module)
{
    if (PyModule_AddStringConstant(module, "ZYGOTE_ORDER_FORMAT", ORDER_FORMAT) != 0
        || PyModule_AddStringConstant(module, "ZYGOTE_WORD_FORMAT", WORD_FORMAT) != 0
        || PyModule_AddIntConstant(module, "ZYGOTE_SPAWNED", WORD_SPAWNED) != 0
        || PyModule_AddIntConstant(module, "ZYGOTE_EXITED", WORD_EXITED) != 0) {
        return -1;
    }
    return 0;
}
