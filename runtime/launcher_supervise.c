/* The launcher as the supervisor of a run.
 *
 * A run with a wall-clock limit used to fork a second copy of the interpreter to
 * watch the clock; that fork, and the pages the child then copies, cost more than
 * the rest of the run. Instead the launcher forks before it execs the interpreter and
 * stays behind as the parent, a process of a few pages:
 *
 *   - pynox (the child) writes on a pipe, before any program runs, the limit in
 *     milliseconds and the line to print when it is reached, then closes the pipe;
 *     a run pynox supervises itself closes it without a word;
 *   - under a memory limit, pynox also sends the lines to print when native code ends
 *     the program (a signal, or an exit before Python saw the program to its end,
 *     which the program's process says with a byte on a second pipe);
 *   - the supervisor waits for the child's end (a pidfd), the pipe and the deadline;
 *     at the deadline it kills the child, prints the line and exits 124;
 *   - signals a process sends the supervisor (kill, sigqueue) go on to the child, as
 *     if sent to python itself: every one but SIGKILL and SIGSTOP, which cannot be
 *     caught; those from the terminal reach the child by themselves, since both stay in
 *     the terminal's foreground process group. A child with no terminal (--json, unless
 *     granted it, or none at all) leaves that group, so that a signal sent to the whole
 *     group reaches it once, from here; the terminal's signals are then passed on too;
 *   - when the job is stopped (Ctrl-Z, or SIGTSTP, SIGTTIN or SIGTTOU sent to the
 *     supervisor or its process group) and the child stops, the supervisor stops too,
 *     by the same signal, so that a shell sees the job stopped as it would see python;
 *     a SIGCONT continues it, and goes on to the child. A child that stops on its own
 *     (SIGSTOP to itself) does not stop the supervisor: its deadline still ends the run;
 *   - at the end it exits with the child's status, or dies of the child's signal.
 *
 * The child is bound to this process (PR_SET_PDEATHSIG, set by the sandbox), so
 * killing the supervisor ends the run too.
 */
#include "launcher_supervise.h"

#include "launcher_result.h"
#include "launcher_scratch.h"
#include "launcher_sys.h"

#define SIGKILL 9
#define SIGCHLD 17
#define SIGCONT 18
#define SIGSTOP 19
#define SIGTSTP 20
#define SIGTTOU 22
#define SIG_BLOCK 0
#define SIG_UNBLOCK 1
#define SIG_SETMASK 2
#define POLLIN 0x001
#define P_PID 1
#define WNOHANG 1
#define WSTOPPED 2
#define CLD_STOPPED 5
/* How long after this process was sent a job-control stop a stop of the child counts as
 * the job's: the child takes it within microseconds, unless it blocks it. */
#define JOB_STOP_WINDOW_MS 1000
#define CLOCK_MONOTONIC 1
#define RLIMIT_CORE 4
#define EXIT_TIMEOUT 124
#define SFD_CLOEXEC 02000000
#define EXIT_SETUP_FAILURE 125
/* What the program's process writes on the end pipe once Python saw the program to its
 * end (pynox.engine.child_setup.PYTHON_FINISHED). */
#define PYTHON_FINISHED '\x04'

/* Where the message starts; it grows by doubling. */
#define MESSAGE_START 4096
#define READ_CHUNK 65536

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

/* What waitid() tells of a child (siginfo_t's layout on 64-bit Linux). */
struct child_state_k {
    int si_signo;
    int si_errno;
    int si_code;
    int padding;
    int si_pid;
    unsigned int si_uid;
    int si_status;
    unsigned char rest[100];
};

struct rlimit_k {
    unsigned long current;
    unsigned long maximum;
};

static unsigned long bit(int signal)
{
    return 1UL << (signal - 1);
}

/* The signals this process reads from its signalfd instead of taking them: every one it
 * can catch (see the top of this file). A real fault of this process still ends it: the
 * kernel unblocks SIGSEGV and its kind to deliver one. */
