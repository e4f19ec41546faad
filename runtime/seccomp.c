/* seccomp-BPF: the system-call denylist.
 *
 * Default ALLOW; a denied call fails with EPERM (never a kill or a trap, so
 * Python raises PermissionError and the program can carry on). ioctl is an
 * allowlist of requests instead, the others failing with ENOTTY (emit_ioctl).
 * clone3 fails with ENOSYS, so that glibc falls back to clone, whose flags a
 * filter can read (clone3 passes them in memory). Every argument check loads
 * the low 32 bits of the argument, which is all the kernel reads of an int,
 * a pid or an ioctl request.
 *
 * Layout: check the architecture, load the number, then a search tree over
 * the sorted numbers that have a rule: JGE splits, and at the leaves a few
 * small blocks, each "JEQ nr, else skip the block" followed by code that ends
 * in RET on every path. Conditional jumps stay within one block; the tree's
 * long jumps are JA, whose offset has 32 bits.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bpf.h"
#include "internal.h"
#include "syscalls.h"

#define RET_ALLOW SECCOMP_RET_ALLOW
#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | ((uint32_t)(e) & SECCOMP_RET_DATA))
#define RET_EPERM RET_ERRNO(EPERM)

/* Offset of the low 32-bit word of argument i (little-endian). */
#define ARG_LO(i) ((uint32_t)(offsetof(struct seccomp_data, args) + (i) * sizeof(uint64_t)))

#ifndef IOPRIO_WHO_PROCESS
#define IOPRIO_WHO_PROCESS 1
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
/* fcntl commands and ioctls that choose who gets a file's I/O signals. */
#ifndef F_SETSIG
#define F_SETSIG 10
#endif
#ifndef F_SETOWN_EX
#define F_SETOWN_EX 15
#endif
#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ 1031
#endif
#ifndef F_SETLEASE
#define F_SETLEASE 1024
#endif
#ifndef FIOSETOWN
#define FIOSETOWN 0x8901
#endif
/* The ioctls that set a file's attributes (see emit_ioctl), as <linux/fs.h>,
 * <linux/fsverity.h> and <linux/fscrypt.h> define them; their encodings are
 * the same on x86_64 and aarch64. Spelled out: <linux/fs.h> does not mix with
 * every C library's headers. */
#define PYNOX_FSXATTR_SIZE 28U          /* struct fsxattr */
#define PYNOX_FSVERITY_ENABLE_SIZE 128U /* struct fsverity_enable_arg */
#define PYNOX_FSCRYPT_POLICY_V1_SIZE 12U /* struct fscrypt_policy_v1 */
#ifndef FS_IOC_SETFLAGS
#define FS_IOC_SETFLAGS _IOW('f', 2, long)
#endif
#ifndef FS_IOC32_SETFLAGS
#define FS_IOC32_SETFLAGS _IOW('f', 2, int)
#endif
#ifndef FS_IOC_SETVERSION
#define FS_IOC_SETVERSION _IOW('v', 2, long)
#endif
#ifndef FS_IOC32_SETVERSION
#define FS_IOC32_SETVERSION _IOW('v', 2, int)
#endif
#ifndef FS_IOC_FSSETXATTR
#define FS_IOC_FSSETXATTR _IOC(_IOC_WRITE, 'X', 32, PYNOX_FSXATTR_SIZE)
#endif
#ifndef FS_IOC_ENABLE_VERITY
#define FS_IOC_ENABLE_VERITY _IOC(_IOC_WRITE, 'f', 133, PYNOX_FSVERITY_ENABLE_SIZE)
#endif
#ifndef FS_IOC_SET_ENCRYPTION_POLICY
/* _IOR, as the kernel has always (mis)named it. */
#define FS_IOC_SET_ENCRYPTION_POLICY _IOC(_IOC_READ, 'f', 19, PYNOX_FSCRYPT_POLICY_V1_SIZE)
#endif
#ifndef SIOCSPGRP
#define SIOCSPGRP 0x8902
#endif
/* The ioctls of the allowlist that some headers lack (see emit_ioctl). */
#ifndef FS_IOC_GETFLAGS
#define FS_IOC_GETFLAGS _IOR('f', 1, long)
#endif
#ifndef FS_IOC32_GETFLAGS
#define FS_IOC32_GETFLAGS _IOR('f', 1, int)
#endif
#ifndef FS_IOC_FSGETXATTR
#define FS_IOC_FSGETXATTR _IOC(_IOC_READ, 'X', 31, PYNOX_FSXATTR_SIZE)
#endif
#ifndef TIOCGSID
#define TIOCGSID 0x5429
#endif
/* The termios2 forms of TCGETS and TCSETS*, which newer C libraries call: struct
 * termios2 has 44 bytes on x86_64 and aarch64. Spelled out: the kernel's header
 * that defines the struct clashes with the C library's <termios.h>. */
#define PYNOX_TERMIOS2_SIZE 44U
#define PYNOX_TCGETS2 _IOC(_IOC_READ, 'T', 0x2A, PYNOX_TERMIOS2_SIZE)
#define PYNOX_TCSETS2 _IOC(_IOC_WRITE, 'T', 0x2B, PYNOX_TERMIOS2_SIZE)
#define PYNOX_TCSETSW2 _IOC(_IOC_WRITE, 'T', 0x2C, PYNOX_TERMIOS2_SIZE)
#define PYNOX_TCSETSF2 _IOC(_IOC_WRITE, 'T', 0x2D, PYNOX_TERMIOS2_SIZE)

/* Denied outright with EPERM. A name this architecture or these headers do
 * not have is skipped. */
