/* The launcher's start-up code and helpers, in place of a C library (see launcher_sys.h). */
#include "launcher_sys.h"

void launcher_start(long *stack);

/* The kernel starts the process here with argc, argv[], NULL, envp[], NULL on the
 * stack; the ABI wants the stack 16-byte aligned at a call. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".global _start\n"
        ".type _start, @function\n"
        "_start:\n"
        "    xor %ebp, %ebp\n"
        "    mov %rsp, %rdi\n"
        "    and $-16, %rsp\n"
        "    call launcher_start\n"
        "    hlt\n");
#else
__asm__(".text\n"
        ".global _start\n"
        ".type _start, %function\n"
        "_start:\n"
        "    mov x29, #0\n"
        "    mov x30, #0\n"
        "    mov x0, sp\n"
        "    and x1, x0, #-16\n"
        "    mov sp, x1\n"
        "    bl launcher_start\n"
        "    brk #0\n");
#endif

__attribute__((used)) void launcher_start(long *stack)
{
    int argc = (int)stack[0];
    char **argv = (char **)(stack + 1);
    sys_exit(launcher_main(argc, argv, argv + argc + 1));
}

_Noreturn void sys_exit(int status)
{
    for (;;) {
        sys_call(SYS_exit_group, status, 0, 0, 0);
    }
}

/* Byte loops: GCC is told not to turn them back into calls to themselves
 * (-fno-tree-loop-distribute-patterns), clang does not under -ffreestanding. */
void *memcpy(void *restrict to, const void *restrict from, size_t size)
{
    unsigned char *d = to;
    const unsigned char *s = from;
    while (size-- > 0) {
        *d++ = *s++;
    }
    return to;
}

void *memmove(void *to, const void *from, size_t size)
{
    unsigned char *d = to;
    const unsigned char *s = from;
    if (d < s) {
        while (size-- > 0) {
            *d++ = *s++;
        }
    } else {
        while (size-- > 0) {
            d[size] = s[size];
        }
    }
    return to;
}

void *memset(void *to, int byte, size_t size)
{
    unsigned char *d = to;
    while (size-- > 0) {
        *d++ = (unsigned char)byte;
    }
    return to;
}

int memcmp(const void *a, const void *b, size_t size)
{
    const unsigned char *x = a;
    const unsigned char *y = b;
    for (size_t i = 0; i < size; i++) {
        if (x[i] != y[i]) {
            return x[i] < y[i] ? -1 : 1;
        }
    }
    return 0;
}

#define PROT_READ_WRITE 0x3
#define MAP_PRIVATE_ANONYMOUS_NORESERVE 0x4022

void *sys_alloc(size_t size)
{
    long address = sys_call6(SYS_mmap, 0, (long)(size > 0 ? size : 1), PROT_READ_WRITE,
                             MAP_PRIVATE_ANONYMOUS_NORESERVE, -1, 0);
    /* Failures are -errno: the last page of the address space, never a mapping. */
    return address < 0 && address > -4096 ? NULL : (void *)address;
}

void sys_free(void *memory, size_t size)
{
    if (memory != NULL) {
        (void)sys_call(SYS_munmap, (long)memory, (long)(size > 0 ? size : 1), 0, 0);
    }
}

int str_equal(const char *a, const char *b)
{
    while (*a != '\0' && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

char *str_last_slash(char *text)
{
    char *found = NULL;
    for (; *text != '\0'; text++) {
        if (*text == '/') {
            found = text;
        }
    }
    return found;
}

const char *error_text(int error, char *scratch, size_t size)
{
    switch (error) {
    case LAUNCHER_EPERM:
        return "Operation not permitted";
    case LAUNCHER_ENOENT:
        return "No such file or directory";
    case LAUNCHER_EINTR:
        return "Interrupted system call";
    case LAUNCHER_EIO:
        return "Input/output error";
    case LAUNCHER_E2BIG:
        return "Argument list too long";
    case LAUNCHER_ENOEXEC:
        return "Exec format error";
    case LAUNCHER_ENOMEM:
        return "Cannot allocate memory";
    case LAUNCHER_EACCES:
        return "Permission denied";
    case LAUNCHER_EFAULT:
        return "Bad address";
    case LAUNCHER_ENOTDIR:
        return "Not a directory";
    case LAUNCHER_EISDIR:
        return "Is a directory";
    case LAUNCHER_EINVAL:
        return "Invalid argument";
    case LAUNCHER_ENFILE:
        return "Too many open files in system";
    case LAUNCHER_EMFILE:
        return "Too many open files";
    case LAUNCHER_ETXTBSY:
        return "Text file busy";
    case LAUNCHER_ENAMETOOLONG:
        return "File name too long";
    case LAUNCHER_ELOOP:
        return "Too many levels of symbolic links";
    default:
        break;
    }
    size_t length = 0;
    scratch[0] = '\0';
    buf_append(scratch, size, &length, "error ");
    buf_append_long(scratch, size, &length, error);
    return scratch;
}

int buf_append(char *out, size_t size, size_t *length, const char *text)
{
    size_t n = *length;
    for (; *text != '\0'; text++) {
        if (n + 1 >= size) {
            out[n] = '\0';
            *length = n;
            return -1;
        }
        out[n++] = *text;
    }
    out[n] = '\0';
    *length = n;
    return 0;
}

int buf_append_long(char *out, size_t size, size_t *length, long value)
{
    char digits[24];
    size_t i = sizeof digits;
    /* The magnitude as unsigned, so the most negative value has one too. */
    unsigned long magnitude = value < 0 ? 0UL - (unsigned long)value : (unsigned long)value;
    digits[--i] = '\0';
    do {
        digits[--i] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) {
        digits[--i] = '-';
    }
    return buf_append(out, size, length, digits + i);
}

int write_all(int fd, const char *data, size_t size)
{
    while (size > 0) {
        long n = sys_write(fd, data, size);
        if (n == -LAUNCHER_EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        data += n;
        size -= (size_t)n;
    }
    return 0;
}
