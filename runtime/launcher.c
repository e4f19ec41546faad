/* The `pynox` launcher.
 *
 * A small executable so that `pynox` starts as fast as `python` does: it finds
 * the interpreter relative to its own path (a bundle or a virtual environment
 * can move anywhere), answers --version without starting Python, and execs the
 * interpreter, either with the user's command line unchanged (--no-sandbox) or
 * in isolated mode into pynox.cli.
 *
 * It is a static executable without a C library (launcher_sys.h): exec then maps
 * one file and runs no loader, which is most of what a launcher costs.
 *
 * Layouts it knows, relative to the directory holding the launcher:
 *   ./python3                 a virtual environment or an install prefix
 *   ../python/bin/python3     a bundle (python-build-standalone runtime)
 */
#include "launcher_scratch.h"
#include "launcher_supervise.h"
#include "launcher_sys.h"

#ifndef PYNOX_VERSION
#error "PYNOX_VERSION must be defined by the build"
#endif
#ifndef PYNOX_PYTHON_VERSION
#error "PYNOX_PYTHON_VERSION must be defined by the build"
#endif
#ifndef PYNOX_PYTHON_MINOR
#error "PYNOX_PYTHON_MINOR must be defined by the build"
#endif

#define EXIT_SETUP_FAILURE 125
#define PATH_MAX LAUNCHER_PATH_MAX

/* pynox/_start.py, in the site directory, starts pynox with -I -S (see there).
 * Without that file where a virtual environment has it, the interpreter
 * finds pynox on its own path. */
#define START_FILE "pynox/_start.py"
/* Where pynox is installed, under the interpreter's prefix. */
#define SITE_PACKAGES "/lib/python" PYNOX_PYTHON_MINOR "/site-packages"
static const char BOOT[] = "import gc;gc.disable();del gc;__import__('pynox._boot')._boot.main()";

/* "pynox: WHAT [PATH]: ERROR TEXT; REMEDY", written at once, and exit 125. */
static _Noreturn void fail_with(const char *what, const char *path, long error,
                                const char *remedy)
{
    char message[PATH_MAX + 256];
    char scratch[32];
    size_t n = 0;
    buf_append(message, sizeof message, &n, "pynox: ");
    buf_append(message, sizeof message, &n, what);
    if (path != NULL) {
        buf_append(message, sizeof message, &n, " ");
        buf_append(message, sizeof message, &n, path);
    }
    buf_append(message, sizeof message, &n, ": ");
    buf_append(message, sizeof message, &n, error_text((int)error, scratch, sizeof scratch));
    buf_append(message, sizeof message, &n, "; ");
    buf_append(message, sizeof message, &n, remedy);
    buf_append(message, sizeof message, &n, "\n");
    (void)write_all(2, message, n);  /* nothing better to do if stderr is gone */
    sys_exit(EXIT_SETUP_FAILURE);
}

/* What to do where /proc is not mounted, which pynox reads to find itself and to run. */
#define PROC_REMEDY "mount proc at /proc, which pynox needs"

/* "pynox: WHAT [PATH]: ERROR TEXT; reinstall pynox", written at once, and exit 125. */
static _Noreturn void fail(const char *what, const char *path, long error)
{
    fail_with(what, path, error, "reinstall pynox");
}

/* out = text; -1 if it does not fit. */
static int copy(char *out, size_t size, const char *text)
{
    size_t n = 0;
    return buf_append(out, size, &n, text);
}

/* out = a "/" b; -1 if it does not fit. */
static int join(char *out, size_t size, const char *a, const char *b)
{
    size_t n = 0;
    return buf_append(out, size, &n, a) == 0 && buf_append(out, size, &n, "/") == 0
                   && buf_append(out, size, &n, b) == 0
               ? 0
               : -1;
}

/* Why path cannot be reached, as faccessat says (0: it can). */
static long unreachable(const char *path)
{
    long got = sys_faccessat(LAUNCHER_AT_FDCWD, path, LAUNCHER_F_OK);
    return got < 0 ? -got : 0;
}