static unsigned long watched_signals(void)
{
    return ~0UL & ~(bit(SIGKILL) | bit(SIGSTOP));
}

static int is_job_stop(int signal)
{
    return signal >= SIGTSTP && signal <= SIGTTOU;  /* SIGTSTP, SIGTTIN, SIGTTOU */
}

/* The watched signals sent to this process and not read yet (none if that cannot be
 * told). */
static unsigned long pending_signals(void)
{
    unsigned long pending = 0;
    if (sys_call(SYS_rt_sigpending, (long)&pending, sizeof pending, 0, 0) != 0) {
        return 0;
    }
    return pending;
}

/* A job-control stop sent to this process and not read yet, or 0. A stop sent to the
 * whole process group is still pending here when the child's SIGCHLD, a lower number,
 * is read first. */
static int pending_job_stop(void)
{
    unsigned long pending = pending_signals();
    for (int signal = SIGTSTP; is_job_stop(signal); signal++) {
        if (pending & bit(signal)) {
            return signal;
        }
    }
    return 0;
}

/* Whether the child left this process's group (pynox.engine.job_group); not if either
 * group cannot be told. */
static int in_another_group(long child)
{
    long own = sys_call(SYS_getpgid, 0, 0, 0, 0);
    long childs = sys_call(SYS_getpgid, child, 0, 0, 0);
    return own >= 0 && childs >= 0 && own != childs;
}

/* If the child has stopped and the job was stopped (job_stop: the job-control stop this
 * process was just sent, or 0 to look for one pending), stops this process by that
 * signal and returns 1 once it is continued. A child stopped by anything else is left
 * so, with this process watching its deadline. Asks for stops only (no WEXITED): the
 * child's end is reaped elsewhere. */
static int stop_with_child(long child, int job_stop)
{
    struct child_state_k state = {0, 0, 0, 0, 0, 0, 0, {0}};
    long got = sys_call5(SYS_waitid, P_PID, child, (long)&state, WSTOPPED | WNOHANG, 0);
    if (got != 0 || state.si_pid != child || state.si_code != CLD_STOPPED) {
        return 0;
    }
    int signal = job_stop != 0 ? job_stop : pending_job_stop();
    if (signal == 0) {
        return 0;
    }
    /* Sent while still blocked, then let through: if a stop sent to the whole process
     * group is pending here already, the two are one, and this process stops once. */
    unsigned long stop = bit(signal);
    (void)sys_call(SYS_kill, sys_getpid(), signal, 0, 0);
    (void)sys_call(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&stop, 0, sizeof stop);  /* stops */
    (void)sys_call(SYS_rt_sigprocmask, SIG_BLOCK, (long)&stop, 0, sizeof stop);
    /* Continued, this process has the SIGCONT (the stop dropped any sent before it) to
     * pass on. Without one, it did not stop: the kernel drops a job-control stop for an
     * orphaned process group (no member's parent in another group of its session, a job
     * runner's setsid()), as it would have for python there. The child stopped all the
     * same if it is in a group of its own, which this process keeps from being orphaned:
     * it goes on too. */
    if (!(pending_signals() & bit(SIGCONT)) && in_another_group(child)) {
        (void)sys_call(SYS_kill, child, SIGCONT, 0, 0);
    }
    return 1;
}

/* Whether the child is stopped by a signal (or for a tracer), as the state in
 * /proc/PID/stat says; 0 when that cannot be read. */