static const uint32_t denied_syscalls[] = {
    /* Running other programs and making processes (threads go through clone, below). */
#ifdef __NR_execve
    __NR_execve,
#endif
#ifdef __NR_execveat
    __NR_execveat,
#endif
#ifdef __NR_fork
    __NR_fork,
#endif
#ifdef __NR_vfork
    __NR_vfork,
#endif
    /* Namespaces, and reaching into other processes. */
#ifdef __NR_unshare
    __NR_unshare,
#endif
#ifdef __NR_setns
    __NR_setns,
#endif
#ifdef __NR_ptrace
    __NR_ptrace,
#endif
#ifdef __NR_process_vm_readv
    __NR_process_vm_readv,
#endif
#ifdef __NR_process_vm_writev
    __NR_process_vm_writev,
#endif
#ifdef __NR_kcmp
    __NR_kcmp,
#endif
#ifdef __NR_pidfd_getfd
    __NR_pidfd_getfd,
#endif
#ifdef __NR_pidfd_send_signal
    __NR_pidfd_send_signal,
#endif
#ifdef __NR_process_madvise
    __NR_process_madvise,
#endif
    /* Mounts and the root directory. */
#ifdef __NR_mount
    __NR_mount,
#endif
#ifdef __NR_umount2
    __NR_umount2,
#endif
#ifdef __NR_pivot_root
    __NR_pivot_root,
#endif
#ifdef __NR_chroot
    __NR_chroot,
#endif
#ifdef __NR_move_mount
    __NR_move_mount,
#endif
#ifdef __NR_open_tree
    __NR_open_tree,
#endif
#ifdef __NR_open_tree_attr
    __NR_open_tree_attr,
#endif
#ifdef __NR_fsopen
    __NR_fsopen,
#endif
#ifdef __NR_fsconfig
    __NR_fsconfig,
#endif
#ifdef __NR_fsmount
    __NR_fsmount,
#endif
#ifdef __NR_fspick
    __NR_fspick,
#endif
#ifdef __NR_mount_setattr
    __NR_mount_setattr,
#endif
    /* Reading the mount table: every mount point, its file system and options,
     * which Landlock keeps /proc from showing. */
#ifdef __NR_statmount
    __NR_statmount,
#endif
#ifdef __NR_listmount
    __NR_listmount,
#endif
    /* Kernel attack surface an interpreter has no use for. */
#ifdef __NR_bpf
    __NR_bpf,
#endif
#ifdef __NR_perf_event_open
    __NR_perf_event_open,
#endif
#ifdef __NR_keyctl
    __NR_keyctl,
#endif
#ifdef __NR_add_key
    __NR_add_key,
#endif
#ifdef __NR_request_key
    __NR_request_key,
#endif
#ifdef __NR_userfaultfd
    __NR_userfaultfd,
#endif
    /* Memory that RLIMIT_AS does not count, because nothing maps it: a memfd
     * holds what is written to it (1.5 GiB under --memory=128m), and
     * vmsplice() leaves pages of the process in a pipe after it unmaps them
     * (a 2 MiB huge page per pipe slot: 32 MiB per pipe). */
#ifdef __NR_memfd_create
    __NR_memfd_create,
#endif
#ifdef __NR_memfd_secret
    __NR_memfd_secret,
#endif
#ifdef __NR_vmsplice
    __NR_vmsplice,
#endif
#ifdef __NR_io_uring_setup
    __NR_io_uring_setup,
#endif
#ifdef __NR_io_uring_enter
    __NR_io_uring_enter,
#endif
#ifdef __NR_io_uring_register
    __NR_io_uring_register,
#endif
    /* Linux AIO contexts come from one pool for the whole machine
     * (fs.aio-max-nr): a single io_setup() could take all of it while the
     * program runs, and every other process's io_setup() would fail. Python
     * and its POSIX AIO (threads) never use it; without a context the other
     * io_* calls do nothing. */
#ifdef __NR_io_setup
    __NR_io_setup,
#endif
#ifdef __NR_lookup_dcookie
    __NR_lookup_dcookie,
#endif
#ifdef __NR_uselib
    __NR_uselib,
#endif
    /* x86's local descriptor table: 16-bit and 32-bit code segments of the
     * program's own (whose system calls the ABI check refuses anyway), and a
     * part of the kernel with a history of holes. */
#ifdef __NR_modify_ldt
    __NR_modify_ldt,
#endif
    /* Administration of the machine. */
#ifdef __NR_kexec_load
    __NR_kexec_load,
#endif
#ifdef __NR_kexec_file_load
    __NR_kexec_file_load,
#endif
#ifdef __NR_init_module
    __NR_init_module,
#endif
#ifdef __NR_finit_module
    __NR_finit_module,
#endif
#ifdef __NR_delete_module
    __NR_delete_module,
#endif
#ifdef __NR_reboot
    __NR_reboot,
#endif
#ifdef __NR_swapon
    __NR_swapon,
#endif
#ifdef __NR_swapoff
    __NR_swapoff,
#endif
#ifdef __NR_acct
    __NR_acct,
#endif
#ifdef __NR_quotactl
    __NR_quotactl,
#endif
#ifdef __NR_quotactl_fd
    __NR_quotactl_fd,
#endif
#ifdef __NR_iopl
    __NR_iopl,
#endif
#ifdef __NR_ioperm
    __NR_ioperm,
#endif
#ifdef __NR_settimeofday
    __NR_settimeofday,
#endif
#ifdef __NR_clock_settime
    __NR_clock_settime,
#endif
#ifdef __NR_clock_adjtime
    __NR_clock_adjtime,
#endif
#ifdef __NR_adjtimex
    __NR_adjtimex,
#endif
#ifdef __NR_sethostname
    __NR_sethostname,
#endif
#ifdef __NR_setdomainname
    __NR_setdomainname,
#endif
#ifdef __NR_vhangup
    __NR_vhangup,
#endif
#ifdef __NR_syslog
    __NR_syslog,
#endif
#ifdef __NR_fanotify_init
    __NR_fanotify_init,
#endif
    /* inotify watches any path Landlock lets the process look up (stat is
     * not governed), and would report names and opens in trees it may not
     * list. */
#ifdef __NR_inotify_init
    __NR_inotify_init,
#endif
#ifdef __NR_inotify_init1
    __NR_inotify_init1,
#endif
#ifdef __NR_inotify_add_watch
    __NR_inotify_add_watch,
#endif
#ifdef __NR_open_by_handle_at
    __NR_open_by_handle_at,
#endif
#ifdef __NR_name_to_handle_at
    __NR_name_to_handle_at,
#endif
    /* Signals by thread id alone could reach other processes; raise() uses tgkill. */
#ifdef __NR_tkill
    __NR_tkill,
#endif
    /* System V IPC and POSIX message queues outlive the process and are shared machine-wide. */
#ifdef __NR_shmget
    __NR_shmget,
#endif
#ifdef __NR_shmat
    __NR_shmat,
#endif
#ifdef __NR_shmdt
    __NR_shmdt,
#endif
#ifdef __NR_shmctl
    __NR_shmctl,
#endif
#ifdef __NR_msgget
    __NR_msgget,
#endif
#ifdef __NR_msgsnd
    __NR_msgsnd,
#endif
#ifdef __NR_msgrcv
    __NR_msgrcv,
#endif
#ifdef __NR_msgctl
    __NR_msgctl,
#endif
#ifdef __NR_semget
    __NR_semget,
#endif
#ifdef __NR_semop
    __NR_semop,
#endif
#ifdef __NR_semctl
    __NR_semctl,
#endif
#ifdef __NR_semtimedop
    __NR_semtimedop,
#endif
#ifdef __NR_mq_open
    __NR_mq_open,
#endif
#ifdef __NR_mq_unlink
    __NR_mq_unlink,
#endif
#ifdef __NR_mq_timedsend
    __NR_mq_timedsend,
#endif
#ifdef __NR_mq_timedreceive
    __NR_mq_timedreceive,
#endif
#ifdef __NR_mq_notify
    __NR_mq_notify,
#endif
#ifdef __NR_mq_getsetattr
    __NR_mq_getsetattr,
#endif
    /* Extended attributes read by path: Landlock does not govern them, and they
     * hold what any program stored on any file (a browser, the address a download
     * came from). A file the program may open gives its own through the descriptor
     * (fgetxattr, flistxattr: an O_PATH descriptor does not serve). */
#ifdef __NR_getxattr
    __NR_getxattr,
#endif
#ifdef __NR_lgetxattr
    __NR_lgetxattr,
#endif
#ifdef __NR_listxattr
    __NR_listxattr,
#endif
#ifdef __NR_llistxattr
    __NR_llistxattr,
#endif
#ifdef __NR_getxattrat
    __NR_getxattrat,
#endif
#ifdef __NR_listxattrat
    __NR_listxattrat,
#endif
    /* Metadata changes, which Landlock does not cover. Times too, by path or by
     * descriptor: a file's owner may set them through any descriptor, one opened
     * for reading under a read grant included. */
#ifdef __NR_chmod
    __NR_chmod,
#endif
#ifdef __NR_fchmod
    __NR_fchmod,
#endif
#ifdef __NR_fchmodat
    __NR_fchmodat,
#endif
#ifdef __NR_fchmodat2
    __NR_fchmodat2,
#endif
#ifdef __NR_chown
    __NR_chown,
#endif
#ifdef __NR_fchown
    __NR_fchown,
#endif
#ifdef __NR_lchown
    __NR_lchown,
#endif
#ifdef __NR_fchownat
    __NR_fchownat,
#endif
#ifdef __NR_setxattr
    __NR_setxattr,
#endif
#ifdef __NR_lsetxattr
    __NR_lsetxattr,
#endif
#ifdef __NR_fsetxattr
    __NR_fsetxattr,
#endif
#ifdef __NR_removexattr
    __NR_removexattr,
#endif
#ifdef __NR_lremovexattr
    __NR_lremovexattr,
#endif
#ifdef __NR_fremovexattr
    __NR_fremovexattr,
#endif
#ifdef __NR_setxattrat
    __NR_setxattrat,
#endif
#ifdef __NR_removexattrat
    __NR_removexattrat,
#endif
#ifdef __NR_file_setattr
    __NR_file_setattr,
#endif
#ifdef __NR_utime
    __NR_utime,
#endif
#ifdef __NR_utimes
    __NR_utimes,
#endif
#ifdef __NR_futimesat
    __NR_futimesat,
#endif
#ifdef __NR_utimensat
    __NR_utimensat,
#endif
};

