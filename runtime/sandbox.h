/* The sandbox core: one call that confines the calling process for good.
 *
 * pynox_sandbox_apply() is called once, in a freshly forked child that is still
 * single-threaded, right before it runs untrusted code. It either applies every
 * layer of the policy or fails and says why; it never applies part of a policy
 * and reports success. The Python side turns a failure into exit status 125.
 */
#ifndef PYNOX_SANDBOX_H
#define PYNOX_SANDBOX_H

#include <stddef.h>

/* Landlock ABI the sandbox needs at the least (Linux 6.2: truncate rights). */
#define PYNOX_LANDLOCK_ABI_FLOOR 3

struct pynox_policy {
    /* Absolute paths of existing files or directories. Reads never imply
     * writes and writes never imply reads. */
    const char *const *read_paths;
    size_t read_count;
    const char *const *write_paths;
    size_t write_count;

    /* Descriptors above 2 that stay open; every other one is closed. */
    const int *keep_fds;
    size_t keep_fd_count;

    int allow_network;          /* nonzero: AF_INET and AF_INET6 sockets */
    long long memory_bytes;     /* RLIMIT_DATA (see limits.c); 0: no limit */
    long long max_file_size;    /* RLIMIT_FSIZE; 0 leaves it as it is */
    int new_session;            /* nonzero: setsid(), leave the terminal's session */
    /* Nonzero: the caller made this process the leader of a new process group that
     * holds nothing else (pynox.engine.job_group), so kill(0) reaches only the
     * program's own processes, as after setsid(). */
    int own_group;
    int parent_pid;             /* nonzero: die when this process goes away */

    /* Nonzero: the caller resolved every path (no symbolic link along it). A
     * path that crosses a link when the sandbox opens it is refused, so a link
     * swapped in after the caller checked the path cannot redirect its rule. */
    int paths_resolved;

    /* The run's scratch directory, also among read_paths and write_paths, or
     * NULL. Its rule alone carries a right no grant does (see landlock.c), so
     * that no directory can be moved or linked into it from a grant. */
    const char *scratch_path;
};

/* Confines the calling process to `base` (what the interpreter needs, and from
 * which the descriptors to keep, parent_pid, new_session and own_group are taken) plus
 * `policy` (the program's own paths, network and limits), in one Landlock
 * ruleset. Returns 0, or -1 with a one-sentence reason in err (always
 * NUL-terminated when err_len > 0). */
int pynox_sandbox_apply(const struct pynox_policy *base, const struct pynox_policy *policy,
                        char *err, size_t err_len);

/* The same confinement in two halves, for a pool's spare process: it settles
 * what no program's policy changes while it waits for a program, and the rest
 * once the program's policy is known, which keeps a request's latency short.
 *
 * pynox_sandbox_prepare() takes from `base` the descriptors to keep,
 * parent_pid, new_session and own_group, and does every step of pynox_sandbox_apply()
 * that needs nothing else: the checks, the parent binding, the session, the
 * descriptors, no_new_privs, the capabilities, and the seccomp filter with
 * IPv4 and IPv6 sockets allowed. pynox_sandbox_finish() then sets policy's
 * limits, enforces one Landlock ruleset with the paths of both base and
 * policy, and, when policy has no network, refuses it with Landlock and with
 * one more seccomp filter. The process runs no untrusted code in between; if
 * either call fails, it must not run the program. */
struct pynox_prepared {
    int ready; /* 1 once prepared, 0 again once finished */
    /* Landlock rulesets holding the base policy's rules, one that leaves TCP to the
     * seccomp filter and one that denies it, for finish() to add the program's rules to
     * and enforce (the other is closed); -1 where none is open. */
    int rulesets[2];
    unsigned long long handled_fs; /* the file-system rights both rulesets handle */
};

int pynox_sandbox_prepare(const struct pynox_policy *base, struct pynox_prepared *prepared,
                          char *err, size_t err_len);
int pynox_sandbox_finish(struct pynox_prepared *prepared, const struct pynox_policy *base,
                         const struct pynox_policy *policy, char *err, size_t err_len);