static int child_stopped(long child)
{
    char path[48] = "/proc/";
    size_t n = 6;
    char digits[24];
    size_t count = 0;
    unsigned long value = (unsigned long)child;
    do {
        digits[count++] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    while (count > 0) {
        path[n++] = digits[--count];
    }
    const char *name = "/stat";
    for (size_t i = 0; name[i] != '\0'; i++) {
        path[n++] = name[i];
    }
    path[n] = '\0';
    long fd = sys_openat(LAUNCHER_AT_FDCWD, path, LAUNCHER_O_RDONLY | LAUNCHER_O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    static char stat[1024];  /* the state comes early: after the pid and the name */
    size_t used = 0;
    long got;
    do {
        got = sys_read((int)fd, stat + used, sizeof stat - used);
        if (got > 0) {
            used += (size_t)got;
        }
    } while ((got > 0 && used < sizeof stat) || got == -LAUNCHER_EINTR);
    (void)sys_close((int)fd);
    /* "PID (NAME) STATE ...": the name, which may hold ')', ends at the last one. */
    size_t after = used;
    while (after > 0 && stat[after - 1] != ')') {
        after--;
    }
    if (after == 0 || after + 1 >= used) {
        return 0;
    }
    return stat[after + 1] == 'T' || stat[after + 1] == 't';
}

/* Whether the child has ended, its pidfd readable, without waiting. */
static int child_ended(long pidfd)
{
    struct pollfd ended = {(int)pidfd, POLLIN, 0};
    return sys_call5(SYS_ppoll, (long)&ended, 1, (long)&(struct timespec_k){0, 0}, 0,
                     sizeof(unsigned long)) == 1;
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

/* What pynox sends: netstrings (launcher_result.h), as pynox/engine/launcher_link.py
 * writes them. */
struct message {
    char *data;
    size_t length;
    size_t size;
    long limit_ms;       /* 0: none */
    struct text line;    /* printed at the deadline, when not capturing */
    struct text stopped_line;  /* the same, when a stop signal had stopped the program */
    int memory;          /* a memory limit: the two below say what native code's end prints */
    struct text exit_line;     /* an exit before Python saw the program to its end */
    struct text signal_lines;  /* one line per signal from 1; an empty line: none */
    int capture;         /* the result is this process's to write (--json) */
    struct result_frame frame;
};

/* Reads what is there of the message; 1 once it is complete (or cannot be read). */
static int read_message(int control, struct message *message)
{
    if (message->length == message->size) {
        size_t size = message->size * 2;
        char *larger = sys_alloc(size);
        if (larger == NULL) {
            return 1;
        }
        memcpy(larger, message->data, message->length);
        sys_free(message->data, message->size);
        message->data = larger;
        message->size = size;
    }
    long got = sys_read(control, message->data + message->length, message->size - message->length);
    if (got == -LAUNCHER_EINTR || got == -11 /* EAGAIN */) {
        return 0;
    }
    if (got > 0) {
        message->length += (size_t)got;
        return 0;
    }
    return 1;
}

static long decimal(struct text text)
{
    long value = 0;
    if (text.length == 0 || text.length > 15) {
        return -1;
    }
    for (size_t i = 0; i < text.length; i++) {
        if (text.data[i] < '0' || text.data[i] > '9') {
            return -1;
        }
        value = value * 10 + (text.data[i] - '0');
    }
    return value;
}

/* Parses the whole message: 0, or -1 if it does not parse (then with no limit, no
 * memory lines, and capturing nothing). */
static int parse_message(struct message *message)
{
    struct text all = {message->data, message->length};
    struct text ms;
    struct text kind;
    struct text capture;
    struct text max_output;
    struct text report_limit;
    size_t at = 0;
    message->limit_ms = 0;
    message->memory = 0;
    message->capture = 0;
    if (message->data == NULL || netstring(all, &at, &ms) != 0
        || netstring(all, &at, &message->line) != 0
        || netstring(all, &at, &message->stopped_line) != 0 || decimal(ms) < 0) {
        return -1;
    }
    message->limit_ms = decimal(ms);
    if (at == all.length) {
        return 0;
    }
    size_t after_kind = at;
    if (netstring(all, &after_kind, &kind) != 0) {
        return -1;
    }
    if (text_is(kind, "memory")) {
        at = after_kind;
        if (netstring(all, &at, &message->exit_line) != 0
            || netstring(all, &at, &message->signal_lines) != 0) {
            return -1;
        }
        message->memory = 1;
        if (at == all.length) {
            return 0;
        }
    }
    struct result_frame *frame = &message->frame;
    if (netstring(all, &at, &capture) != 0 || netstring(all, &at, &max_output) != 0
        || netstring(all, &at, &report_limit) != 0 || netstring(all, &at, &frame->layout) != 0
        || netstring(all, &at, &frame->timeout_error) != 0
        || netstring(all, &at, &frame->stopped_error) != 0
        || netstring(all, &at, &frame->signal_names) != 0 || decimal(max_output) < 0
        || decimal(report_limit) < 0) {
        return -1;
    }
    frame->max_output = (size_t)decimal(max_output);
    frame->report_limit = (size_t)decimal(report_limit);
    frame->hints.data = all.data + at;
    frame->hints.length = all.length - at;
    message->capture = 1;
    return 0;
}

/* The run's captured streams: stdout, stderr and pynox's error report. */
#define STREAMS 3

struct streams {
    int fds[STREAMS];  /* read ends; -1 once closed */
    struct capture captures[STREAMS];
};

static void close_streams(struct streams *streams)
{
    for (int i = 0; i < STREAMS; i++) {
        if (streams->fds[i] >= 0) {
            (void)sys_close(streams->fds[i]);
            streams->fds[i] = -1;
        }
    }
}

static int streams_open(const struct streams *streams)
{
    for (int i = 0; i < STREAMS; i++) {
        if (streams->fds[i] >= 0) {
            return 1;
        }
    }
    return 0;
}

/* child: the run's pid, or 0 once reaped (then no longer its to signal: the kernel may
 * have given the pid to another process). */
static _Noreturn void refuse(long child, const char *why)
{
    if (child > 0) {
        (void)sys_call(SYS_kill, child, SIGKILL, 0, 0);
        (void)reap(child);
    }
    (void)write_all(2, why, length_of(why));
    sys_exit(EXIT_SETUP_FAILURE);
}

/* Whether the program's process wrote PYTHON_FINISHED on the end pipe (read without
 * waiting: a process the program's started may still hold its write end). */
static int python_finished(int end)
{
    char byte = 0;
    long got;
    do {
        got = sys_read(end, &byte, 1);
    } while (got == -LAUNCHER_EINTR);
    return got == 1 && byte == PYTHON_FINISHED;
}

/* Under a memory limit, whether native code ended the program as it does when an
 * allocation fails: by a signal that has a line, or by an exit with a failure status
 * before Python saw the program to its end (pynox/engine/result.py decides alike when
 * pynox supervises a run itself). */
static void native_end(const struct message *message, int end_pipe, struct run_end *end)
{
    int signal = end->status & 0x7f;
    int code = (end->status >> 8) & 0xff;
    if (!message->memory || end->timed_out) {
        return;
    }
    if (signal != 0) {
        end->native_signal = numbered_line(message->signal_lines, signal).length > 0;
    } else {
        end->native_exit = code != 0 && code != EXIT_SETUP_FAILURE && !python_finished(end_pipe);
    }
}

/* The line for native code's end, when the run's result is not this process's to write. */
static void print_native_end(const struct message *message, const struct run_end *end)
{
    struct text line = {NULL, 0};
    if (end->native_signal) {
        line = numbered_line(message->signal_lines, end->status & 0x7f);
    } else if (end->native_exit) {
        line = message->exit_line;
    }
    if (line.length > 0) {
        (void)write_all(2, line.data, line.length);
        (void)write_all(2, "\n", 1);
    }
}

static _Noreturn void watch(long child, int control, int end_pipe, int signals,
                            struct streams *streams)
{
    long pidfd = sys_call(SYS_pidfd_open, child, 0, 0, 0);
    if (pidfd < 0 || signals < 0) {
        /* Without them no limit could be enforced: the run does not go on. */
        refuse(child, "pynox: cannot watch the run (pidfd_open or signalfd failed); the "
                      "wall-clock limit cannot be enforced\n");
    }
    struct message message = {sys_alloc(MESSAGE_START), 0, MESSAGE_START, 0, {"", 0},
                              {"", 0}, 0, {NULL, 0}, {NULL, 0}, 0,
                              {0, 0, {NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0}, {NULL, 0}}};
    int reading = message.data != NULL;
    if (!reading) {
        close_streams(streams);
        (void)sys_close(control);
    }
    long deadline = -1;
    long started = 0;
    struct run_end end = {0, 0, 0, 0, 0, 0};
    int exited = 0;
    int job_stop = 0;  /* the last job-control stop this process was sent, and when */
    long job_stop_at = 0;
    static char chunk[READ_CHUNK];
    for (;;) {
        int capturing = !reading && message.capture;
        if (exited && !reading && !(capturing && streams_open(streams))) {
            break;
        }
        struct pollfd fds[3 + STREAMS] = {
            {exited ? -1 : (int)pidfd, POLLIN, 0},
            {signals, POLLIN, 0},
            {reading ? control : -1, POLLIN, 0},
        };
        for (int i = 0; i < STREAMS; i++) {
            fds[3 + i].fd = capturing ? streams->fds[i] : -1;
            fds[3 + i].events = POLLIN;
            fds[3 + i].revents = 0;
        }
        struct timespec_k wait;
        struct timespec_k *timeout = 0;
        if (deadline >= 0) {
            long left = deadline - now_ms();
            if (left <= 0 && child_ended(pidfd)) {
                /* It ended before this process got to its deadline (this process was
                 * stopped, or slow to run): its end, not a timeout, and the pid, reaped
                 * next, is no longer its to signal. */
                left = 0;
                deadline = -1;
            } else if (left <= 0) {
                /* Stopped, no longer limit would help it; unless the job was just
                 * continued, and the SIGCONT that resumed this process, still unread,
                 * is the child's to have (its only one, out of this process group). */
                end.stopped = child_stopped(child) && !(pending_signals() & bit(SIGCONT));
                (void)sys_call(SYS_kill, child, SIGKILL, 0, 0);
                if (!capturing) {
                    (void)reap(child);
                    struct text line = end.stopped ? message.stopped_line : message.line;
                    (void)write_all(2, line.data, line.length);
                    sys_exit(EXIT_TIMEOUT);
                }
                /* What the program wrote until then still goes into the result. */
                end.timed_out = 1;
                deadline = -1;
                continue;
            }
            wait.tv_sec = left / 1000;
            wait.tv_nsec = (left % 1000) * 1000000;
            timeout = &wait;
        }
        long ready = sys_call5(SYS_ppoll, (long)fds, 3 + STREAMS, (long)timeout, 0,
                               sizeof(unsigned long));
        if (ready < 0 && ready != -LAUNCHER_EINTR) {
            if (capturing) {
                refuse(exited ? 0 : child,
                       "pynox: cannot wait for the run's output (ppoll failed)\n");
            }
            end_like(exited ? end.status : reap(child));
        }
        if (fds[2].revents != 0 && read_message(control, &message)) {
            reading = 0;
            (void)sys_close(control);
            if (parse_message(&message) != 0 && message.length > 0 && streams->fds[0] >= 0) {
                /* pynox may be about to write into the pipes: nobody would read them.
                 * (No message at all: pynox ended before any run, a usage error say.) */
                refuse(exited ? 0 : child,
                       "pynox: cannot read what pynox told the launcher; run it again\n");
            }
            started = now_ms();
            if (message.limit_ms > 0) {
                deadline = started + message.limit_ms;
            }
            if (message.capture) {
                const size_t limits[STREAMS] = {message.frame.max_output,
                                                message.frame.max_output,
                                                message.frame.report_limit};
                for (int i = 0; i < STREAMS; i++) {
                    if (streams->fds[i] < 0 || capture_init(&streams->captures[i], limits[i]) != 0) {
                        refuse(exited ? 0 : child,
                               "pynox: cannot capture the run's output (no memory, or no "
                               "pipes from the launcher)\n");
                    }
                }
            } else {
                close_streams(streams);  /* pynox does not capture, or sent no message */
            }
        }
        for (int i = 0; i < STREAMS; i++) {
            if (fds[3 + i].revents == 0) {
                continue;
            }
            long got = sys_read(streams->fds[i], chunk, sizeof chunk);
            if (got > 0) {
                capture_add(&streams->captures[i], chunk, (size_t)got);
            } else if (got != -LAUNCHER_EINTR) {
                (void)sys_close(streams->fds[i]);
                streams->fds[i] = -1;
            }
        }
        if (fds[1].revents != 0) {
            struct signalfd_siginfo_k info;
            if (sys_read(signals, &info, sizeof info) == (long)sizeof info) {
                /* Sent by a process (kill, sigqueue): the child's to have, while it has
                 * its pid (not once reaped, while its output is still read). A child that
                 * left this process group (pynox.engine.job_group: --json, unless granted
                 * the terminal) gets the terminal's signals (Ctrl-C, Ctrl-Z) only through
                 * here too. */
                int from_process = info.ssi_code <= 0;
                if (!exited && (from_process
                                || (info.ssi_signo != SIGCHLD && in_another_group(child)))) {
                    (void)sys_call(SYS_kill, child, (long)info.ssi_signo, 0, 0);
                }
                if (is_job_stop((int)info.ssi_signo)) {
                    job_stop = (int)info.ssi_signo;
                    job_stop_at = now_ms();
                }
                if (info.ssi_signo == SIGCHLD && !exited) {
                    int recent = now_ms() - job_stop_at <= JOB_STOP_WINDOW_MS ? job_stop : 0;
                    if (stop_with_child(child, recent)) {
                        job_stop = 0;
                    }
                }
            }
        }
        if (fds[0].revents != 0) {
            end.status = reap(child);
            end.duration_ns = (now_ms() - started) * 1000000;
            exited = 1;
            deadline = -1;  /* what it left in its pipes is read whatever the time */
        }
    }
    if (!reading) {
        native_end(&message, end_pipe, &end);
    }
    if (!message.capture || reading) {
        print_native_end(&message, &end);
        end_like(end.status);
    }
    sys_exit(write_result(1, &message.frame, &streams->captures[0], &streams->captures[1],
                          &streams->captures[2], &end));
}

/* Three pipes for a captured run; their read ends (close-on-exec) stay here, their
 * write ends go in the variable's entry, "OUT,ERR,REPORT:PID". 0, or -1. */
static int capture_pipes(struct streams *streams, int writes[STREAMS])
{
    for (int i = 0; i < STREAMS; i++) {
        int ends[2];
        if (sys_call(SYS_pipe2, (long)ends, 0, 0, 0) != 0) {
            return -1;
        }
        streams->fds[i] = ends[0];
        writes[i] = ends[1];
        if (sys_call(SYS_fcntl, ends[0], LAUNCHER_F_SETFD, LAUNCHER_FD_CLOEXEC, 0) != 0) {
            return -1;
        }
    }
    return 0;
}

static int capture_entry(char *entry, size_t size, const int writes[STREAMS], long parent)
{
    size_t n = 0;
    if (buf_append(entry, size, &n, CAPTURE_VARIABLE "=") != 0) {
        return 0;
    }
    for (int i = 0; i < STREAMS; i++) {
        if ((i > 0 && buf_append(entry, size, &n, ",") != 0)
            || buf_append_long(entry, size, &n, writes[i]) != 0) {
            return 0;
        }
    }
    return buf_append(entry, size, &n, ":") == 0 && buf_append_long(entry, size, &n, parent) == 0;
}

/* A caller may start pynox with SIGCHLD ignored, which exec keeps: the kernel would then
 * reap the child the moment it ended, and its status would be lost. This process waits
 * with the default action instead; the child puts the caller's back before it execs the
 * interpreter (restore_child_action), so that the program finds it as python would.
 * Returns 0, or -1 when the action can be neither read nor set: then there is no fork,
 * and the interpreter supervises the run itself. */
static int wait_with_default_child_action(struct sigaction_k *caller)
{
    if (sys_call(SYS_rt_sigaction, SIGCHLD, 0, (long)caller, sizeof(unsigned long)) != 0) {
        return -1;
    }
    if (caller->handler != LAUNCHER_SIG_IGN) {
        return 0;
    }
    struct sigaction_k default_action = {0, 0, 0, 0};
    return sys_call(SYS_rt_sigaction, SIGCHLD, (long)&default_action, 0, sizeof(unsigned long))
                   == 0
               ? 0
               : -1;
}

static long restore_child_action(const struct sigaction_k *caller)
{
    if (caller->handler != LAUNCHER_SIG_IGN) {
        return 0;
    }
    return sys_call(SYS_rt_sigaction, SIGCHLD, (long)caller, 0, sizeof(unsigned long));
}

/* A caller may start pynox with some of its standard descriptors closed. The pipes
 * below would then take them, and the program would find one of them as its stdin,
 * stdout or stderr: the launcher's control pipe as stderr, say, whose reader here
 * keeps all that the program writes. So each closed one is held, until the exec, by a
 * descriptor of "/" opened O_PATH and close-on-exec: the launcher's pipes go above
 * them, and the program finds them closed, as python would. This process, which never
 * execs, keeps them: writing to one fails as writing to a closed descriptor does.
 * 0, or -1 if one cannot be held (those held so far go at the exec). */
static int hold_closed_standard_descriptors(void)
{
    for (int fd = 0; fd < 3; fd++) {
        long flags = sys_call(SYS_fcntl, fd, LAUNCHER_F_GETFD, 0, 0);
        if (flags >= 0) {
            continue;
        }
        if (flags != -LAUNCHER_EBADF) {
            return -1;
        }
        /* The lowest free descriptor: this one, since those below it are open. */
        long held = sys_openat(LAUNCHER_AT_FDCWD, "/",
                               LAUNCHER_O_PATH | LAUNCHER_O_DIRECTORY | LAUNCHER_O_CLOEXEC);
        if (held < 0) {
            return -1;
        }
        if (held != fd) {
            (void)sys_close((int)held);  /* an O_PATH descriptor: nothing to lose */
            return -1;
        }
    }
    return 0;
}

int supervise(struct supervision *entries, int capture, const char *tmpdir)
{
    int ends[2];
    int end_pipe[2];
    struct scratch_pipes scratch;
    struct streams streams = {{-1, -1, -1}, {{0}, {0}, {0}}};
    int writes[STREAMS] = {-1, -1, -1};
    /* Without them, pynox supervises the run itself, as without the launcher. */
    if (hold_closed_standard_descriptors() != 0) {
        return 0;
    }
    if (sys_call(SYS_pipe2, (long)ends, 0, 0, 0) != 0) {
        return 0;
    }
    if (sys_call(SYS_fcntl, ends[0], LAUNCHER_F_SETFD, LAUNCHER_FD_CLOEXEC, 0) != 0) {
        (void)sys_close(ends[0]);
        (void)sys_close(ends[1]);
        return 0;
    }
    /* Both ends without waiting: the program's process writes one byte at most. */
    if (sys_call(SYS_pipe2, (long)end_pipe, LAUNCHER_O_NONBLOCK, 0, 0) != 0) {
        (void)sys_close(ends[0]);
        (void)sys_close(ends[1]);
        return 0;
    }
    if (sys_call(SYS_fcntl, end_pipe[0], LAUNCHER_F_SETFD, LAUNCHER_FD_CLOEXEC, 0) != 0) {
        for (int i = 0; i < 2; i++) {
            (void)sys_close(ends[i]);
            (void)sys_close(end_pipe[i]);
        }
        return 0;
    }
    /* Without its pipes, a captured run is supervised by pynox, as without the launcher. */
    if (capture && capture_pipes(&streams, writes) != 0) {
        close_streams(&streams);
        for (int i = 0; i < STREAMS; i++) {
            if (writes[i] >= 0) {
                (void)sys_close(writes[i]);
                writes[i] = -1;
            }
        }
    }
    entries->helper = scratch_helper_pipes(&scratch) == 0;
    struct sigaction_k caller_child_action = {0, 0, 0, 0};
    int waits = wait_with_default_child_action(&caller_child_action) == 0;
    unsigned long watched = watched_signals();
    unsigned long old_mask = 0;
    /* Blocked before the fork, so that none is lost between it and the signalfd. */
    long blocked = waits ? sys_call(SYS_rt_sigprocmask, SIG_BLOCK, (long)&watched,
                                    (long)&old_mask, sizeof watched)
                         : -1;
    long parent = sys_getpid();
    long child = blocked == 0 ? sys_fork() : -1;
    if (child == 0) {
        /* Should this fail, the program finds SIGCHLD at its default instead: nothing it
         * may do (it cannot start processes) behaves otherwise. */
        (void)restore_child_action(&caller_child_action);
        (void)sys_call(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old_mask, 0, sizeof old_mask);
        (void)sys_close(ends[0]);
        (void)sys_close(end_pipe[0]);
        close_streams(&streams);
        if (entries->helper) {
            scratch_helper_close(&scratch, 1);
            entries->helper = scratch_helper_entry(entries->helper_entry,
                                                   sizeof entries->helper_entry, &scratch,
                                                   sys_getpid());
            if (!entries->helper) {
                scratch_helper_close(&scratch, 0);
            }
        }
        entries->capture = writes[0] >= 0
                           && capture_entry(entries->capture_entry, sizeof entries->capture_entry,
                                            writes, parent);
        size_t n = 0;
        char *entry = entries->supervisor_entry;
        size_t size = sizeof entries->supervisor_entry;
        if (buf_append(entry, size, &n, SUPERVISOR_VARIABLE "=") != 0
            || buf_append_long(entry, size, &n, ends[1]) != 0
            || buf_append(entry, size, &n, ",") != 0
            || buf_append_long(entry, size, &n, end_pipe[1]) != 0
            || buf_append(entry, size, &n, ":") != 0
            || buf_append_long(entry, size, &n, parent) != 0) {
            (void)sys_close(ends[1]);  /* the supervisor sees no limit: it only waits */
            (void)sys_close(end_pipe[1]);
            return 0;
        }
        return 1;
    }
    (void)sys_close(ends[1]);
    (void)sys_close(end_pipe[1]);
    for (int i = 0; i < STREAMS; i++) {
        if (writes[i] >= 0) {
            (void)sys_close(writes[i]);
        }
    }
    if (entries->helper) {
        scratch_helper_close(&scratch, 0);
    }
    if (child < 0) {
        (void)sys_close(ends[0]);
        (void)sys_close(end_pipe[0]);
        close_streams(&streams);
        if (entries->helper) {
            scratch_helper_close(&scratch, 1);  /* no helper: nothing holds its pipes */
        }
        if (blocked == 0) {
            (void)sys_call(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old_mask, 0, sizeof old_mask);
        }
        /* The interpreter runs in this process now: as the caller started it. */
        (void)restore_child_action(&caller_child_action);
        entries->helper = 0;
        return 0;
    }
    /* Started while the interpreter starts, off its path. */
    if (entries->helper) {
        scratch_helper_spawn(&scratch, tmpdir, child);
    }
    long signals = sys_call(SYS_signalfd4, -1, (long)&watched, sizeof watched, SFD_CLOEXEC);
    watch(child, ends[0], end_pipe[0], (int)signals, &streams);
}