/* Namespaces a clone() must not create. */
#define CLONE_NAMESPACES                                                                   \
    (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
     CLONE_NEWCGROUP)

/* How the filter treats one system call number. Each kind's code ends in
 * RET on every path; it may clobber A, because nothing runs after it. */
enum rule_kind {
    RULE_DENY,          /* RET action */
    RULE_ARG_IN,        /* allowed only when argument `arg` is one of values */
    RULE_ARG_NOT_IN,    /* denied (EPERM) when argument `arg` is one of values */
    RULE_ARG_BITS,      /* denied (EPERM) when argument `arg` has a bit of `bits`, and
                         * (if when_bits is not 0) argument `when_arg` one of when_bits */
    RULE_WHO_IS_SELF,   /* (which, who): which == required, who one of values */
    RULE_ONLY_ZERO,     /* denied (EPERM) when argument `when_arg` is `required` and the
                         * low half of argument `arg` is not 0 */
    RULE_BOTH_IN,       /* arguments 0 and 1 both one of values */
    RULE_FCNTL,         /* see add_fcntl_rules: commands in values */
    RULE_CLONE,
    RULE_SOCKET,
    RULE_SOCKETPAIR,
    RULE_SOCKET_BUFFERS,
    RULE_IOCTL,
};

struct rule {
    uint32_t nr;
    uint32_t last;       /* RULE_DENY: the rule covers nr..last */
    enum rule_kind kind;
    uint32_t action;     /* RULE_DENY */
    unsigned int arg;    /* RULE_ARG_IN, RULE_ARG_NOT_IN, RULE_ARG_BITS, RULE_ONLY_ZERO */
    uint32_t required;   /* RULE_WHO_IS_SELF, RULE_ONLY_ZERO */
    uint32_t values[5];  /* RULE_ARG_IN, RULE_ARG_NOT_IN, RULE_WHO_IS_SELF, RULE_BOTH_IN,
                          * RULE_FCNTL */
    size_t count;
    uint32_t bits;       /* RULE_ARG_BITS */
    unsigned int when_arg; /* RULE_ARG_BITS, RULE_ONLY_ZERO */
    uint32_t when_bits;
};

#define DENIED_COUNT (sizeof denied_syscalls / sizeof denied_syscalls[0])
#define MAX_RULES (DENIED_COUNT + 48)