/* What this kernel offers, probed without changing the calling process. */
struct pynox_probe {
    int landlock_abi;       /* >= 1, or -errno when Landlock is unavailable */
    int seccomp_filter;     /* 1 when seccomp filters can be installed, else -errno */
    int no_new_privs;       /* 1 when PR_SET_NO_NEW_PRIVS is known, else -errno */
    int pidfd;              /* 1 when pidfd_open works, else -errno */
    int capabilities;       /* 1 when every capability held can be dropped, else -errno */
};

void pynox_probe_kernel(struct pynox_probe *out);

/* From now on this process uses at most Landlock ABI `abi`, as if the kernel
 * were older: the tests check the other layers on what older kernels lack. It
 * only ever lowers the ABI: a value above the kernel's, or above an earlier
 * limit, changes nothing. Returns the ABI now in effect (as landlock_abi in
 * struct pynox_probe), or -EINVAL for an ABI below 1. */
int pynox_limit_landlock_abi(int abi);

/* The parts of the seccomp filter. A pool's zygote installs the shared part
 * once (pynox_sandbox_share_filter) and every spare it forks inherits it, as
 * compiled by the kernel; each spare then adds only its own part, a few
 * instructions, instead of the whole filter (whose compiling took about
 * 0.2 ms of every spare's time). Each system call has its
 * rule in exactly one part, so the two together decide every call as the
 * whole filter does. */
enum pynox_filter_part {
    PYNOX_FILTER_WHOLE = 0,
    /* Every rule that names no process: the zygote itself runs under it. */
    PYNOX_FILTER_SHARED = 1,
    /* clone() (no new process), and the calls whose pid must be the caller's
     * own: rules only the process they confine can be given. */
    PYNOX_FILTER_OWN = 2,
};

/* For a process that forks pool spares and runs no program itself: sets
 * no_new_privs and installs the shared part of the filter (with IPv4 and IPv6
 * sockets allowed, as pynox_sandbox_prepare() allows them). From then on,
 * pynox_sandbox_prepare() in this process or a child forked from it installs
 * only the own part. Returns 0, or -1 with the reason in err; after a failure
 * a spare installs the whole filter itself. */
int pynox_sandbox_share_filter(char *err, size_t err_len);

/* The seccomp filter's rules as data, for tests: built for `policy` as
 * pynox_sandbox_apply() builds them (or only `part` of them), and never
 * installed. With merged == 0,
 * the rules as collected, one per system call in the order they were added
 * (duplicates included, were there any); otherwise as the filter holds them,
 * sorted, consecutive denials merged into one range, after the checks that
 * refuse to install a filter (two rules for one call, a table or program too
 * big). Copies at most `capacity` rules and returns how many there are (more
 * than capacity: call again with more room), or -1 with the reason in err. */
struct pynox_seccomp_rule {
    unsigned int first;  /* the system calls first..last */
    unsigned int last;
    int denied;          /* 1: refused outright with `action`; 0: its arguments decide */
    unsigned int action; /* SECCOMP_RET_ERRNO | errno when denied, else 0 */
};

int pynox_seccomp_rules(const struct pynox_policy *policy, int merged, int part,
                        struct pynox_seccomp_rule *rules, size_t capacity, char *err,
                        size_t err_len);

/* Overwrites the environment strings the process was started with (its own
 * os.environ is separate). Returns 0, or -1 with the reason in err. */
int pynox_scrub_environment_block(char *err, size_t err_len);

/* The limits a run's --memory and --max-file-size set in place of the host's: each is
 * kept where the host's limit is lower (pynox_set_limits). */
enum pynox_limit { PYNOX_LIMIT_MEMORY, PYNOX_LIMIT_FILE_SIZE };

/* The lowest (soft) limit in force among those `which` sets, in bytes: 0, with *bytes at
 * ULLONG_MAX when none is finite; -1 with errno when getrlimit failed. For the hints
 * of a program that reached a limit pynox was started with, which no flag raises. */
int pynox_lowest_limit(enum pynox_limit which, unsigned long long *bytes);

#endif
