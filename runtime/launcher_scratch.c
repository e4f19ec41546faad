/* The helper that removes a run's scratch directory once the run's process ends.
 *
 * A sandboxed process may empty its scratch directory but never remove it: that is a
 * change to the directory above. So the launcher starts a helper before it execs the
 * interpreter: a copy of this small static process, in a session of its own, away
 * from the terminal's signals, which outlives the supervisor and nobody waits for. pynox writes the directory's path on a pipe once it made the
 * directory, before any program runs, and keeps the pipe's write end open until its
 * process ends, however it ends. The helper reads that one line, waits for the end of
 * the pipe, then removes the directory without following any link in it. Whatever
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

/* Deeper than any path that fits in PATH_MAX with one-letter names would go; the
 * stack holds one listing buffer per level. */
#define MAX_DEPTH 2100
#define LISTING 1024

static void remove_tree(int parent, const char *name, int depth);

/* Removes what the directory fd holds; repeated, since removing entries while
 * listing may hide some from the listing. Returns when a pass finds nothing. */
static void empty_directory(int fd, int depth)
{
    char listing[LISTING] __attribute__((aligned(8)));
    for (int pass = 0; pass < 64; pass++) {
        int found = 0;
        if (sys_call(SYS_lseek, fd, 0, LAUNCHER_SEEK_SET, 0) < 0) {
            return;
        }
        for (;;) {
            long got = sys_call(SYS_getdents64, fd, (long)listing, sizeof listing, 0);
            if (got <= 0) {
                break;
            }
            for (long at = 0; at < got;) {
                struct dirent64 *entry = (struct dirent64 *)(listing + at);
                at += entry->d_reclen;
                const char *name = entry->d_name;
                if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) {
                    continue;
                }
                found = 1;
                if (entry->d_type == LAUNCHER_DT_DIR) {
                    remove_tree(fd, name, depth + 1);
                } else if (sys_call(SYS_unlinkat, fd, (long)name, 0, 0) == -LAUNCHER_EISDIR) {
                    remove_tree(fd, name, depth + 1);  /* a file system without d_type */
                }
            }
        }
        if (!found) {
            return;
        }
    }
}

/* rm -rf parent/name, through descriptors: a link is removed, never followed. */
static void remove_tree(int parent, const char *name, int depth)
{
    if (depth > MAX_DEPTH) {
        return;
    }
    long fd = sys_openat(parent, name,
                         LAUNCHER_O_RDONLY | LAUNCHER_O_DIRECTORY | LAUNCHER_O_NOFOLLOW
                             | LAUNCHER_O_CLOEXEC);
    if (fd < 0) {
        (void)sys_call(SYS_unlinkat, parent, (long)name, 0, 0);  /* a file or a link */
        return;
    }
    empty_directory((int)fd, depth);
    (void)sys_close((int)fd);  /* a directory opened for reading: nothing to lose */
    (void)sys_call(SYS_unlinkat, parent, (long)name, LAUNCHER_AT_REMOVEDIR, 0);
}

/* Reads the path (one line), then waits for the pipe's end. 0 on success. */
static int read_path(int fd, char *path, size_t size)
{
    size_t used = 0;
    int ended_line = 0;
    char chunk[256];
    for (;;) {
        long got = sys_read(fd, ended_line ? chunk : path + used,
                            ended_line ? sizeof chunk : 1);
        if (got == -LAUNCHER_EINTR) {
            continue;
        }
        if (got <= 0) {
            return ended_line ? 0 : -1;  /* the end, or an error: the process is gone */
        }
        if (ended_line) {
            continue;  /* what the program may write later: ignored */
        }
        if (path[used] == '\n') {
            path[used] = '\0';
            ended_line = 1;
        } else if (++used == size) {
            return -1;
        }
    }
}

static _Noreturn void run_helper(int fd)
{
    (void)sys_call(SYS_setsid, 0, 0, 0, 0);  /* away from the terminal; fine if it fails */
    /* Only the pipe stays open: the helper holds nobody's terminal or pipe. */
    if (fd > 0) {
        (void)sys_call(SYS_close_range, 0, fd - 1, 0, 0);
    }
    (void)sys_call(SYS_close_range, fd + 1, ~0U, 0, 0);
    char path[LAUNCHER_PATH_MAX];
    if (read_path(fd, path, sizeof path) != 0 || path[0] != '/') {
        sys_exit(0);
    }
    char *slash = str_last_slash(path);
    if (slash == path || slash[1] == '\0') {
        sys_exit(0);  /* "/" or a path ending in "/": not a directory pynox made */
    }
    *slash = '\0';
    long parent = sys_openat(LAUNCHER_AT_FDCWD, path,
                             LAUNCHER_O_PATH | LAUNCHER_O_DIRECTORY | LAUNCHER_O_CLOEXEC);
    if (parent >= 0) {
        remove_tree((int)parent, slash + 1, 0);
    }
    sys_exit(0);
}

int scratch_helper_pipe(int ends[2])
{
    if (sys_call(SYS_pipe2, (long)ends, 0, 0, 0) != 0) {
        return -1;
    }
    /* The read end is the helper's alone; the write end goes on to the interpreter. */
    if (sys_call(SYS_fcntl, ends[0], LAUNCHER_F_SETFD, LAUNCHER_FD_CLOEXEC, 0) != 0) {
        (void)sys_close(ends[0]);
        (void)sys_close(ends[1]);
        return -1;
    }
    return 0;
}

void scratch_helper_spawn(int read_end)
{
    if (sys_fork() == 0) {
        run_helper(read_end);
    }
    /* Without a helper (the fork failed), the directory stays: pynox cannot know. */
    (void)sys_close(read_end);
}

int scratch_helper_entry(char *entry, size_t size, int write_end, long pid)
{
    size_t n = 0;
    return buf_append(entry, size, &n, SCRATCH_HELPER_VARIABLE "=") == 0
           && buf_append_long(entry, size, &n, write_end) == 0
           && buf_append(entry, size, &n, ":") == 0 && buf_append_long(entry, size, &n, pid) == 0;
}
