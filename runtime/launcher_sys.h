/* What the launcher needs from Linux, without a C library.
 *
 * The launcher is a static executable with no libc: the kernel maps one file and
 * jumps to _start, which is the cheapest exec there is (no dynamic loader, no
 * libc start-up). This header gives it raw system calls, the few constants and
 * errno values they use, and small string and output helpers (launcher_sys.c).
 */
#ifndef PYNOX_LAUNCHER_SYS_H
#define PYNOX_LAUNCHER_SYS_H

#include <stddef.h>

#if defined(__x86_64__)
#define SYS_read 0
#define SYS_write 1
#define SYS_close 3
#define SYS_getpid 39
#define SYS_execve 59
#define SYS_exit_group 231
#define SYS_openat 257
#define SYS_readlinkat 267
#define SYS_faccessat 269
#define SYS_lseek 8
#define SYS_fcntl 72
#define SYS_clone 56
#define SYS_wait4 61
#define SYS_waitid 247
#define SYS_rt_sigpending 127
#define SYS_setsid 112
#define SYS_getpgid 121
#define SYS_getdents64 217
#define SYS_unlinkat 263
#define SYS_pipe2 293
#define SYS_rt_sigaction 13
#define SYS_rt_sigprocmask 14
#define SYS_kill 62
#define SYS_clock_gettime 228
#define SYS_ppoll 271
#define SYS_signalfd4 289
#define SYS_prlimit64 302
#define SYS_mmap 9
#define SYS_munmap 11
#define SYS_mkdirat 258
#define SYS_getrandom 318
#define SYS_fchmodat 268
#define LAUNCHER_O_DIRECTORY 0200000
#define LAUNCHER_O_NOFOLLOW 0400000
#elif defined(__aarch64__)
#define SYS_faccessat 48
#define SYS_openat 56
#define SYS_close 57
#define SYS_read 63
#define SYS_write 64
#define SYS_readlinkat 78
#define SYS_exit_group 94
#define SYS_getpid 172
#define SYS_execve 221
#define SYS_unlinkat 35
#define SYS_fcntl 25
#define SYS_pipe2 59
#define SYS_getdents64 61
#define SYS_lseek 62
#define SYS_setsid 157
#define SYS_getpgid 155
#define SYS_clone 220
#define SYS_wait4 260
#define SYS_waitid 95
#define SYS_rt_sigpending 136
#define SYS_signalfd4 74
#define SYS_ppoll 73
#define SYS_clock_gettime 113
#define SYS_kill 129
#define SYS_rt_sigaction 134
#define SYS_rt_sigprocmask 135
#define SYS_prlimit64 261
#define SYS_mmap 222
#define SYS_munmap 215
#define SYS_mkdirat 34
#define SYS_getrandom 278
#define SYS_fchmodat 53
#define LAUNCHER_O_DIRECTORY 040000
#define LAUNCHER_O_NOFOLLOW 0100000
#else
#error "the launcher supports Linux on x86_64 and aarch64 only"
#endif

#define LAUNCHER_PATH_MAX 4096
#define LAUNCHER_AT_FDCWD (-100)
#define LAUNCHER_O_RDONLY 0
#define LAUNCHER_O_CLOEXEC 02000000
#define LAUNCHER_O_NONBLOCK 04000 /* the same on both architectures */
#define LAUNCHER_O_PATH 010000000
#define LAUNCHER_F_OK 0
#define LAUNCHER_AT_REMOVEDIR 0x200
#define LAUNCHER_F_GETFD 1
#define LAUNCHER_F_SETFD 2
#define LAUNCHER_FD_CLOEXEC 1
#define LAUNCHER_SIGCHLD 17
#define LAUNCHER_SEEK_SET 0
#define LAUNCHER_DT_DIR 4
#define SYS_close_range 436 /* the same on both architectures */
#define SYS_pidfd_open 434

/* The same numbers on both architectures (asm-generic). */
#define LAUNCHER_EPERM 1
#define LAUNCHER_ENOENT 2
#define LAUNCHER_EINTR 4
#define LAUNCHER_EIO 5
#define LAUNCHER_EBADF 9
#define LAUNCHER_E2BIG 7
#define LAUNCHER_ENOEXEC 8
#define LAUNCHER_ENOMEM 12
#define LAUNCHER_EACCES 13
#define LAUNCHER_EFAULT 14
#define LAUNCHER_EEXIST 17
#define LAUNCHER_ENOTDIR 20
#define LAUNCHER_EISDIR 21
#define LAUNCHER_EINVAL 22
#define LAUNCHER_ENFILE 23
#define LAUNCHER_EMFILE 24
#define LAUNCHER_ETXTBSY 26
#define LAUNCHER_ENAMETOOLONG 36
#define LAUNCHER_ENOTEMPTY 39
#define LAUNCHER_ELOOP 40