struct rules {
    struct rule items[MAX_RULES];
    size_t count;
    int overflow;
};

static struct rule *add_rule(struct rules *rules, uint32_t nr, enum rule_kind kind)
{
    if (rules->count >= MAX_RULES) {
        rules->overflow = 1;
        return NULL;
    }
    struct rule *rule = &rules->items[rules->count++];
    memset(rule, 0, sizeof *rule);
    rule->nr = nr;
    rule->last = nr;
    rule->kind = kind;
    return rule;
}

static void add_deny(struct rules *rules, uint32_t nr, uint32_t action)
{
    struct rule *rule = add_rule(rules, nr, RULE_DENY);
    if (rule != NULL)
        rule->action = action;
}

static void add_arg_in(struct rules *rules, enum rule_kind kind, uint32_t nr, unsigned int arg,
                       uint32_t required, const uint32_t *values, size_t count)
{
    struct rule *rule = add_rule(rules, nr, kind);
    if (rule == NULL)
        return;
    if (count > sizeof rule->values / sizeof rule->values[0]) {
        rules->overflow = 1;
        return;
    }
    rule->arg = arg;
    rule->required = required;
    memcpy(rule->values, values, count * sizeof *values);
    rule->count = count;
}

static void add_arg_bits(struct rules *rules, uint32_t nr, unsigned int arg, uint32_t bits,
                         unsigned int when_arg, uint32_t when_bits)
{
    struct rule *rule = add_rule(rules, nr, RULE_ARG_BITS);
    if (rule == NULL)
        return;
    rule->arg = arg;
    rule->bits = bits;
    rule->when_arg = when_arg;
    rule->when_bits = when_bits;
}

static void add_only_zero(struct rules *rules, uint32_t nr, unsigned int when_arg,
                          uint32_t required, unsigned int arg)
{
    struct rule *rule = add_rule(rules, nr, RULE_ONLY_ZERO);
    if (rule == NULL)
        return;
    rule->when_arg = when_arg;
    rule->required = required;
    rule->arg = arg;
}

/* Threads only: CLONE_THREAD set and no namespace flag. fork(), vfork() and
 * posix_spawn() all come through here without CLONE_THREAD. */
static void emit_clone(struct pynox_bpf *prog)
{
    pynox_bpf_load(prog, ARG_LO(0)); /* flags are the first argument on both targets */
    pynox_bpf_and(prog, CLONE_THREAD | CLONE_NAMESPACES);
    pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 0, 1, CLONE_THREAD);
    pynox_bpf_ret(prog, RET_ALLOW);
    pynox_bpf_ret(prog, RET_EPERM);
}

/* No Unix sockets (they reach services by path or abstract name), no raw,
 * netlink or packet sockets; TCP/UDP only with network access. */
static void emit_socket(struct pynox_bpf *prog, int allow_network)
{
    static const uint32_t inet[] = {AF_INET, AF_INET6};
    pynox_bpf_load(prog, ARG_LO(0));
    /* EACCES for "the policy has no network", EPERM for "never". */
    pynox_bpf_ret_if_one_of(prog, inet, 2, allow_network ? RET_ALLOW : RET_ERRNO(EACCES),
                            RET_EPERM);
}

/* socketpair() stays for asyncio, but only Unix ones of connected kinds: a
 * datagram socket from a pair could still sendto() any host Unix socket by
 * path. Another family would make the kernel load and run that family's
 * socket code (vsock, TIPC, RDS...), which socket() refuses, before its
 * socketpair() fails. */
static void emit_socketpair(struct pynox_bpf *prog)
{
    static const uint32_t connected[] = {SOCK_STREAM, SOCK_SEQPACKET};
    pynox_bpf_load(prog, ARG_LO(0));
    pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, AF_UNIX);
    pynox_bpf_ret(prog, RET_EPERM);
    pynox_bpf_load(prog, ARG_LO(1));
    pynox_bpf_and(prog, 0xf); /* the type without SOCK_NONBLOCK and SOCK_CLOEXEC */
    pynox_bpf_ret_if_one_of(prog, connected, 2, RET_ALLOW, RET_EPERM);
}

/* Without the network every socket is a socketpair() end, whose kernel
 * buffer holds what one end wrote and the other has not read: up to its send
 * buffer's size, which SO_SNDBUF could raise to twice net.core.wmem_max (8
 * MiB per socket on a host tuned to 4 MiB). RLIMIT_AS counts none of it, so
 * the sizes stay the system's defaults. (The FORCE variants need
 * CAP_NET_ADMIN, which the process does not have.) */
static void emit_socket_buffers(struct pynox_bpf *prog)
{
    static const uint32_t sizes[] = {SO_SNDBUF, SO_RCVBUF};
    pynox_bpf_load(prog, ARG_LO(1));
    pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, SOL_SOCKET);
    pynox_bpf_ret(prog, RET_ALLOW);
    pynox_bpf_load(prog, ARG_LO(2));
    pynox_bpf_ret_if_one_of(prog, sizes, sizeof sizes / sizeof sizes[0], RET_EPERM, RET_ALLOW);
}

/* ioctl is an allowlist: a request outside it fails with ENOTTY, the kernel's own
 * answer to a request a file does not support, so that code probing for an optional
 * feature falls back as it would elsewhere. File systems answer requests of their
 * own that check only the file's ownership or the directory's mode bits, which
 * Landlock does not govern (its ioctl right covers devices): on btrfs, a directory
 * opened for reading under a read grant is enough to create a subvolume in it or,
 * where the mount lets users, to delete a whole subvolume below it.
 *
 * Allowed: what the terminal a run shares with its user answers (its settings, in
 * the TCGETS2 forms newer C libraries use too, its size, its process group and
 * session, draining and flushing its queues); bytes waiting to be read or sent;
 * non-blocking mode and close-on-exec (sockets and os.set_inheritable); and a
 * file's attribute flags, read only.
 *
 * Refused with EPERM rather than ENOTTY, so that the program is told it is not
 * permitted rather than unsupported: the terminal ioctls that push input into a
 * terminal or take one over, or (for a program that stays in the terminal's
 * session) move its foreground process group or console; the ioctl forms of
 * F_SETOWN (see add_fcntl_rules); and the ioctls that change a file's own
 * attributes, which the kernel allows on any descriptor of a file the user owns:
 * its flags (chattr), extended flags and project, generation, fs-verity (read-only
 * for good) and an encryption policy, as chmod() is refused (metadata, above). */