static int is_file(const char *path)
{
    return unreachable(path) == 0;
}

/* The directory that holds the real launcher file (symlinks on PATH resolved). */
static void launcher_dir(char *out, size_t size)
{
    long n = sys_readlinkat(LAUNCHER_AT_FDCWD, "/proc/self/exe", out, size - 1);
    if (n < 0 && unreachable("/proc/self") != 0) {
        /* No /proc mounted (a chroot, a bare mount namespace): nothing to reinstall. */
        fail_with("cannot find its own location through", "/proc/self/exe", -n, PROC_REMEDY);
    }
    if (n < 0) {
        fail("cannot find its own location through", "/proc/self/exe", -n);
    }
    if ((size_t)n >= size - 1) {
        fail("cannot find its own location through", "/proc/self/exe", LAUNCHER_ENAMETOOLONG);
    }
    out[n] = '\0';
    char *slash = str_last_slash(out);
    if (slash == NULL || slash == out) {
        fail("cannot find its own directory from", out, LAUNCHER_ENOENT);
    }
    *slash = '\0';
}

/* Finds the interpreter and the prefix it belongs to. */
static void find_interpreter(const char *dir, char *python, char *prefix, size_t size)
{
    long beside = LAUNCHER_ENOENT;  /* why the interpreter beside the launcher is not there */
    if (join(python, size, dir, "python3") == 0 && (beside = unreachable(python)) == 0) {
        char *slash = NULL;
        if (copy(prefix, size, dir) != 0 || (slash = str_last_slash(prefix)) == NULL) {
            fail("cannot build a path under", dir, LAUNCHER_ENAMETOOLONG);
        }
        *slash = '\0';
        return;
    }
    /* dir is a real path, so its parent is found by cutting its last component:
     * the interpreter's path then holds no "..", which sys.prefix would keep. */
    char parent[PATH_MAX];
    if (copy(parent, sizeof parent, dir) != 0) {
        fail("cannot build a path under", dir, LAUNCHER_ENAMETOOLONG);
    }
    char *slash = str_last_slash(parent);
    if (slash != NULL) {
        *slash = '\0';
        if (join(python, size, parent, "python/bin/python3") == 0 && is_file(python)) {
            if (join(prefix, size, parent, "python") != 0) {
                fail("cannot build a path under", dir, LAUNCHER_ENAMETOOLONG);
            }
            return;
        }
    }
    if (beside != LAUNCHER_ENOENT && join(python, size, dir, "python3") == 0) {
        /* There, behind a directory this user may not enter (a virtual environment
         * made from a Python under another user's home, say). */
        fail_with("cannot reach its Python interpreter", python, beside,
                  "run pynox as a user who may, or install it with a Python this user can "
                  "run");
    }
    /* Most often a copy of the launcher, which finds its interpreter beside itself. */
    fail_with("cannot find its Python interpreter next to", dir, LAUNCHER_ENOENT,
              "link to pynox where it is installed rather than copy it, or reinstall pynox");
}

/* pyvenv.cfg's lines are read as sscanf(line, " %63[a-z_] = %d.%d.%d") would read
 * them, each from a 512-byte fgets buffer: the same file gives the same version. */
#define CFG_LINE 512
#define CFG_KEY 63

static int is_space(char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static const char *skip_space(const char *p)
{
    while (is_space(*p)) {
        p++;
    }
    return p;
}

/* %d: a sign and digits, saturated to a long as strtol does, then stored as an int. */
static const char *scan_int(const char *p, int *value)
{
    const unsigned long long_max = ~0UL >> 1;
    p = skip_space(p);
    int negative = *p == '-';
    if (*p == '-' || *p == '+') {
        p++;
    }
    if (*p < '0' || *p > '9') {
        return NULL;
    }
    unsigned long magnitude = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned long digit = (unsigned long)(*p - '0');
        magnitude = magnitude > (long_max + 1 - digit) / 10 ? long_max + 1 : magnitude * 10 + digit;
    }
    long result;
    if (negative) {
        result = magnitude > long_max ? -(long)long_max - 1 : -(long)magnitude;
    } else {
        result = magnitude > long_max ? (long)long_max : (long)magnitude;
    }
    *value = (int)result;
    return p;
}

