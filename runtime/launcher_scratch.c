/* The helper that makes a run's scratch directory, and removes it once the run's
 * process ends.
 *
 * A sandboxed process may empty its scratch directory but never remove it: that is a
 * change to the directory above. So the launcher starts a helper before it execs the
 * interpreter: a copy of this small static process, in a session of its own, away
 * from the terminal's signals, which outlives the supervisor and nobody waits for.
 *
 * While the interpreter starts, the helper makes a directory where pynox would make
 * the run's (pynox.engine.scratch.create) and writes its name on a pipe of its own,
 * which it then closes: pynox takes that directory instead of making one, so that the
 * mkdir (a fraction of a millisecond, more on a busy file system) is off the run's
 * path. pynox then writes the path of the directory the run uses on the other pipe,
 * before any program runs, and keeps that pipe's write end open until its process
 * ends, however it ends. The helper reads that one line, waits for the end of the
 * pipe and for the end of the run's process (a program may close the pipe: it closes
 * every descriptor it finds, as daemons do), then removes that directory and the one
 * it made (if pynox did not take it), without following any link in them. Whatever
 * comes after the first line is ignored: only pynox writes before the program runs.
 *
 * The launcher, staying behind as the run's supervisor (launcher_supervise.c), forks
 * it while the interpreter starts: off the run's path, and a fraction of the cost of
 * the /bin/sh helper pynox spawns itself without the launcher (pynox.engine.scratch).
 */
#include "launcher_scratch.h"

#include "launcher_sys.h"

struct dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Directory descriptors held at once while removing a tree. A program may nest
 * directories far deeper than that, or than any path: then only some levels of the path
 * being removed are held, spread along it, and the levels between two held ones are
 * walked down again from the upper one once the lower is done. */
#define HELD 64
#define LISTING 1024

struct level {
    int fd;
    int removed;              /* whether this pass over its listing removed anything */
    unsigned long depth;      /* below the tree's top, which is 0 */
    long long offset;         /* where its listing goes on: past the entries dealt with */
    long long entry_offset;   /* where the entry last gone into is in the listing */
    unsigned long long went_in;  /* how many entries had been removed then */
};

struct removal {
    struct level levels[HELD];  /* the path's top, and held levels ever deeper */
    int held;
    unsigned long long removals;  /* entries removed so far */
};