static void emit_ioctl(struct pynox_bpf *prog)
{
    static const uint32_t refused[] = {
        TIOCSTI,           TIOCLINUX,         TIOCSCTTY,
        TIOCSPGRP,         TIOCCONS,          FIOSETOWN,
        SIOCSPGRP,         FS_IOC_SETFLAGS,   FS_IOC32_SETFLAGS,
        FS_IOC_FSSETXATTR, FS_IOC_SETVERSION, FS_IOC32_SETVERSION,
        FS_IOC_ENABLE_VERITY,
        FS_IOC_SET_ENCRYPTION_POLICY,
    };
    static const uint32_t allowed[] = {
        TCGETS,          TCSETS,            TCSETSW,         TCSETSF,
        PYNOX_TCGETS2,   PYNOX_TCSETS2,     PYNOX_TCSETSW2,  PYNOX_TCSETSF2,
        TIOCGWINSZ,      TIOCGPGRP,         TIOCGSID,        TCSBRK,
        TCFLSH,          TIOCOUTQ,          FIONREAD,        FIONBIO,
        FIOCLEX,         FIONCLEX,          FS_IOC_GETFLAGS, FS_IOC32_GETFLAGS,
        FS_IOC_FSGETXATTR,
    };
    static const struct pynox_bpf_set sets[] = {
        {refused, sizeof refused / sizeof refused[0], RET_EPERM},
        {allowed, sizeof allowed / sizeof allowed[0], RET_ALLOW},
    };
    pynox_bpf_load(prog, ARG_LO(1));
    pynox_bpf_ret_by_set(prog, sets, sizeof sets / sizeof sets[0], RET_ERRNO(ENOTTY));
}

static void emit_arg_bits(struct pynox_bpf *prog, const struct rule *rule)
{
    if (rule->when_bits != 0) {
        pynox_bpf_load(prog, ARG_LO(rule->when_arg));
        /* None of when_bits: on to the RET ALLOW three instructions ahead. */
        pynox_bpf_emit(prog, BPF_JMP | BPF_JSET | BPF_K, 0, 2, rule->when_bits);
    }
    pynox_bpf_load(prog, ARG_LO(rule->arg));
    pynox_bpf_emit(prog, BPF_JMP | BPF_JSET | BPF_K, 1, 0, rule->bits);
    pynox_bpf_ret(prog, RET_ALLOW);
    pynox_bpf_ret(prog, RET_EPERM);
}

static void emit_only_zero(struct pynox_bpf *prog, const struct rule *rule)
{
    pynox_bpf_load(prog, ARG_LO(rule->when_arg));
    /* Another value: on to the RET ALLOW three instructions ahead. */
    pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 0, 3, rule->required);
    pynox_bpf_load(prog, ARG_LO(rule->arg));
    pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 0);
    pynox_bpf_ret(prog, RET_EPERM);
    pynox_bpf_ret(prog, RET_ALLOW);
}

/* Arguments 0 and 1 both one of values: EPERM unless argument 0 matches (each
 * JEQ that matches jumps past the JEQs after it and the RET), then the same for
 * argument 1. */
static void emit_both_in(struct pynox_bpf *prog, const struct rule *rule)
{
    pynox_bpf_load(prog, ARG_LO(0));
    for (size_t i = 0; i < rule->count; i++)
        pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, (uint8_t)(rule->count - i), 0,
                       rule->values[i]);
    pynox_bpf_ret(prog, RET_EPERM);
    pynox_bpf_load(prog, ARG_LO(1));
    pynox_bpf_ret_if_one_of(prog, rule->values, rule->count, RET_ALLOW, RET_EPERM);
}

/* fcntl(fd, cmd, arg): EPERM for the commands in values, and for F_SETFL with
 * O_ASYNC in arg (see add_fcntl_rules); anything else is allowed. */
static void emit_fcntl(struct pynox_bpf *prog, const struct rule *rule)
{
    const size_t refuse_at = rule->count + 5; /* the RET EPERM below */
    pynox_bpf_load(prog, ARG_LO(1));
    for (size_t i = 0; i < rule->count; i++)
        pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, (uint8_t)(refuse_at - (i + 1) - 1), 0,
                       rule->values[i]);
    /* Not F_SETFL: on to the RET ALLOW. */
    pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 0, 2, F_SETFL);
    pynox_bpf_load(prog, ARG_LO(2));
    pynox_bpf_emit(prog, BPF_JMP | BPF_JSET | BPF_K, 1, 0, O_ASYNC);
    pynox_bpf_ret(prog, RET_ALLOW);
    pynox_bpf_ret(prog, RET_EPERM);
}

static void emit_rule(struct pynox_bpf *prog, const struct rule *rule, int allow_network)
{
    switch (rule->kind) {
    case RULE_DENY:
        pynox_bpf_ret(prog, rule->action);
        return;
    case RULE_ARG_IN:
        pynox_bpf_load(prog, ARG_LO(rule->arg));
        pynox_bpf_ret_if_one_of(prog, rule->values, rule->count, RET_ALLOW, RET_EPERM);
        return;
    case RULE_ARG_NOT_IN:
        pynox_bpf_load(prog, ARG_LO(rule->arg));
        pynox_bpf_ret_if_one_of(prog, rule->values, rule->count, RET_EPERM, RET_ALLOW);
        return;
    case RULE_ARG_BITS:
        emit_arg_bits(prog, rule);
        return;
    case RULE_WHO_IS_SELF:
        pynox_bpf_load(prog, ARG_LO(0));
        pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, rule->required);
        pynox_bpf_ret(prog, RET_EPERM);
        pynox_bpf_load(prog, ARG_LO(1));
        pynox_bpf_ret_if_one_of(prog, rule->values, rule->count, RET_ALLOW, RET_EPERM);
        return;
    case RULE_ONLY_ZERO:
        emit_only_zero(prog, rule);
        return;
    case RULE_BOTH_IN:
        emit_both_in(prog, rule);
        return;
    case RULE_FCNTL:
        emit_fcntl(prog, rule);
        return;
    case RULE_CLONE:
        emit_clone(prog);
        return;
    case RULE_SOCKET:
        emit_socket(prog, allow_network);
        return;
    case RULE_SOCKETPAIR:
        emit_socketpair(prog);
        return;
    case RULE_SOCKET_BUFFERS:
        emit_socket_buffers(prog);
        return;
    case RULE_IOCTL:
        emit_ioctl(prog);
        return;
    }
    prog->broken = "a seccomp rule has an unknown kind";
}

