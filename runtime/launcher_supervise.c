/* The launcher as the supervisor of a run.
 *
 * A run with a wall-clock limit used to fork a second copy of the interpreter to
 * watch the clock; that fork, and the pages the child then copies, cost more than
 * the rest of the run. Instead the launcher forks before it execs the interpreter and
 * stays behind as the parent, a process of a few pages:
 *
 *   - pynox (the child) writes on a pipe, before any program runs, the limit in
 *     milliseconds and the line to print when it is reached, then closes the pipe;
 *     a run pynox supervises itself (--json, --memory) closes it without a word;
 *   - the supervisor waits for the child's end (a pidfd), the pipe and the deadline;
 *     at the deadline it kills the child, prints the line and exits 124;
 *   - signals sent to the supervisor by kill() (SIGTERM, SIGHUP, SIGINT, SIGQUIT)
 *     go on to the child; those from the terminal reach the child by themselves,
 *     since both stay in the terminal's foreground process group;
 *   - at the end it exits with the child's status, or dies of the child's signal.
 *
 * The child is bound to this process (PR_SET_PDEATHSIG, set by the sandbox), so
 * killing the supervisor ends the run too.
 */
#include "launcher_supervise.h"

#include "launcher_scratch.h"
#include "launcher_sys.h"

#define SIGINT 2
#define SIGQUIT 3
#define SIGKILL 9
#define SIGTERM 15
#define SIGHUP 1
#define SIG_BLOCK 0
#define SIG_SETMASK 2
#define POLLIN 0x001
#define CLOCK_MONOTONIC 1
#define RLIMIT_CORE 4
#define EXIT_TIMEOUT 124
#define SFD_CLOEXEC 02000000
#define EXIT_SETUP_FAILURE 125

/* The limit and the line, as pynox writes them: "MILLISECONDS\nLINE". */
#define MESSAGE_MAX 2048

struct pollfd {
    int fd;
    short events;
    short revents;
};

struct timespec_k {
    long tv_sec;
    long tv_nsec;
};

struct signalfd_siginfo_k {
    unsigned int ssi_signo;
    int ssi_errno;
    int ssi_code;
    unsigned char rest[116];
};

struct sigaction_k {
    void *handler;
    unsigned long flags;
    void *restorer;
    unsigned long mask;
};

struct rlimit_k {
    unsigned long current;
    unsigned long maximum;
};

static unsigned long bit(int signal)
{
    return 1UL << (signal - 1);
}

static size_t length_of(const char *text)
{
    size_t n = 0;
    while (text[n] != '\0') {
        n++;
    }
    return n;
}