static int is_dot_or_dot_dot(const char *name)
{
    return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* Removes the entry `name` of the directory at `at` if it is a file, a link or an empty
 * directory. Returns 1 if it is a directory with something in it, to go into. */
static int remove_entry(struct removal *removal, struct level *at, const char *name,
                        unsigned char type)
{
    long gone = -LAUNCHER_EISDIR;
    if (type != LAUNCHER_DT_DIR) {
        gone = sys_call(SYS_unlinkat, at->fd, (long)name, 0, 0);  /* a link is not followed */
    }
    if (gone == -LAUNCHER_EISDIR) {  /* a directory (whatever d_type said) */
        gone = sys_call(SYS_unlinkat, at->fd, (long)name, LAUNCHER_AT_REMOVEDIR, 0);
        if (gone == -LAUNCHER_ENOTEMPTY || gone == -LAUNCHER_EEXIST) {
            return 1;
        }
    }
    if (gone == 0) {
        at->removed = 1;
        removal->removals++;
    }
    return 0;  /* removed, or it cannot be: left where it is */
}

/* Lets go of one level between the top and the deepest (held >= 3): the one whose two
 * neighbours are closest, the upper of equals, so that held levels spread evenly. */
static void let_go_of_one(struct removal *removal)
{
    struct level *levels = removal->levels;
    int chosen = 1;
    for (int i = 2; i < removal->held - 1; i++) {
        if (levels[i + 1].depth - levels[i - 1].depth
            < levels[chosen + 1].depth - levels[chosen - 1].depth) {
            chosen = i;
        }
    }
    (void)sys_close(levels[chosen].fd);  /* a directory opened for reading: nothing to lose */
    memmove(&levels[chosen], &levels[chosen + 1],
            (size_t)(removal->held - chosen - 1) * sizeof *levels);
    removal->held--;
}

/* Gives the directory `name` in `at` back to its owner (u=rwx) through a descriptor of
 * that very directory, never a link: a program may make one its owner cannot list or
 * enter (mkdir's mode, 0300 say), and fill it, though chmod is refused to it. fchmod
 * takes no O_PATH descriptor, so the mode is set through its /proc/self/fd name, which
 * names the directory itself. 0, or -errno. */
static long give_back(int at, const char *name)
{
    long directory = sys_openat(at, name,
                                LAUNCHER_O_PATH | LAUNCHER_O_DIRECTORY | LAUNCHER_O_NOFOLLOW
                                    | LAUNCHER_O_CLOEXEC);
    if (directory < 0) {
        return directory;
    }
    char link[48];
    size_t n = 0;
    long changed = -LAUNCHER_ENAMETOOLONG;
    if (buf_append(link, sizeof link, &n, "/proc/self/fd/") == 0
        && buf_append_long(link, sizeof link, &n, directory) == 0) {
        changed = sys_call(SYS_fchmodat, LAUNCHER_AT_FDCWD, (long)link, 0700, 0);
    }
    (void)sys_close((int)directory);  /* an O_PATH descriptor: close cannot lose anything */
    return changed;
}

static long open_level(struct removal *removal, const char *name)
{
    const int flags = LAUNCHER_O_RDONLY | LAUNCHER_O_DIRECTORY | LAUNCHER_O_NOFOLLOW
                      | LAUNCHER_O_CLOEXEC;
    long child = sys_openat(removal->levels[removal->held - 1].fd, name, flags);
    while ((child == -LAUNCHER_EMFILE || child == -LAUNCHER_ENFILE) && removal->held >= 3) {
        let_go_of_one(removal);  /* descriptors run short: fewer levels held */
        child = sys_openat(removal->levels[removal->held - 1].fd, name, flags);
    }
    return child;
}

/* Goes into the directory `name` of the deepest level: 1, or 0 if it cannot be opened
 * (gone, or a link put in its place meanwhile). */
static int go_in(struct removal *removal, const char *name)
{
    long child = open_level(removal, name);
    if (child == -LAUNCHER_EACCES
        && give_back(removal->levels[removal->held - 1].fd, name) == 0) {
        child = open_level(removal, name);
    }
    if (child < 0) {
        return 0;
    }
    if (removal->held == HELD) {
        let_go_of_one(removal);
    }
    struct level *next = &removal->levels[removal->held];
    next->fd = (int)child;
    next->removed = 0;
    next->depth = removal->levels[removal->held - 1].depth + 1;
    next->offset = 0;
    removal->held++;
    return 1;
}

/* rm -rf parent/name, through descriptors: a link is removed, never followed, and no
 * directory is reached by "..", so one moved meanwhile takes nothing outside the tree
 * with it. However deep the tree, this holds at most HELD descriptors and no more
 * memory. What cannot be removed (a directory its owner may not write) stays, with
 * what holds it. */
static void remove_tree(int parent, const char *name)
{
    static struct removal removal;
    char listing[LISTING] __attribute__((aligned(8)));
    long top = sys_openat(parent, name,
                          LAUNCHER_O_RDONLY | LAUNCHER_O_DIRECTORY | LAUNCHER_O_NOFOLLOW
                              | LAUNCHER_O_CLOEXEC);
    if (top < 0) {
        (void)sys_call(SYS_unlinkat, parent, (long)name, 0, 0);  /* a file or a link */
        return;
    }
    removal.levels[0].fd = (int)top;
    removal.levels[0].removed = 0;
    removal.levels[0].depth = 0;
    removal.levels[0].offset = 0;
    removal.held = 1;
    removal.removals = 0;
    for (;;) {
        struct level *at = &removal.levels[removal.held - 1];
        long got = -1;
        if (sys_call(SYS_lseek, at->fd, at->offset, LAUNCHER_SEEK_SET, 0) >= 0) {
            got = sys_call(SYS_getdents64, at->fd, (long)listing, sizeof listing, 0);
        }
        int deeper = 0;
        for (long i = 0; i < got && !deeper;) {
            struct dirent64 *entry = (struct dirent64 *)(listing + i);
            i += entry->d_reclen;
            long long position = at->offset;
            at->offset = entry->d_off;
            if (is_dot_or_dot_dot(entry->d_name)
                || !remove_entry(&removal, at, entry->d_name, entry->d_type)) {
                continue;
            }
            at->entry_offset = position;
            at->went_in = removal.removals;
            deeper = go_in(&removal, entry->d_name);
            at = &removal.levels[removal.held - 1 - deeper];  /* moved if levels were let go */
        }
        if (deeper || got > 0) {
            continue;
        }
        if (got == 0 && at->removed) {
            /* Removing entries while listing may hide some from the listing: again. */
            at->offset = 0;
            at->removed = 0;
            continue;
        }
        /* All of it that could go is gone: back to the level above. */
        (void)sys_close(at->fd);  /* a directory opened for reading: nothing to lose */
        if (--removal.held == 0) {
            (void)sys_call(SYS_unlinkat, parent, (long)name, LAUNCHER_AT_REMOVEDIR, 0);
            return;
        }
        struct level *above = &removal.levels[removal.held - 1];
        if (removal.removals != above->went_in) {
            /* The entry gone into again: it goes now if it was emptied; if levels between
             * the two were let go, the walk goes down it again. When nothing was removed
             * since going in, the same walk would find the same: it stays. */
            above->offset = above->entry_offset;
        }
    }
}

/* Reads the path (one line), then waits for the pipe's end. 0 on success.
 *
 * pynox writes the line in one write before any program runs, so the line comes
 * first: it is read in as few reads as the pipe gives it in, and whatever follows
 * its newline (what the program may write later) is read past and ignored. */
static int read_path(int fd, char *path, size_t size)
{
    size_t used = 0;
    char *newline = 0;
    while (newline == 0) {
        if (used == size) {
            return -1;  /* no line that fits: not a path pynox wrote */
        }
        long got = sys_read(fd, path + used, size - used);
        if (got == -LAUNCHER_EINTR) {
            continue;
        }
        if (got <= 0) {
            return -1;  /* the end, or an error, before the line: the process is gone */
        }
        for (char *at = path + used; at < path + used + got; at++) {
            if (*at == '\n') {
                newline = at;
                break;
            }
        }
        used += (size_t)got;
    }
    *newline = '\0';
    char rest[256];
    for (;;) {
        long got = sys_read(fd, rest, sizeof rest);
        if (got == -LAUNCHER_EINTR) {
            continue;
        }
        if (got <= 0) {
            return 0;  /* the end (or an error): the process is gone */
        }
    }
}

/* rm -rf path, for an absolute path whose last part is a name. */
static void remove_path(char *path)
{
    if (path[0] != '/') {
        return;
    }
    char *slash = str_last_slash(path);
    if (slash == path || slash[1] == '\0') {
        return;  /* "/" or a path ending in "/": not a directory a run uses */
    }
    *slash = '\0';
    long parent = sys_openat(LAUNCHER_AT_FDCWD, path,
                             LAUNCHER_O_PATH | LAUNCHER_O_DIRECTORY | LAUNCHER_O_CLOEXEC);
    *slash = '/';
    if (parent >= 0) {
        remove_tree((int)parent, slash + 1);
        (void)sys_close((int)parent);  /* an O_PATH descriptor: nothing to lose */
    }
}

/* Makes base/pynox-run-<12 hex digits>, mode 0700, into path, where base is TMPDIR if
 * it names a directory by an absolute path, else /tmp: where and as
 * pynox.engine.scratch.create makes one. Then writes its name and a newline on fd.
 * 0 once it made it (whether the write worked or not), -1 if it did not. */
static int make_directory(const char *tmpdir, int fd, char *path, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    const char *base = "/tmp";
    if (tmpdir != NULL && tmpdir[0] == '/') {
        long found = sys_openat(LAUNCHER_AT_FDCWD, tmpdir,
                                LAUNCHER_O_PATH | LAUNCHER_O_DIRECTORY | LAUNCHER_O_CLOEXEC);
        if (found >= 0) {
            (void)sys_close((int)found);  /* an O_PATH descriptor: nothing to lose */
            base = tmpdir;
        }
    }
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned char random[6];
        if (sys_call(SYS_getrandom, (long)random, sizeof random, 0, 0) != (long)sizeof random) {
            return -1;
        }
        char line[sizeof SCRATCH_PREFIX + 2 * sizeof random + 1];
        size_t n = 0;
        (void)buf_append(line, sizeof line, &n, SCRATCH_PREFIX);
        for (size_t i = 0; i < sizeof random; i++) {
            line[n++] = hex[random[i] >> 4];
            line[n++] = hex[random[i] & 15];
        }
        line[n] = '\0';
        size_t length = 0;
        if (buf_append(path, size, &length, base) != 0 || buf_append(path, size, &length, "/") != 0
            || buf_append(path, size, &length, line) != 0) {
            return -1;
        }
        long made = sys_call(SYS_mkdirat, LAUNCHER_AT_FDCWD, (long)path, 0700, 0);
        if (made == -LAUNCHER_EEXIST) {
            continue;
        }
        if (made != 0) {
            return -1;
        }
        line[n++] = '\n';
        (void)write_all(fd, line, n);  /* if pynox does not get it, it makes its own */
        return 0;
    }
    return -1;
}