/* Calls that may name another process: only this one. */
static void add_own_process_rules(struct rules *rules, pid_t pid, int group_of_its_own)
{
    const uint32_t self = (uint32_t)pid;
    const uint32_t own_group = (uint32_t)-pid;
    const uint32_t self_or_zero[] = {self, 0};
    /* kill(0) is the caller's process group: its own only after setsid() or when
     * the caller made it a new group of its own, otherwise the group of whoever
     * started it. */
    const uint32_t kill_targets[] = {self, own_group, 0};
    const size_t kill_count = group_of_its_own ? 3 : 2;
    static const uint32_t by_pid[] = {
        __NR_prlimit64,         __NR_sched_setscheduler, __NR_sched_setparam,
        __NR_sched_setaffinity, __NR_sched_setattr,      __NR_migrate_pages,
        __NR_move_pages,
    };

    add_arg_in(rules, RULE_ARG_IN, __NR_kill, 0, 0, kill_targets, kill_count);
    add_arg_in(rules, RULE_ARG_IN, __NR_rt_sigqueueinfo, 0, 0, kill_targets, kill_count);
    add_arg_in(rules, RULE_ARG_IN, __NR_tgkill, 0, 0, &self, 1);
    add_arg_in(rules, RULE_ARG_IN, __NR_rt_tgsigqueueinfo, 0, 0, &self, 1);
    for (size_t i = 0; i < sizeof by_pid / sizeof by_pid[0]; i++)
        add_arg_in(rules, RULE_ARG_IN, by_pid[i], 0, 0, self_or_zero, 2);
    /* (which, who): a process, and that process is this one. */
    add_arg_in(rules, RULE_WHO_IS_SELF, __NR_setpriority, 0, PRIO_PROCESS, self_or_zero, 2);
    add_arg_in(rules, RULE_WHO_IS_SELF, __NR_ioprio_set, 0, IOPRIO_WHO_PROCESS, self_or_zero, 2);
    /* (pid, pgid): a group of its own (os.setpgrp()), never another. Joining the
     * terminal's foreground group, whose id TIOCGPGRP gives, would let a program
     * started in the background read what is typed for the foreground one, as
     * TIOCSPGRP would (emit_ioctl). */
    add_arg_in(rules, RULE_BOTH_IN, __NR_setpgid, 0, 0, self_or_zero, 2);
}

/* fcntl() commands a program never gets.
 *
 * A file's owner (F_SETOWN, F_SETOWN_EX) is whom the kernel signals when
 * I/O is ready on it with O_ASYNC set, or when it has urgent data: any
 * process or process group the user could signal, and with F_SETSIG any
 * signal. kill() is confined to this process (add_own_process_rules), but
 * only Landlock's signal scope (ABI 6, Linux 6.12) covers these signals, so
 * they are refused here on every kernel. The ioctl forms are in emit_ioctl.
 * A file keeps the owner it had (none, or this process after F_NOTIFY,
 * which sets it itself). Setting O_ASYNC (F_SETFL) is refused too: on a
 * terminal the kernel makes the terminal's foreground process group the owner
 * itself, and the signal (SIGIO ends a process that does not handle it) would
 * reach whatever runs in the foreground whenever a line is typed. The ioctl
 * form, FIOASYNC, is outside emit_ioctl's allowlist.
 *
 * A lease (F_SETLEASE) needs only a descriptor of a file the user owns, one
 * opened for reading under a read grant included: whoever then opens the file
 * for writing, outside the sandbox too, waits until the program lets go, up to
 * fs.lease-break-time (45 s) each time.
 *
 * F_SETPIPE_SZ would let a pipe hold 1 MiB (fs.pipe-max-size) instead of
 * 64 KiB, memory RLIMIT_AS does not count: pipes keep their default size,
 * and hold less per descriptor than a socket (see limits.c). */
static void add_fcntl_rules(struct rules *rules)
{
    static const uint32_t commands[] = {F_SETOWN, F_SETOWN_EX, F_SETSIG, F_SETPIPE_SZ,
                                        F_SETLEASE};
    const size_t count = sizeof commands / sizeof commands[0];
    add_arg_in(rules, RULE_FCNTL, __NR_fcntl, 1, 0, commands, count);
#ifdef __NR_fcntl64
    add_arg_in(rules, RULE_FCNTL, __NR_fcntl64, 1, 0, commands, count);
#endif
}

/* O_TMPFILE without its O_DIRECTORY part: the bit that makes open() create
 * a file (glibc's O_TMPFILE includes O_DIRECTORY, whose value differs
 * between x86_64 and aarch64; this one is the same on both). */
#define OPEN_TMPFILE_BIT 020000000U
#ifdef O_TMPFILE
_Static_assert((O_TMPFILE & OPEN_TMPFILE_BIT) != 0, "O_TMPFILE has the bit the filter checks");
#endif

/* bind() names a socket, which seccomp cannot look at: it sees only the
 * address's length. Without the network the only sockets are socketpair()
 * ends (AF_UNIX), and a bind() there would take an abstract name from the
 * host's services (Landlock's abstract-socket scope, ABI 6, governs only
 * connecting and sending): bind() and listen() are refused outright. With
 * the network, bind() must pass the length of an IPv4 or IPv6 address; an
 * AF_UNIX abstract name of exactly that length (13 or 25 bytes after its
 * leading NUL) still passes, which the documentation says. listen() fails
 * on a socketpair() end anyway (it is connected). */
static const uint32_t inet_address_lengths[] = {sizeof(struct sockaddr_in),
                                                sizeof(struct sockaddr_in6)};