static long now_ms(void)
{
    struct timespec_k now;
    if (sys_call(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&now, 0, 0) != 0) {
        return 0;
    }
    return now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* "MILLISECONDS\nLINE": the limit (0: none) and where the line starts. */
static long parse_message(char *message, size_t length, const char **line)
{
    long ms = 0;
    size_t i = 0;
    for (; i < length && message[i] >= '0' && message[i] <= '9'; i++) {
        if (ms < 100000000000L) {
            ms = ms * 10 + (message[i] - '0');
        }
    }
    if (i == 0 || i >= length || message[i] != '\n') {
        *line = "";
        return 0;
    }
    message[length] = '\0';
    *line = message + i + 1;
    return ms;
}

/* Ends this process as the child ended: its exit status, or death by its signal. */
static _Noreturn void end_like(int status)
{
    int signal = status & 0x7f;
    if (signal == 0) {
        sys_exit((status >> 8) & 0xff);
    }
    struct rlimit_k no_core = {0, 0};
    struct rlimit_k old;
    if (sys_call(SYS_prlimit64, 0, RLIMIT_CORE, 0, (long)&old) == 0) {
        no_core.maximum = old.maximum;
    }
    (void)sys_call(SYS_prlimit64, 0, RLIMIT_CORE, (long)&no_core, 0);
    struct sigaction_k default_action = {0, 0, 0, 0};
    (void)sys_call(SYS_rt_sigaction, signal, (long)&default_action, 0, sizeof(unsigned long));
    unsigned long none = 0;
    (void)sys_call(SYS_rt_sigprocmask, SIG_SETMASK, (long)&none, 0, sizeof none);
    (void)sys_call(SYS_kill, sys_getpid(), signal, 0, 0);
    sys_exit(128 + signal);
}

static int reap(long child)
{
    int status = 0;
    long got;
    do {
        got = sys_call(SYS_wait4, child, (long)&status, 0, 0);
    } while (got == -LAUNCHER_EINTR);
    return got == child ? status : (128 + SIGKILL) << 8;
}

static _Noreturn void watch(long child, int control, int signals)
{
    long pidfd = sys_call(SYS_pidfd_open, child, 0, 0, 0);
    if (pidfd < 0 || signals < 0) {
        /* Without them no limit could be enforced: the run does not go on. */
        static const char refusal[] =
            "pynox: cannot watch the run (pidfd_open or signalfd failed); the wall-clock "
            "limit cannot be enforced\n";
        (void)sys_call(SYS_kill, child, SIGKILL, 0, 0);
        (void)reap(child);
        (void)write_all(2, refusal, sizeof refusal - 1);
        sys_exit(EXIT_SETUP_FAILURE);
    }
    char message[MESSAGE_MAX + 1];
    size_t length = 0;
    int reading = 1;
    long deadline = -1;
    const char *line = "";
    for (;;) {
        struct pollfd fds[3] = {
            {(int)pidfd, POLLIN, 0},
            {signals, POLLIN, 0},
            {reading ? control : -1, POLLIN, 0},
        };
        struct timespec_k wait;
        struct timespec_k *timeout = 0;
        if (deadline >= 0) {
            long left = deadline - now_ms();
            if (left <= 0) {
                (void)sys_call(SYS_kill, child, SIGKILL, 0, 0);
                (void)reap(child);
                (void)write_all(2, line, length_of(line));
                sys_exit(EXIT_TIMEOUT);
            }
            wait.tv_sec = left / 1000;
            wait.tv_nsec = (left % 1000) * 1000000;
            timeout = &wait;
        }
        long ready = sys_call5(SYS_ppoll, (long)fds, 3, (long)timeout, 0, sizeof(unsigned long));
        if (ready < 0 && ready != -LAUNCHER_EINTR) {
            end_like(reap(child));
        }
        if (fds[2].revents != 0) {
            long got = sys_read(control, message + length, MESSAGE_MAX - length);
            if (got > 0) {
                length += (size_t)got;
            }
            if (got == 0 || length == MESSAGE_MAX || (got < 0 && got != -LAUNCHER_EINTR)) {
                reading = 0;
                (void)sys_close(control);
                long ms = parse_message(message, length, &line);
                if (ms > 0) {
                    deadline = now_ms() + ms;
                }
            }
        }
        if (fds[1].revents != 0) {
            struct signalfd_siginfo_k info;
            if (sys_read(signals, &info, sizeof info) == (long)sizeof info && info.ssi_code <= 0) {
                /* Sent by a process (kill, sigqueue): the child's to have. */
                (void)sys_call(SYS_kill, child, (long)info.ssi_signo, 0, 0);
            }
        }
        if (fds[0].revents != 0) {
            end_like(reap(child));
        }
    }
}

int supervise(char *entry, char *helper_entry, size_t size, int *helper)
{
    int ends[2];
    int scratch[2] = {-1, -1};
    if (sys_call(SYS_pipe2, (long)ends, 0, 0, 0) != 0) {
        return 0;
    }
    if (sys_call(SYS_fcntl, ends[0], LAUNCHER_F_SETFD, LAUNCHER_FD_CLOEXEC, 0) != 0) {
        (void)sys_close(ends[0]);
        (void)sys_close(ends[1]);
        return 0;
    }
    *helper = scratch_helper_pipe(scratch) == 0;
    unsigned long forwarded = bit(SIGTERM) | bit(SIGHUP) | bit(SIGINT) | bit(SIGQUIT);
    unsigned long old_mask = 0;
    /* Blocked before the fork, so that none is lost between it and the signalfd. */
    long blocked = sys_call(SYS_rt_sigprocmask, SIG_BLOCK, (long)&forwarded, (long)&old_mask,
                            sizeof forwarded);
    long parent = sys_getpid();
    long child = blocked == 0 ? sys_fork() : -1;
    if (child == 0) {
        (void)sys_call(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old_mask, 0, sizeof old_mask);
        (void)sys_close(ends[0]);
        if (*helper) {
            (void)sys_close(scratch[0]);
            *helper = scratch_helper_entry(helper_entry, size, scratch[1], sys_getpid());
            if (!*helper) {
                (void)sys_close(scratch[1]);
            }
        }
        size_t n = 0;
        if (buf_append(entry, size, &n, SUPERVISOR_VARIABLE "=") != 0
            || buf_append_long(entry, size, &n, ends[1]) != 0
            || buf_append(entry, size, &n, ":") != 0
            || buf_append_long(entry, size, &n, parent) != 0) {
            (void)sys_close(ends[1]);  /* the supervisor sees no limit: it only waits */
            return 0;
        }
        return 1;
    }
    (void)sys_close(ends[1]);
    if (*helper) {
        (void)sys_close(scratch[1]);
    }
    if (child < 0) {
        (void)sys_close(ends[0]);
        if (*helper) {
            (void)sys_close(scratch[0]);  /* no helper: nothing holds its pipe */
        }
        if (blocked == 0) {
            (void)sys_call(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old_mask, 0, sizeof old_mask);
        }
        *helper = 0;
        return 0;
    }
    /* Started while the interpreter starts, off its path. */
    if (*helper) {
        scratch_helper_spawn(scratch[0]);
    }
    long signals = sys_call(SYS_signalfd4, -1, (long)&forwarded, sizeof forwarded, SFD_CLOEXEC);
    watch(child, ends[0], (int)signals);
}
