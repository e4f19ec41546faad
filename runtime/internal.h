/* Private interface between the files of the sandbox core.
 *
 * Each file owns one kernel mechanism. Every step returns 0, or -1 after
 * writing one sentence into err (through pynox_fail), so that
 * pynox_sandbox_apply() can stop at the first failure.
 */
#ifndef PYNOX_INTERNAL_H
#define PYNOX_INTERNAL_H

#include <stddef.h>

#include "sandbox.h"

/* Formats the reason into err (always NUL-terminated when err_len > 0) and
 * returns -1, so callers can write `return pynox_fail(...)`. */
int pynox_fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* process.c: the process itself (threads, parent, session). */
int pynox_require_single_thread(char *err, size_t err_len);
int pynox_bind_to_parent(int parent_pid, char *err, size_t err_len);
int pynox_new_session(char *err, size_t err_len);

/* descriptors.c: close everything above 2 that is not kept. */
int pynox_close_descriptors(const int *keep_fds, size_t keep_count, char *err, size_t err_len);

/* limits.c: resource limits, soft = hard. */
int pynox_set_limits(long long memory_bytes, long long max_file_size, char *err, size_t err_len);

/* capabilities.c: leave the process with no capability at all. */
int pynox_drop_capabilities(char *err, size_t err_len);
/* 1 when pynox_drop_capabilities can (no capability held, or CAP_SETPCAP), else -errno. */
int pynox_capabilities_droppable(void);

/* landlock.c: the file-system (and TCP) policy. */
int pynox_landlock_abi(void); /* the ABI version (at most the limit a test set), or -errno */
/* 0 when the kernel's Landlock is recent enough, else -1 with the reason. */
int pynox_require_landlock(char *err, size_t err_len);
/* The rules of several policies in one ruleset; TCP handled unless allowed. */
/* The base policy's rules in two rulesets (index 1 denies TCP), ahead of a program's
 * own; then those added to the one its network wants, and enforced. */
int pynox_landlock_prepare(const struct pynox_policy *base, int rulesets[2],
                           unsigned long long *handled_fs, char *err, size_t err_len);
int pynox_landlock_finish(int rulesets[2], unsigned long long handled_fs,
                          const struct pynox_policy *policy, char *err, size_t err_len);
int pynox_apply_landlock_of(const struct pynox_policy *const *policies, size_t count,
                            int allow_network, char *err, size_t err_len);

/* seccomp.c: the system-call denylist. */
int pynox_apply_seccomp(const struct pynox_policy *policy, char *err, size_t err_len);
/* One part of it (enum pynox_filter_part); the whole for PYNOX_FILTER_WHOLE. */
int pynox_apply_seccomp_part(const struct pynox_policy *policy, int part, char *err,
                             size_t err_len);
/* A second filter for a process whose first one allowed IPv4 and IPv6
 * sockets: it refuses them (EACCES, as the full filter does without network),
 * and bind(), listen() and socket buffer sizes (EPERM), as the full filter
 * does without network. */
int pynox_apply_seccomp_no_network(char *err, size_t err_len);

#endif
