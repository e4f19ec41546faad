/* Landlock: the file-system policy, and on newer kernels TCP and scoping.
 *
 * The ruleset handles every file-system right the running ABI knows, so a
 * right that no rule grants is denied. Reads never imply writes and writes
 * never imply reads; nothing grants EXECUTE, device creation or device ioctls.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <limits.h>
#include <linux/types.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "syscalls.h"

/* Debian 12's headers stop at ABI 2; the rest is the kernel's UAPI. */
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The ABI 6 layout of struct landlock_ruleset_attr; older kernels get a
 * prefix of it (the size passed tells the kernel which fields exist). */
struct ruleset_attr {
    __u64 handled_access_fs;
    __u64 handled_access_net;
    __u64 scoped;
};

#define ACCESS_FS_ABI1 ((1ULL << 13) - 1) /* EXECUTE .. MAKE_SYM */

/* Rights a rule on a non-directory may carry (others give EINVAL). */
#define ACCESS_FILE                                                                        \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                          \
     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

#define READ_RIGHTS (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* Creating, changing and removing ordinary files, directories, symlinks and
 * FIFOs, and moving them between granted directories (REFER). */
#define WRITE_RIGHTS                                                                       \
    (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                         \
     LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                      \
     LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_SYM | \
     LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_REFER)

/* What the scratch directory's rule alone carries. Making a block device takes a
 * capability the sandbox never has, so the right lets the program do nothing
 * more; but Landlock refuses (EXDEV) moving or linking a directory to where it
 * would gain a right, so no directory of a grant can be moved into the scratch
 * directory. Its removal, which gives every directory in it its rights back
 * first, would otherwise remove what the program itself could not: the files of
 * a read-only directory, or as root another user's. A moved regular file gains
 * nothing (Landlock weighs only a file's own rights for it), and the program
 * could have removed it in place. */
#define SCRATCH_ONLY_RIGHTS LANDLOCK_ACCESS_FS_MAKE_BLOCK

static long create_ruleset(const struct ruleset_attr *attr, size_t size, __u32 flags)
{
    return syscall(__NR_landlock_create_ruleset, attr, size, flags);
}

/* The highest ABI this process uses (see pynox_limit_landlock_abi). */
static int abi_limit = INT_MAX;

int pynox_limit_landlock_abi(int abi)
{
    if (abi < 1)
        return -EINVAL;
    if (abi < abi_limit)
        abi_limit = abi;
    return pynox_landlock_abi();
}

int pynox_landlock_abi(void)
{
    long abi = create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 0)
        return -errno;
    return abi > abi_limit ? abi_limit : (int)abi;
}

/* One sentence: what the kernel has, what is needed, and the way out. */
#define NEEDED "Linux 6.2 or newer with Landlock enabled"
#define WAY_OUT "--no-sandbox runs without it"

static int explain_abi(int abi, char *err, size_t err_len)
{
    if (abi == -ENOSYS)
        return pynox_fail(err, err_len,
                          "this kernel has no Landlock, which the sandbox needs (" NEEDED
                          "); " WAY_OUT);
    if (abi == -EOPNOTSUPP)
        return pynox_fail(err, err_len,
                          "Landlock is disabled in this kernel (it is missing from the lsm= boot "
                          "parameter), and the sandbox needs it (" NEEDED "); " WAY_OUT);
    if (abi < 0)
        return pynox_fail(err, err_len,
                          "asking the kernel for its Landlock ABI failed (%s); " WAY_OUT,
                          strerror(-abi));
    return pynox_fail(err, err_len,
                      "Landlock ABI %d is older than the ABI %d the sandbox needs (" NEEDED
                      "); " WAY_OUT,
                      abi, PYNOX_LANDLOCK_ABI_FLOOR);
}

int pynox_require_landlock(char *err, size_t err_len)
{
    int abi = pynox_landlock_abi();
    return abi < PYNOX_LANDLOCK_ABI_FLOOR ? explain_abi(abi, err, err_len) : 0;
}

static __u64 handled_fs_rights(int abi)
{
    __u64 rights = ACCESS_FS_ABI1;
    if (abi >= 2)
        rights |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    return rights;
}

/* Opens an absolute, normalized path with O_PATH one component at a time,
 * refusing any symbolic link along it (the last component included). Every
 * descriptor but the returned one is closed. Returns the descriptor, or -1 with
 * errno set (ELOOP for a link, EINVAL for a path that is not absolute and
 * normalized, ENAMETOOLONG). */