/* Closes every descriptor but the `count` in keep (-1 keeps nothing). */
static void close_all_but(int *keep, int count)
{
    for (int i = 1; i < count; i++) {  /* in order: a handful, sorted by insertion */
        for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int moved = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = moved;
        }
    }
    long next = 0; /* the lowest descriptor not yet closed or kept */
    for (int i = 0; i < count; i++) {
        if (keep[i] < next) {
            continue; /* -1, or kept already */
        }
        if (keep[i] > next) {
            (void)sys_call(SYS_close_range, next, keep[i] - 1, 0, 0);
        }
        next = keep[i] + 1;
    }
    (void)sys_call(SYS_close_range, next, ~0U, 0, 0);
}

/* Waits until the process of the pidfd `run` has ended (nothing to wait for at -1). */
static void wait_for_end(long run)
{
    if (run < 0) {
        return;
    }
    struct {
        int fd;
        short events;
        short revents;
    } ended = {(int)run, 1 /* POLLIN: the process ended */, 0};
    while (sys_call5(SYS_ppoll, (long)&ended, 1, 0, 0, 0) == -LAUNCHER_EINTR) {
    }
}

static _Noreturn void run_helper(const struct scratch_pipes *pipes, const char *tmpdir,
                                 long run)
{
    (void)sys_call(SYS_setsid, 0, 0, 0, 0);  /* away from the terminal; fine if it fails */
    /* Only the pipes and the run's pidfd stay open: the helper holds nobody's terminal
     * or pipe. */
    int keep[] = {pipes->path[0], pipes->made[1], (int)run};
    close_all_but(keep, 3);
    /* An interpreter that ended before it read the name must not kill the helper with
     * SIGPIPE: the directory would stay. */
    struct sigaction_k ignore = {LAUNCHER_SIG_IGN, 0, 0, 0};
    (void)sys_call(SYS_rt_sigaction, LAUNCHER_SIGPIPE, (long)&ignore, 0, sizeof(unsigned long));
    char made[LAUNCHER_PATH_MAX];
    int has_made = make_directory(tmpdir, pipes->made[1], made, sizeof made) == 0;
    (void)sys_close(pipes->made[1]);  /* the end of its name, for pynox's read */
    char path[LAUNCHER_PATH_MAX];
    int has_path = read_path(pipes->path[0], path, sizeof path) == 0;
    wait_for_end(run);
    if (has_path) {
        remove_path(path);
    }
    if (has_made && !(has_path && str_equal(path, made))) {
        remove_path(made);  /* not taken by pynox, or named by another path */
    }
    sys_exit(0);
}