static void add_bind_rules(struct rules *rules, int allow_network)
{
    if (allow_network) {
        add_arg_in(rules, RULE_ARG_IN, __NR_bind, 2, 0, inet_address_lengths,
                   sizeof inet_address_lengths / sizeof inet_address_lengths[0]);
        return;
    }
    add_deny(rules, __NR_bind, RET_EPERM);
    add_deny(rules, __NR_listen, RET_EPERM);
}

/* A program never makes a set-user-ID or set-group-ID file, directory or
 * node (with umask(0), mode 06777 would): a later run by someone else could
 * execute or inherit it. Any call that creates with such a mode fails; the
 * mode is an argument of the call itself everywhere except openat2(), which
 * passes it in memory and so fails with ENOSYS (callers fall back to
 * openat()). chmod() and friends are denied outright. A directory's own
 * set-group-ID bit, which new subdirectories inherit, is its owner's choice. */
static void add_no_set_id_rules(struct rules *rules)
{
    const uint32_t set_id = S_ISUID | S_ISGID;
    const uint32_t creates = O_CREAT | OPEN_TMPFILE_BIT;
    /* (path, flags, mode) and (dirfd, path, flags, mode): the mode matters
     * only with O_CREAT or O_TMPFILE. */
#ifdef __NR_open
    add_arg_bits(rules, __NR_open, 2, set_id, 1, creates);
#endif
    add_arg_bits(rules, __NR_openat, 3, set_id, 2, creates);
    /* (path, mode), and (dirfd, path, mode) for the *at calls; mknod's
     * third argument, the device, comes after the mode. */
#ifdef __NR_creat
    add_arg_bits(rules, __NR_creat, 1, set_id, 0, 0);
#endif
#ifdef __NR_mkdir
    add_arg_bits(rules, __NR_mkdir, 1, set_id, 0, 0);
#endif
#ifdef __NR_mknod
    add_arg_bits(rules, __NR_mknod, 1, set_id, 0, 0);
#endif
    add_arg_bits(rules, __NR_mkdirat, 2, set_id, 0, 0);
    add_arg_bits(rules, __NR_mknodat, 2, set_id, 0, 0);
    add_deny(rules, __NR_openat2, RET_ERRNO(ENOSYS));
}

static void collect_rules(struct rules *rules, const struct pynox_policy *policy, int part)
{
    /* Only the query; ADDR_NO_RANDOMIZE and friends weaken the process. */
    static const uint32_t personality_query = 0xffffffffU;

    rules->count = 0;
    rules->overflow = 0;
    if (part != PYNOX_FILTER_SHARED) {
        add_rule(rules, __NR_clone, RULE_CLONE);
        /* Checked here too: a flag the group has not earned allows nothing more. */
        const int group_of_its_own =
            (policy->new_session || policy->own_group) && getpgrp() == getpid();
        add_own_process_rules(rules, getpid(), group_of_its_own);
    }
    if (part == PYNOX_FILTER_OWN)
        return;
    for (size_t i = 0; i < DENIED_COUNT; i++)
        add_deny(rules, denied_syscalls[i], RET_EPERM);
    add_deny(rules, __NR_clone3, RET_ERRNO(ENOSYS));
    add_rule(rules, __NR_socket, RULE_SOCKET);
    add_rule(rules, __NR_socketpair, RULE_SOCKETPAIR);
    add_rule(rules, __NR_ioctl, RULE_IOCTL);
    add_arg_in(rules, RULE_ARG_IN, __NR_personality, 0, 0, &personality_query, 1);
    add_fcntl_rules(rules);
    add_no_set_id_rules(rules);
    /* The sandbox makes the process undumpable (runtime/sandbox.c): never dumpable again.
     * PR_SET_DUMPABLE takes only 0 and 1 whole; the low half 0 with any other high
     * half is EINVAL. */
    add_only_zero(rules, __NR_prctl, 0, PR_SET_DUMPABLE, 1);
    add_bind_rules(rules, policy->allow_network);
    if (!policy->allow_network)
        add_rule(rules, __NR_setsockopt, RULE_SOCKET_BUFFERS);
}

/* Denials of consecutive numbers become one range: fewer instructions, and
 * the kernel's cost of installing a filter grows with its length. */
static void merge_ranges(struct rules *rules)
{
    size_t kept = 0;
    for (size_t i = 0; i < rules->count; i++) {
        struct rule *rule = &rules->items[i];
        struct rule *previous = kept > 0 ? &rules->items[kept - 1] : NULL;
        if (previous != NULL && previous->kind == RULE_DENY && rule->kind == RULE_DENY &&
            previous->action == rule->action && rule->nr == previous->last + 1) {
            previous->last = rule->nr;
            continue;
        }
        rules->items[kept++] = *rule;
    }
    rules->count = kept;
}

static int by_number(const void *a, const void *b)
{
    const struct rule *left = a;
    const struct rule *right = b;
    return (left->nr > right->nr) - (left->nr < right->nr);
}

/* A few rules are checked one after the other; more are split in two by a
 * comparison, so a call meets about log2(rules) tests instead of all of them.
 * That matters twice: on every filtered call, and when the kernel installs
 * the filter, since it runs the filter once per system call number to learn
 * which calls it can allow without running it again. */
#define LINEAR_RULES 4

static void emit_tree(struct pynox_bpf *prog, const struct rule *rules, size_t count,
                      int allow_network)
{
    if (count <= LINEAR_RULES) {
        for (size_t i = 0; i < count; i++) {
            if (rules[i].last != rules[i].nr) {
                /* nr <= A <= last: RET; the rule's code is that one RET. */
                pynox_bpf_emit(prog, BPF_JMP | BPF_JGE | BPF_K, 0, 2, rules[i].nr);
                pynox_bpf_emit(prog, BPF_JMP | BPF_JGT | BPF_K, 1, 0, rules[i].last);
                pynox_bpf_ret(prog, rules[i].action);
                continue;
            }
            size_t block = pynox_bpf_begin_block(prog, rules[i].nr);
            emit_rule(prog, &rules[i], allow_network);
            pynox_bpf_end_block(prog, block);
        }
        pynox_bpf_ret(prog, RET_ALLOW);
        return;
    }
    size_t half = count / 2;
    /* A >= the first number of the upper half: take the jump to it. */
    pynox_bpf_emit(prog, BPF_JMP | BPF_JGE | BPF_K, 0, 1, rules[half].nr);
    size_t jump = pynox_bpf_emit(prog, BPF_JMP | BPF_JA, 0, 0, 0);
    emit_tree(prog, rules, half, allow_network);
    pynox_bpf_jump_here(prog, jump);
    emit_tree(prog, rules + half, count - half, allow_network);
}