/* Whether the line is "version = 3.11.7" (venv) or "version_info = 3.10.13.final.0"
 * (uv, virtualenv); its three numbers go into out. */
static int version_line(const char *line, int out[3])
{
    char key[CFG_KEY + 1];
    size_t k = 0;
    const char *p = skip_space(line);
    while (k < CFG_KEY && ((*p >= 'a' && *p <= 'z') || *p == '_')) {
        key[k++] = *p++;
    }
    key[k] = '\0';
    p = skip_space(p);
    if (k == 0 || *p != '=') {
        return 0;
    }
    p++;
    for (int i = 0; i < 3; i++) {
        if (i > 0 && *p++ != '.') {
            return 0;
        }
        if ((p = scan_int(p, &out[i])) == NULL) {
            return 0;
        }
    }
    return str_equal(key, "version") || str_equal(key, "version_info");
}

/* The first version line of the file, or 0 if it has none or cannot be read. */
static int read_version(const char *cfg, int numbers[3])
{
    long fd = sys_openat(LAUNCHER_AT_FDCWD, cfg, LAUNCHER_O_RDONLY | LAUNCHER_O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    char chunk[4096];
    char line[CFG_LINE];
    size_t used = 0;
    int found = 0;
    while (!found) {
        long got = sys_read((int)fd, chunk, sizeof chunk);
        if (got == -LAUNCHER_EINTR) {
            continue;
        }
        if (got <= 0) {
            /* At the end, a last line without a newline still counts; after a read
             * error the partial line does not (fgets returns NULL then). */
            if (got == 0 && used > 0) {
                line[used] = '\0';
                found = version_line(line, numbers);
            }
            break;
        }
        for (long i = 0; i < got && !found; i++) {
            line[used++] = chunk[i];
            if (chunk[i] == '\n' || used == CFG_LINE - 1) {
                line[used] = '\0';
                found = version_line(line, numbers);
                used = 0;
            }
        }
    }
    (void)sys_close((int)fd);  /* read-only: nothing is lost if close fails */
    return found;
}

/* The CPython version: a virtual environment records it in pyvenv.cfg
 * ("version" from venv, "version_info" from uv and virtualenv); otherwise it
 * is the one the launcher was built for. */
static void python_version(const char *prefix, char *out, size_t size)
{
    char cfg[PATH_MAX];
    int numbers[3];
    size_t n = 0;
    buf_append(out, size, &n, PYNOX_PYTHON_VERSION);
    if (join(cfg, sizeof cfg, prefix, "pyvenv.cfg") != 0 || !read_version(cfg, numbers)) {
        return;
    }
    n = 0;
    for (int i = 0; i < 3; i++) {
        if (i > 0) {
            buf_append(out, size, &n, ".");
        }
        buf_append_long(out, size, &n, numbers[i]);
    }
}

static int print_version(const char *prefix)
{
    char version[64];
    char line[160];
    size_t n = 0;
    python_version(prefix, version, sizeof version);
    buf_append(line, sizeof line, &n, "pynox " PYNOX_VERSION " (CPython ");
    buf_append(line, sizeof line, &n, version);
    buf_append(line, sizeof line, &n, ")\n");
    return write_all(1, line, n) == 0 ? 0 : 1;
}

/* `pynox --no-sandbox` names its own process (which CPython keeps, exec does
 * not change it) in PYNOX_JSON_FAST_PATH; pynox-json.pth in site-packages
 * takes the variable away before the program starts and gives json.dump its
 * fast path (sitehook/_pynox_json.py). Only a bundle has that file (a .pth in a
 * site-packages that other programs share would cost each of their starts).
 * Nothing is set where no .pth would run to take it away (no such file, or -S
 * before the program), or where the variable exists already. */
#define JSON_HOOK_VARIABLE "PYNOX_JSON_FAST_PATH"
#define JSON_HOOK_FILE "pynox-json.pth"

static int python_skips_site(int argc, char **argv, int first)
{
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || arg[1] == '\0' || str_equal(arg, "--")) {
            return 0;  /* the program: a script, "-" or what follows "--" */
        }
        if (arg[1] == '-') {
            if (str_equal(arg, "--check-hash-based-pycs")) {
                i++;
            }
            continue;
        }
        for (const char *flag = arg + 1; *flag != '\0'; flag++) {
            if (*flag == 'c' || *flag == 'm') {
                return 0;
            }
            if (*flag == 'S') {
                return 1;
            }
            if (*flag == 'W' || *flag == 'X') {
                if (flag[1] == '\0') {
                    i++;  /* its value is the next argument */
                }
                break;
            }
        }
    }
    return 0;
}