/* The kernel's struct sigaction, for rt_sigaction with SIG_DFL or SIG_IGN (the fields
 * after the handler stay 0, where they lie does not matter then). */
struct sigaction_k {
    void *handler;
    unsigned long flags;
    void *restorer;
    unsigned long mask;
};
#define LAUNCHER_SIGPIPE 13
#define LAUNCHER_SIG_IGN ((void *)1)

/* A system call with up to six arguments (mmap's): the result, or -errno. */
static inline long sys_call6(long number, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
    long result;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
#else
    register long x8 __asm__("x8") = number;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc #0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory", "cc");
    return x0;
#endif
}

/* With five: the sixth argument register is set to 0, which the kernel ignores for
 * calls that take fewer. */
static inline long sys_call5(long number, long a, long b, long c, long d, long e)
{
    return sys_call6(number, a, b, c, d, e, 0);
}

/* The same with four: the fifth argument register is set to 0, which the kernel
 * ignores for calls that take fewer. */
static inline long sys_call(long number, long a, long b, long c, long d)
{
    return sys_call5(number, a, b, c, d, 0);
}

static inline long sys_read(int fd, void *buffer, size_t size)
{
    return sys_call(SYS_read, fd, (long)buffer, (long)size, 0);
}

static inline long sys_write(int fd, const void *buffer, size_t size)
{
    return sys_call(SYS_write, fd, (long)buffer, (long)size, 0);
}

static inline long sys_openat(int dirfd, const char *path, int flags)
{
    return sys_call(SYS_openat, dirfd, (long)path, flags, 0);
}

static inline long sys_close(int fd)
{
    return sys_call(SYS_close, fd, 0, 0, 0);
}

static inline long sys_readlinkat(int dirfd, const char *path, char *buffer, size_t size)
{
    return sys_call(SYS_readlinkat, dirfd, (long)path, (long)buffer, (long)size);
}

static inline long sys_faccessat(int dirfd, const char *path, int mode)
{
    return sys_call(SYS_faccessat, dirfd, (long)path, mode, 0);
}

static inline long sys_execve(const char *path, char *const *argv, char *const *envp)
{
    return sys_call(SYS_execve, (long)path, (long)argv, (long)envp, 0);
}

static inline long sys_getpid(void)
{
    return sys_call(SYS_getpid, 0, 0, 0, 0);
}

/* fork(): clone with only the signal the parent gets at the child's end (the
 * argument order of clone differs between architectures, but not in its first). */
static inline long sys_fork(void)
{
    return sys_call(SYS_clone, LAUNCHER_SIGCHLD, 0, 0, 0);
}

_Noreturn void sys_exit(int status);

/* The launcher's own main, called by _start with what the kernel put on the stack. */
int launcher_main(int argc, char **argv, char **envp);

/* The compiler may emit calls to these for copies and initializations. */
void *memcpy(void *restrict to, const void *restrict from, size_t size);
void *memmove(void *to, const void *from, size_t size);
void *memset(void *to, int byte, size_t size);
int memcmp(const void *a, const void *b, size_t size);

/* size bytes of zeroed memory, mapped only as they are touched; NULL if there is none. */
void *sys_alloc(size_t size);
void sys_free(void *memory, size_t size);

int str_equal(const char *a, const char *b);
/* The last '/' in text, or NULL. */
char *str_last_slash(char *text);
/* The glibc text of an errno value the launcher can meet, else "error N" in scratch. */
const char *error_text(int error, char *scratch, size_t size);

/* Appends text into out (size bytes, NUL-terminated); -1 when it does not fit, which
 * leaves out holding what fitted. */
int buf_append(char *out, size_t size, size_t *length, const char *text);
int buf_append_long(char *out, size_t size, size_t *length, long value);
/* Writes all of it to fd; -1 on any failure. */
int write_all(int fd, const char *data, size_t size);

#endif