/* A pipe whose end `own` (0 or 1) is close-on-exec: the helper's. 0, or -1 with
 * nothing open. */
static int helper_pipe(int ends[2], int own)
{
    if (sys_call(SYS_pipe2, (long)ends, 0, 0, 0) != 0) {
        return -1;
    }
    if (sys_call(SYS_fcntl, ends[own], LAUNCHER_F_SETFD, LAUNCHER_FD_CLOEXEC, 0) != 0) {
        (void)sys_close(ends[0]);
        (void)sys_close(ends[1]);
        return -1;
    }
    return 0;
}

int scratch_helper_pipes(struct scratch_pipes *pipes)
{
    if (helper_pipe(pipes->path, 0) != 0) {
        return -1;
    }
    if (helper_pipe(pipes->made, 1) != 0) {
        (void)sys_close(pipes->path[0]);
        (void)sys_close(pipes->path[1]);
        return -1;
    }
    return 0;
}

void scratch_helper_close(const struct scratch_pipes *pipes, int helpers)
{
    (void)sys_close(helpers ? pipes->path[0] : pipes->path[1]);
    (void)sys_close(helpers ? pipes->made[1] : pipes->made[0]);
}

void scratch_helper_spawn(const struct scratch_pipes *pipes, const char *tmpdir, long run)
{
    /* Not waited for yet, so `run` is still that process, ended or not. Without a pidfd
     * (a kernel before 5.3), the end of the pipe alone tells the helper. */
    long ended = sys_call(SYS_pidfd_open, run, 0, 0, 0);
    if (sys_fork() == 0) {
        run_helper(pipes, tmpdir, ended < 0 ? -1 : ended);
    }
    if (ended >= 0) {
        (void)sys_close((int)ended);
    }
    /* Without a helper (the fork failed), pynox reads the end of the name's pipe and
     * makes its own directory; the directory then stays: pynox cannot know. */
    scratch_helper_close(pipes, 1);
}

int scratch_helper_entry(char *entry, size_t size, const struct scratch_pipes *pipes, long pid)
{
    size_t n = 0;
    return buf_append(entry, size, &n, SCRATCH_HELPER_VARIABLE "=") == 0
           && buf_append_long(entry, size, &n, pipes->path[1]) == 0
           && buf_append(entry, size, &n, ",") == 0
           && buf_append_long(entry, size, &n, pipes->made[0]) == 0
           && buf_append(entry, size, &n, ":") == 0 && buf_append_long(entry, size, &n, pid) == 0;
}