/* The value of the environment's first entry for name (as getenv), or NULL. */
static const char *variable_value(char **envp, const char *name)
{
    for (; *envp != NULL; envp++) {
        const char *entry = *envp;
        const char *want = name;
        while (*want != '\0' && *entry == *want) {
            entry++;
            want++;
        }
        if (*want == '\0' && *entry == '=') {
            return entry + 1;
        }
    }
    return NULL;
}

static int json_hook_installed(const char *prefix)
{
    char path[PATH_MAX];
    size_t n = 0;
    return buf_append(path, sizeof path, &n, prefix) == 0
           && buf_append(path, sizeof path, &n, SITE_PACKAGES "/" JSON_HOOK_FILE) == 0
           && is_file(path);
}

/* Writes "PYNOX_JSON_FAST_PATH=<pid>" into entry if the environment should get it. */
static int json_hook_entry(int argc, char **argv, int first, char **envp, const char *prefix,
                           char *entry, size_t size)
{
    if (python_skips_site(argc, argv, first) || variable_value(envp, JSON_HOOK_VARIABLE) != NULL
        || !json_hook_installed(prefix)) {
        return 0;
    }
    long pid = sys_getpid();
    size_t n = 0;
    return pid > 0 && buf_append(entry, size, &n, JSON_HOOK_VARIABLE "=") == 0
           && buf_append_long(entry, size, &n, pid) == 0;
}

/* realpath(path) of a directory: the kernel's name for it, read back through /proc.
 * Returns its length. */
static size_t resolve_directory(const char *path, char *out, size_t size)
{
    long fd = sys_openat(LAUNCHER_AT_FDCWD, path,
                         LAUNCHER_O_PATH | LAUNCHER_O_DIRECTORY | LAUNCHER_O_CLOEXEC);
    if (fd < 0) {
        fail("cannot resolve", path, -fd);
    }
    char link[48];
    size_t n = 0;
    buf_append(link, sizeof link, &n, "/proc/self/fd/");
    buf_append_long(link, sizeof link, &n, fd);
    long got = sys_readlinkat(LAUNCHER_AT_FDCWD, link, out, size);
    (void)sys_close((int)fd);  /* an O_PATH descriptor: close cannot lose anything */
    if (got < 0) {
        fail("cannot resolve", path, -got);
    }
    if ((size_t)got >= size) {
        fail("cannot resolve", path, LAUNCHER_ENAMETOOLONG);
    }
    out[got] = '\0';
    if (out[0] != '/') {
        fail("cannot resolve", path, LAUNCHER_ENOENT);  /* e.g. "(unreachable)/..." */
    }
    return (size_t)got;
}

/* Whether the command runs a program (which gets a scratch directory), rather than
 * `pynox pool`, `pynox doctor` or the help. */
static int runs_a_program(int argc, char **argv)
{
    if (argc < 2) {
        return 1;  /* the program comes on standard input */
    }
    const char *first = argv[1];
    return !(str_equal(first, "pool") || str_equal(first, "doctor") || str_equal(first, "--help")
             || str_equal(first, "-h") || str_equal(first, "-?"));
}

/* Whether --json is among the arguments: then the launcher makes the pipes to capture
 * the run's output, which pynox uses if --json is its flag (and not the program's). */
