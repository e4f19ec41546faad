/* The one place that knows about the target architecture.
 *
 * Everything that differs between x86_64 and aarch64 lives here: the audit
 * architecture seccomp reports, the x32 bit, and the numbers of system calls
 * newer than the installed kernel headers. Every number defined below is from
 * the range (>= 424) that all architectures share, so it is the same on both
 * targets.
 */
#ifndef PYNOX_SYSCALLS_H
#define PYNOX_SYSCALLS_H

#include <linux/audit.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
/* x86_64 proper; i386 (int 0x80) arrives with AUDIT_ARCH_I386. */
#define PYNOX_AUDIT_ARCH AUDIT_ARCH_X86_64
/* x32 system calls share AUDIT_ARCH_X86_64 and set this bit in the number. */
#define PYNOX_X32_SYSCALL_BIT 0x40000000U
#elif defined(__aarch64__)
/* AArch32 compat calls arrive with AUDIT_ARCH_ARM. */
#define PYNOX_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the Pynox sandbox supports x86_64 and aarch64 only"
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the seccomp filter loads the low word of arguments at offset 0 (little-endian)"
#endif

#ifndef __NR_pidfd_send_signal
#define __NR_pidfd_send_signal 424
#endif
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_io_uring_enter
#define __NR_io_uring_enter 426
#endif
#ifndef __NR_io_uring_register
#define __NR_io_uring_register 427
#endif
#ifndef __NR_open_tree
#define __NR_open_tree 428
#endif
#ifndef __NR_move_mount
#define __NR_move_mount 429
#endif
#ifndef __NR_fsopen
#define __NR_fsopen 430
#endif
#ifndef __NR_fsconfig
#define __NR_fsconfig 431
#endif
#ifndef __NR_fsmount
#define __NR_fsmount 432
#endif
#ifndef __NR_fspick
#define __NR_fspick 433
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_close_range
#define __NR_close_range 436
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#ifndef __NR_process_madvise
#define __NR_process_madvise 440
#endif
#ifndef __NR_mount_setattr
#define __NR_mount_setattr 442
#endif
#ifndef __NR_quotactl_fd
#define __NR_quotactl_fd 443
#endif
#ifndef __NR_openat2
#define __NR_openat2 437
#endif
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif
#ifndef __NR_memfd_secret
#define __NR_memfd_secret 447
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_statmount
#define __NR_statmount 457
#endif
#ifndef __NR_listmount
#define __NR_listmount 458
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_getxattrat
#define __NR_getxattrat 464
#endif
#ifndef __NR_listxattrat
#define __NR_listxattrat 465
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif
#ifndef __NR_file_setattr
#define __NR_file_setattr 469
#endif

/* Test builds only (the bundler sets it from PYNOX_TEST_C_DEFINE, which only a test
 * gives): socket's number on aarch64 replaced by one no aarch64 call has, the kind of
 * table mistake only that architecture would make, which the arm64 conformance cell
 * must catch. */
#if defined(__aarch64__) && defined(PYNOX_TEST_WRONG_AARCH64_SOCKET)
#undef __NR_socket
#define __NR_socket 245
#endif

#endif