static int open_without_links(const char *path)
{
    char copy[PATH_MAX];
    size_t length = strlen(path);
    if (path[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    if (length >= sizeof copy) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(copy, path, length + 1);
    int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return -1;
    char *rest = copy;
    char *name;
    while ((name = strsep(&rest, "/")) != NULL) {
        if (name[0] == '\0')
            continue;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            (void)close(dir);
            errno = EINVAL;
            return -1;
        }
        int next = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        (void)close(dir); /* O_PATH descriptor: nothing to flush */
        if (next < 0) {
            errno = saved;
            return -1;
        }
        struct stat st;
        if (fstat(next, &st) != 0) {
            saved = errno;
            (void)close(next);
            errno = saved;
            return -1;
        }
        if (S_ISLNK(st.st_mode)) {
            (void)close(next);
            errno = ELOOP;
            return -1;
        }
        dir = next;
    }
    return dir;
}

/* Rulesets that get the same rules: a pool's spare prepares two, which differ only
 * in the network rights they handle, and opens each path once for both. */
struct rulesets {
    const int *fds;
    size_t count;
};

/* Grants `rights` (masked to what the ABI handles and the file type allows)
 * beneath `path` in every ruleset of `into`; a path the caller resolved is
 * opened without following links. */
static int add_path_rule(struct rulesets into, const char *path, int resolved, const char *kind,
                         __u64 rights, __u64 handled, char *err, size_t err_len)
{
    if (path == NULL)
        return pynox_fail(err, err_len, "a %s path of the policy is NULL", kind);
    int fd = resolved ? open_without_links(path) : open(path, O_PATH | O_CLOEXEC);
    if (fd < 0 && resolved && errno == ELOOP)
        return pynox_fail(err, err_len,
                          "the %s path %s now goes through a symbolic link, which was not there "
                          "when it was granted; grant the path it leads to",
                          kind, path);
    if (fd < 0)
        return pynox_fail(err, err_len, "cannot open the %s path %s: %s", kind, path,
                          strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        (void)close(fd);
        return pynox_fail(err, err_len, "cannot stat the %s path %s: %s", kind, path,
                          strerror(saved));
    }
    rights &= handled;
    if (!S_ISDIR(st.st_mode))
        rights &= ACCESS_FILE;
    struct landlock_path_beneath_attr rule = {.allowed_access = rights, .parent_fd = fd};
    long rc = 0;
    for (size_t i = 0; rc == 0 && i < into.count; i++)
        rc = syscall(__NR_landlock_add_rule, into.fds[i], LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    int saved = errno;
    (void)close(fd); /* O_PATH descriptor: nothing to flush */
    if (rc != 0)
        return pynox_fail(err, err_len, "Landlock refused the rule for the %s path %s: %s", kind,
                          path, strerror(saved));
    return 0;
}

/* Whether `path` is one of the `count` paths (a NULL entry matches nothing). */
static int listed(const char *const *paths, size_t count, const char *path)
{
    for (size_t i = 0; i < count; i++)
        if (paths[i] != NULL && strcmp(paths[i], path) == 0)
            return 1;
    return 0;
}

static int add_rules(struct rulesets into, const struct pynox_policy *policy, __u64 handled,
                     char *err, size_t err_len)
{
    /* A path in both lists (a run's scratch directory, say) is opened once, for one
     * rule with both rights: what two rules would grant, Landlock's union. */
    int resolved = policy->paths_resolved;
    for (size_t i = 0; i < policy->read_count; i++) {
        const char *path = policy->read_paths[i];
        int writable = path != NULL && listed(policy->write_paths, policy->write_count, path);
        __u64 rights = writable ? READ_RIGHTS | WRITE_RIGHTS : READ_RIGHTS;
        if (writable && policy->scratch_path != NULL && strcmp(path, policy->scratch_path) == 0)
            rights |= SCRATCH_ONLY_RIGHTS;
        if (add_path_rule(into, path, resolved, writable ? "write" : "read", rights, handled,
                          err, err_len) != 0)
            return -1;
    }
    for (size_t i = 0; i < policy->write_count; i++) {
        const char *path = policy->write_paths[i];
        if (path != NULL && listed(policy->read_paths, policy->read_count, path))
            continue; /* added with the reads */
        if (add_path_rule(into, path, resolved, "write", WRITE_RIGHTS, handled, err, err_len) !=
            0)
            return -1;
    }
    return 0;
}

/* A ruleset that handles every file-system right of the running ABI (and TCP
 * when deny_tcp is set), with no rule yet. Returns its descriptor or -1. */
static int new_ruleset(int abi, int deny_tcp, __u64 *handled_fs, char *err, size_t err_len)
{
    struct ruleset_attr attr = {.handled_access_fs = handled_fs_rights(abi)};
    size_t size = offsetof(struct ruleset_attr, handled_access_net);
    if (abi >= 4) {
        /* Handled with no rule: no TCP bind or connect at all. seccomp
         * already refuses the sockets; this is the second wall. */
        if (deny_tcp)
            attr.handled_access_net =
                LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
        size = offsetof(struct ruleset_attr, scoped);
    }
    if (abi >= 6) {
        /* No abstract Unix sockets or signals across the sandbox's edge. */
        attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
        size = sizeof(attr);
    }
    int ruleset_fd = (int)create_ruleset(&attr, size, 0);
    if (ruleset_fd < 0)
        return pynox_fail(err, err_len, "creating the Landlock ruleset failed: %s",
                          strerror(errno));
    *handled_fs = attr.handled_access_fs;
    return ruleset_fd;
}

int pynox_apply_landlock_of(const struct pynox_policy *const *policies, size_t count,
                            int allow_network, char *err, size_t err_len)
{
    int abi = pynox_landlock_abi();
    if (abi < PYNOX_LANDLOCK_ABI_FLOOR)
        return explain_abi(abi, err, err_len);
    /* One ruleset, one layer: a second layer would have to repeat every rule
     * that grants REFER, which any layer denies where it grants nothing. */
    __u64 handled = 0;
    int ruleset_fd = new_ruleset(abi, !allow_network, &handled, err, err_len);
    if (ruleset_fd < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = add_rules((struct rulesets){&ruleset_fd, 1}, policies[i], handled, err, err_len);
    if (rc == 0 && syscall(__NR_landlock_restrict_self, ruleset_fd, 0) != 0)
        rc = pynox_fail(err, err_len, "landlock_restrict_self() failed: %s", strerror(errno));
    (void)close(ruleset_fd); /* the domain lives on in the process */
    return rc;
}

static void close_rulesets(int rulesets[2])
{
    for (int i = 0; i < 2; i++) {
        if (rulesets[i] >= 0)
            (void)close(rulesets[i]); /* a ruleset: nothing to flush */
        rulesets[i] = -1;
    }
}

int pynox_landlock_prepare(const struct pynox_policy *base, int rulesets[2],
                           unsigned long long *handled_fs, char *err, size_t err_len)
{
    rulesets[0] = rulesets[1] = -1;
    int abi = pynox_landlock_abi();
    if (abi < PYNOX_LANDLOCK_ABI_FLOOR)
        return explain_abi(abi, err, err_len);
    __u64 handled = 0;
    for (int deny_tcp = 0; deny_tcp < 2; deny_tcp++) {
        rulesets[deny_tcp] = new_ruleset(abi, deny_tcp, &handled, err, err_len);
        if (rulesets[deny_tcp] < 0) {
            close_rulesets(rulesets);
            return -1;
        }
    }
    /* Both handle the same file-system rights: one opening of each path serves both. */
    if (add_rules((struct rulesets){rulesets, 2}, base, handled, err, err_len) != 0) {
        close_rulesets(rulesets);
        return -1;
    }
    *handled_fs = handled;
    return 0;
}

int pynox_landlock_finish(int rulesets[2], unsigned long long handled_fs,
                          const struct pynox_policy *policy, char *err, size_t err_len)
{
    int chosen = policy->allow_network ? 0 : 1;
    int rc = -1;
    if (rulesets[chosen] < 0)
        rc = pynox_fail(err, err_len, "the Landlock ruleset was not prepared");
    else if (add_rules((struct rulesets){&rulesets[chosen], 1}, policy, (__u64)handled_fs, err,
                       err_len) == 0) {
        rc = 0;
        if (syscall(__NR_landlock_restrict_self, rulesets[chosen], 0) != 0)
            rc = pynox_fail(err, err_len, "landlock_restrict_self() failed: %s",
                            strerror(errno));
    }
    close_rulesets(rulesets); /* the domain lives on in the process */
    return rc;
}