static void build_filter(struct pynox_bpf *prog, struct rules *rules,
                         const struct pynox_policy *policy, int part)
{
    pynox_bpf_init(prog);

    collect_rules(rules, policy, part);
    if (rules->overflow) {
        prog->broken = "the seccomp rules outgrew their table";
        return;
    }
    qsort(rules->items, rules->count, sizeof rules->items[0], by_number);
    for (size_t i = 1; i < rules->count; i++) {
        /* Two rules for one call would leave which one applies to the layout. */
        if (rules->items[i].nr == rules->items[i - 1].nr) {
            prog->broken = "a system call has two seccomp rules";
            return;
        }
    }
    merge_ranges(rules);

    /* Another ABI (i386 via int 0x80, AArch32) has other numbers: refuse all
     * of it rather than check the numbers against the wrong table. */
    pynox_bpf_load(prog, offsetof(struct seccomp_data, arch));
    pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, PYNOX_AUDIT_ARCH);
    pynox_bpf_ret(prog, RET_EPERM);

    pynox_bpf_load(prog, offsetof(struct seccomp_data, nr));
#ifdef PYNOX_X32_SYSCALL_BIT
    /* x32 calls share the arch value; their numbers carry this bit. */
    pynox_bpf_emit(prog, BPF_JMP | BPF_JSET | BPF_K, 0, 1, PYNOX_X32_SYSCALL_BIT);
    pynox_bpf_ret(prog, RET_EPERM);
#endif

    emit_tree(prog, rules->items, rules->count, policy->allow_network);
}

static int install(const struct pynox_bpf *prog, const char *what, char *err, size_t err_len)
{
    if (prog->broken != NULL)
        return pynox_fail(err, err_len, "%s", prog->broken);
    struct sock_fprog fprog = {.len = (unsigned short)prog->len,
                               .filter = (struct sock_filter *)prog->insns};
    if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) == 0)
        return 0;
    if (errno != ENOSYS)
        return pynox_fail(err, err_len, "installing the %s failed: %s", what, strerror(errno));
    /* Linux < 3.17 has no seccomp(2), only the prctl. */
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) != 0)
        return pynox_fail(err, err_len, "installing the %s failed: %s", what, strerror(errno));
    return 0;
}

static int known_part(int part)
{
    return part == PYNOX_FILTER_WHOLE || part == PYNOX_FILTER_SHARED || part == PYNOX_FILTER_OWN;
}

int pynox_apply_seccomp_part(const struct pynox_policy *policy, int part, char *err,
                             size_t err_len)
{
    if (!known_part(part))
        return pynox_fail(err, err_len, "no seccomp filter has a part %d", part);
    struct pynox_bpf prog;
    struct rules rules;
    build_filter(&prog, &rules, policy, part);
    return install(&prog, "seccomp filter", err, err_len);
}

int pynox_apply_seccomp(const struct pynox_policy *policy, char *err, size_t err_len)
{
    return pynox_apply_seccomp_part(policy, PYNOX_FILTER_WHOLE, err, err_len);
}

/* For tests (see sandbox.h): the rules as data; nothing is installed. */
int pynox_seccomp_rules(const struct pynox_policy *policy, int merged, int part,
                        struct pynox_seccomp_rule *out, size_t capacity, char *err,
                        size_t err_len)
{
    if (!known_part(part))
        return pynox_fail(err, err_len, "no seccomp filter has a part %d", part);
    struct pynox_bpf prog;
    struct rules rules;
    if (merged) {
        build_filter(&prog, &rules, policy, part);
        if (prog.broken != NULL)
            return pynox_fail(err, err_len, "%s", prog.broken);
    } else {
        collect_rules(&rules, policy, part);
        if (rules.overflow)
            return pynox_fail(err, err_len, "the seccomp rules outgrew their table");
    }
    for (size_t i = 0; i < rules.count && i < capacity; i++) {
        const struct rule *rule = &rules.items[i];
        int denied = rule->kind == RULE_DENY;
        out[i] = (struct pynox_seccomp_rule){.first = rule->nr,
                                             .last = rule->last,
                                             .denied = denied,
                                             .action = denied ? rule->action : 0};
    }
    return (int)rules.count;
}

int pynox_apply_seccomp_no_network(char *err, size_t err_len)
{
    static const uint32_t inet[] = {AF_INET, AF_INET6};
    /* What the first filter allows only with the network (add_bind_rules). */
    static const uint32_t refused[] = {__NR_bind, __NR_listen};
    struct pynox_bpf prog;
    pynox_bpf_init(&prog);
    /* Another ABI's numbers mean other calls; the first filter refuses all of them. */
    pynox_bpf_load(&prog, offsetof(struct seccomp_data, arch));
    pynox_bpf_emit(&prog, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, PYNOX_AUDIT_ARCH);
    pynox_bpf_ret(&prog, RET_ALLOW);
    pynox_bpf_load(&prog, offsetof(struct seccomp_data, nr));
    size_t block = pynox_bpf_begin_block(&prog, __NR_socket);
    pynox_bpf_load(&prog, ARG_LO(0));
    pynox_bpf_ret_if_one_of(&prog, inet, 2, RET_ERRNO(EACCES), RET_ALLOW);
    pynox_bpf_end_block(&prog, block);
    block = pynox_bpf_begin_block(&prog, __NR_setsockopt);
    emit_socket_buffers(&prog);
    pynox_bpf_end_block(&prog, block);
    /* A is still the number: the blocks' false edges skip their loads. */
    pynox_bpf_ret_if_one_of(&prog, refused, sizeof refused / sizeof refused[0], RET_EPERM,
                            RET_ALLOW);
    return install(&prog, "seccomp network filter", err, err_len);
}