static int asks_for_json(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (str_equal(argv[i], "--json")) {
            return 1;
        }
    }
    return 0;
}

int launcher_main(int argc, char **argv, char **envp)
{
    char dir[PATH_MAX];
    char python[PATH_MAX];
    char prefix[PATH_MAX];
    launcher_dir(dir, sizeof dir);
    find_interpreter(dir, python, prefix, sizeof python);

    if (argc == 2 && (str_equal(argv[1], "--version") || str_equal(argv[1], "-V"))) {
        return print_version(prefix);
    }

    /* argv for exec: python, [options], user arguments, NULL. */
    char *args[(size_t)argc + 6];
    char site_dir[PATH_MAX];
    char resolved[PATH_MAX];
    char json_hook[sizeof JSON_HOOK_VARIABLE + 24];
    struct supervision supervision;
    char *extra[4];  /* entries added to the environment */
    size_t extras = 0;
    size_t n = 0;
    args[n++] = python;
    int first = 1;
    if (argc > 1 && str_equal(argv[1], "--no-sandbox")) {
        first = 2;  /* CPython's own command line, unchanged */
        if (json_hook_entry(argc, argv, first, envp, prefix, json_hook, sizeof json_hook)) {
            extra[extras++] = json_hook;
        }
    } else {
        if (runs_a_program(argc, argv)) {
            /* This process stays behind as the run's supervisor, and starts the
             * scratch directory's helper; the interpreter starts in a child
             * (launcher_supervise.c, launcher_scratch.c). */
            if (supervise(&supervision, asks_for_json(argc, argv),
                          variable_value(envp, "TMPDIR"))) {
                extra[extras++] = supervision.supervisor_entry;
                if (supervision.helper) {
                    extra[extras++] = supervision.helper_entry;
                }
                if (supervision.capture) {
                    extra[extras++] = supervision.capture_entry;
                }
            }
        }
        char marker[PATH_MAX];
        size_t length = 0;
        int with_site_dir =
            buf_append(site_dir, sizeof site_dir, &length, prefix) == 0
            && buf_append(site_dir, sizeof site_dir, &length, SITE_PACKAGES) == 0
            && join(marker, sizeof marker, site_dir, START_FILE) == 0 && is_file(marker);
        args[n++] = "-I";
        if (with_site_dir) {
            args[n++] = "-S";
            /* Normalized, so tracebacks can tell pynox's own frames by path. */
            size_t end = resolve_directory(site_dir, resolved, sizeof resolved);
            if (buf_append(resolved, sizeof resolved, &end, "/" START_FILE) != 0) {
                fail("cannot build a path under", resolved, LAUNCHER_ENAMETOOLONG);
            }
            args[n++] = resolved;
        } else {
            args[n++] = "-c";
            args[n++] = (char *)BOOT;
        }
    }
    for (int i = first; i < argc; i++) {
        args[n++] = argv[i];
    }
    args[n] = NULL;

    /* The environment, with the extra entries added at its end. */
    size_t envc = 0;
    while (extras > 0 && envp[envc] != NULL) {
        envc++;
    }
    char *marked[extras > 0 ? envc + extras + 1 : 1];
    if (extras > 0) {
        for (size_t i = 0; i < envc; i++) {
            marked[i] = envp[i];
        }
        for (size_t i = 0; i < extras; i++) {
            marked[envc + i] = extra[i];
        }
        marked[envc + extras] = NULL;
        envp = marked;
    }
    long error = sys_execve(python, args, envp);
    if (-error == LAUNCHER_E2BIG) {
        /* The caller's command line fitted, but not with what pynox adds to it. */
        static const char too_long[] =
            "pynox: the command line and environment are too long to start the interpreter "
            "with the few arguments pynox adds; pass less (a file of arguments, say)\n";
        (void)write_all(2, too_long, sizeof too_long - 1);
        sys_exit(EXIT_SETUP_FAILURE);
    }
    fail("cannot start the interpreter", python, -error);
}
