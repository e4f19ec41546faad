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
    long long memory_bytes;     /* RLIMIT_AS; 0 leaves it as it is */
    long long max_file_size;    /* RLIMIT_FSIZE; 0 leaves it as it is */
    int new_session;            /* nonzero: setsid(), leave the terminal's session */
    int parent_pid;             /* nonzero: die when this process goes away */
};

/* Confines the calling process. Returns 0, or -1 with a one-sentence reason in
 * err (always NUL-terminated when err_len > 0). */
int pynox_sandbox_apply(const struct pynox_policy *policy, char *err, size_t err_len);

/* What this kernel offers, probed without changing the calling process. */
struct pynox_probe {
    int landlock_abi;       /* >= 1, or -errno when Landlock is unavailable */
    int seccomp_filter;     /* 1 when seccomp filters can be installed, else -errno */
    int no_new_privs;       /* 1 when PR_SET_NO_NEW_PRIVS is known, else -errno */
    int pidfd;              /* 1 when pidfd_open works, else -errno */
};

void pynox_probe_kernel(struct pynox_probe *out);

/* Overwrites the environment strings the process was started with (its own
 * os.environ is separate). Returns 0, or -1 with the reason in err. */
int pynox_scrub_environment_block(char *err, size_t err_len);

#endif
