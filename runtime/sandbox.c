/* pynox_sandbox_apply(): the order in which the layers go on.
 *
 * The order matters: descriptors are closed before anything can leak through
 * them, limits and capabilities are settled while the process may still change
 * them, no_new_privs precedes Landlock and seccomp (both need it without
 * CAP_SYS_ADMIN), and seccomp comes last because its filter denies calls the
 * earlier steps make. The first failure stops everything; the caller must then
 * refuse to run the program (the process may be half-confined by then).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "internal.h"

int pynox_fail(char *err, size_t err_len, const char *fmt, ...)
{
    if (err != NULL && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        /* A truncated reason is still a reason; vsnprintf always terminates. */
        if (vsnprintf(err, err_len, fmt, ap) < 0)
            err[0] = '\0';
        va_end(ap);
    }
    return -1;
}

static int check_policy(const struct pynox_policy *policy, char *err, size_t err_len)
{
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    if (policy == NULL)
        return pynox_fail(err, err_len, "no sandbox policy was given");
    if ((policy->read_count > 0 && policy->read_paths == NULL) ||
        (policy->write_count > 0 && policy->write_paths == NULL) ||
        (policy->keep_fd_count > 0 && policy->keep_fds == NULL))
        return pynox_fail(err, err_len, "the sandbox policy has a count without its array");
    return 0;
}

/* The steps that come before the limits, whatever the program's policy. */
static int settle_process(const struct pynox_policy *policy, char *err, size_t err_len)
{
    /* First what the kernel cannot do at all: that is the reason to give (under
     * an emulator, say, whose own threads would fail the next check too). */
    if (pynox_require_landlock(err, err_len) != 0)
        return -1;
    /* Landlock and seccomp confine only the calling thread. */
    if (pynox_require_single_thread(err, err_len) != 0)
        return -1;
    if (policy->parent_pid != 0 && pynox_bind_to_parent(policy->parent_pid, err, err_len) != 0)
        return -1;
    if (policy->new_session && pynox_new_session(err, err_len) != 0)
        return -1;
    return pynox_close_descriptors(policy->keep_fds, policy->keep_fd_count, err, err_len);
}

/* Without it a set-uid or file-capability binary could undo the rest; and
 * without CAP_SYS_ADMIN the kernel takes a seccomp filter only after it. */
static int set_no_new_privs(char *err, size_t err_len)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return pynox_fail(err, err_len, "prctl(PR_SET_NO_NEW_PRIVS) failed: %s", strerror(errno));
    return 0;
}

/* No core dump, whatever the core size limit: the program may lower that limit to 0,
 * which a pipe in kernel.core_pattern (systemd-coredump, apport) takes as leave to dump
 * its memory outside the sandbox, where 1 would refuse. The seccomp filter keeps the
 * process from making itself dumpable again. */
static int set_undumpable(char *err, size_t err_len)
{
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        return pynox_fail(err, err_len, "prctl(PR_SET_DUMPABLE) failed: %s", strerror(errno));
    return 0;
}

static int drop_privileges(char *err, size_t err_len)
{
    if (set_no_new_privs(err, err_len) != 0 || set_undumpable(err, err_len) != 0)
        return -1;
    return pynox_drop_capabilities(err, err_len);
}

int pynox_sandbox_apply(const struct pynox_policy *base, const struct pynox_policy *policy,
                        char *err, size_t err_len)
{
    if (check_policy(base, err, err_len) != 0 || check_policy(policy, err, err_len) != 0 ||
        settle_process(base, err, err_len) != 0)
        return -1;
    if (pynox_set_limits(policy->memory_bytes, policy->max_file_size, err, err_len) != 0)
        return -1;
    if (drop_privileges(err, err_len) != 0)
        return -1;
    const struct pynox_policy *both[] = {base, policy};
    if (pynox_apply_landlock_of(both, 2, policy->allow_network, err, err_len) != 0)
        return -1;
    /* The process's own facts (its session) from base, the program's network from policy. */
    struct pynox_policy filter = *base;
    filter.allow_network = policy->allow_network;
    if (pynox_apply_seccomp(&filter, err, err_len) != 0)
        return -1;
    return 0;
}

/* Set once this process installed the shared part of the seccomp filter; a
 * child forked afterwards has both the filter and this flag, and nothing but
 * a successful install sets it. */
static int filter_shared;

int pynox_sandbox_share_filter(char *err, size_t err_len)
{
    if (err != NULL && err_len > 0)
        err[0] = '\0';
    if (set_no_new_privs(err, err_len) != 0)
        return -1;
    /* The network's sockets, as prepare() allows them until finish(). */
    struct pynox_policy with_network = {.allow_network = 1};
    if (pynox_apply_seccomp_part(&with_network, PYNOX_FILTER_SHARED, err, err_len) != 0)
        return -1;
    filter_shared = 1;
    return 0;
}

int pynox_sandbox_prepare(const struct pynox_policy *base, struct pynox_prepared *prepared,
                          char *err, size_t err_len)
{
    if (prepared == NULL)
        return pynox_fail(err, err_len, "no place for the prepared sandbox was given");
    prepared->ready = 0;
    prepared->rulesets[0] = prepared->rulesets[1] = -1;
    if (check_policy(base, err, err_len) != 0 || settle_process(base, err, err_len) != 0)
        return -1;
    /* The limits and Landlock wait for the program's policy; the seccomp
     * filter lets this process set its own limits and Landlock domain. */
    if (drop_privileges(err, err_len) != 0)
        return -1;
    /* The sockets a program with the network may make; finish() takes them
     * away again for one without. Under the shared part, only the own part. */
    struct pynox_policy with_network = *base;
    with_network.allow_network = 1;
    int part = filter_shared ? PYNOX_FILTER_OWN : PYNOX_FILTER_WHOLE;
    if (pynox_apply_seccomp_part(&with_network, part, err, err_len) != 0)
        return -1;
    /* The base policy's Landlock rules, which every program gets: built now, so that
     * a request pays only for its own paths. */
    if (pynox_landlock_prepare(base, prepared->rulesets, &prepared->handled_fs, err, err_len))
        return -1;
    prepared->ready = 1;
    return 0;
}

int pynox_sandbox_finish(struct pynox_prepared *prepared, const struct pynox_policy *base,
                         const struct pynox_policy *policy, char *err, size_t err_len)
{
    if (check_policy(base, err, err_len) != 0 || check_policy(policy, err, err_len) != 0)
        return -1;
    if (prepared == NULL || !prepared->ready)
        return pynox_fail(err, err_len, "the sandbox was not prepared");
    prepared->ready = 0;
    /* Still one thread: nothing ran since prepare(), but the layers below
     * would confine only this one if another had appeared. */
    if (pynox_require_single_thread(err, err_len) != 0)
        return -1;
    if (pynox_set_limits(policy->memory_bytes, policy->max_file_size, err, err_len) != 0)
        return -1;
    if (pynox_landlock_finish(prepared->rulesets, prepared->handled_fs, policy, err, err_len))
        return -1;
    if (!policy->allow_network && pynox_apply_seccomp_no_network(err, err_len) != 0)
        return -1;
    return 0;
}
