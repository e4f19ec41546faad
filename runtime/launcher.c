/* The `pynox` launcher.
 *
 * A small executable so that `pynox` starts as fast as `python` does: it finds
 * the interpreter relative to its own path (a bundle or a virtual environment
 * can move anywhere), answers --version without starting Python, and execs the
 * interpreter, either with the user's command line unchanged (--no-sandbox) or
 * in isolated mode into pynox.cli.
 *
 * Layouts it knows, relative to the directory holding the launcher:
 *   ./python3                 a virtual environment or an install prefix
 *   ../python/bin/python3     a bundle (python-build-standalone runtime)
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Runs pynox.cli from the site directory the launcher passes as argv[1], so
 * the interpreter can skip `site` (the sandboxed program never sees
 * site-packages; the supervisor needs only pynox itself). The garbage
 * collector stays off while pynox starts: its imports make no cycles, and the
 * collections they would trigger cost ~0.7 ms; pynox turns it back on.
 * pynox._boot loads pynox's hot modules from one file (see there). */
static const char BOOT_WITH_SITE_DIR[] =
    "import gc;gc.disable();import sys;sys.path.append(sys.argv.pop(1));"
    "del gc,sys;__import__('pynox._boot')._boot.main()";
static const char BOOT[] = "import gc;gc.disable();del gc;__import__('pynox._boot')._boot.main()";

static void fail(const char *what, const char *path)
{
    if (path != NULL) {
        fprintf(stderr, "pynox: %s %s: %s; reinstall pynox\n", what, path, strerror(errno));
    } else {
        fprintf(stderr, "pynox: %s: %s; reinstall pynox\n", what, strerror(errno));
    }
    exit(EXIT_SETUP_FAILURE);
}

static int join(char *out, size_t size, const char *a, const char *b)
{
    int n = snprintf(out, size, "%s/%s", a, b);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

static int is_file(const char *path)
{
    return access(path, F_OK) == 0;
}

/* The directory that holds the real launcher file (symlinks on PATH resolved). */
static void launcher_dir(char *out, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", out, size - 1);
    if (n < 0) {
        fail("cannot find its own location through", "/proc/self/exe");
    }
    if ((size_t)n >= size - 1) {
        errno = ENAMETOOLONG;
        fail("cannot find its own location through", "/proc/self/exe");
    }
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (slash == NULL || slash == out) {
        errno = ENOENT;
        fail("cannot find its own directory from", out);
    }
    *slash = '\0';
}

/* Finds the interpreter and the prefix it belongs to. */
static void find_interpreter(const char *dir, char *python, char *prefix, size_t size)
{
    if (join(python, size, dir, "python3") == 0 && is_file(python)) {
        char *slash = NULL;
        if (snprintf(prefix, size, "%s", dir) >= (int)size || (slash = strrchr(prefix, '/')) == NULL) {
            errno = ENAMETOOLONG;
            fail("cannot build a path under", dir);
        }
        *slash = '\0';
        return;
    }
    /* dir is a real path, so its parent is found by cutting its last component:
     * the interpreter's path then holds no "..", which sys.prefix would keep. */
    char parent[PATH_MAX];
    if (snprintf(parent, sizeof parent, "%s", dir) >= (int)sizeof parent) {
        errno = ENAMETOOLONG;
        fail("cannot build a path under", dir);
    }
    char *slash = strrchr(parent, '/');
    if (slash != NULL) {
        *slash = '\0';
        if (join(python, size, parent[0] != '\0' ? parent : "", "python/bin/python3") == 0
            && is_file(python)) {
            if (join(prefix, size, parent[0] != '\0' ? parent : "", "python") != 0) {
                errno = ENAMETOOLONG;
                fail("cannot build a path under", dir);
            }
            return;
        }
    }
    errno = ENOENT;
    fail("cannot find its Python interpreter next to", dir);
}

/* The CPython version: a virtual environment records it in pyvenv.cfg
 * ("version" from venv, "version_info" from uv and virtualenv); otherwise it
 * is the one the launcher was built for. */
static void python_version(const char *prefix, char *out, size_t size)
{
    char cfg[PATH_MAX];
    snprintf(out, size, "%s", PYNOX_PYTHON_VERSION);
    if (join(cfg, sizeof cfg, prefix, "pyvenv.cfg") != 0) {
        return;
    }
    FILE *file = fopen(cfg, "re");
    if (file == NULL) {
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, file) != NULL) {
        char key[64];
        int major = 0;
        int minor = 0;
        int micro = 0;
        /* "version = 3.11.7" (venv) or "version_info = 3.10.13.final.0" (virtualenv) */
        if (sscanf(line, " %63[a-z_] = %d.%d.%d", key, &major, &minor, &micro) == 4
            && (strcmp(key, "version") == 0 || strcmp(key, "version_info") == 0)) {
            snprintf(out, size, "%d.%d.%d", major, minor, micro);
            break;
        }
    }
    if (fclose(file) != 0) {
        return;
    }
}

/* `pynox --no-sandbox` names its own process (which CPython keeps, exec does
 * not change it) in PYNOX_JSON_FAST_PATH; pynox-json.pth in site-packages
 * takes the variable away before the program starts and gives json.dump its
 * fast path (pynox/json_hook.py). Nothing is set where no .pth would run to
 * take it away (-S before the program), or where the variable exists already. */
#define JSON_HOOK_VARIABLE "PYNOX_JSON_FAST_PATH"

static int python_skips_site(int argc, char **argv, int first)
{
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || arg[1] == '\0' || strcmp(arg, "--") == 0) {
            return 0;  /* the program: a script, "-" or what follows "--" */
        }
        if (arg[1] == '-') {
            if (strcmp(arg, "--check-hash-based-pycs") == 0) {
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

static void mark_for_json_hook(int argc, char **argv, int first)
{
    char pid[32];
    if (python_skips_site(argc, argv, first) || getenv(JSON_HOOK_VARIABLE) != NULL) {
        return;
    }
    int n = snprintf(pid, sizeof pid, "%ld", (long)getpid());
    if (n <= 0 || (size_t)n >= sizeof pid || setenv(JSON_HOOK_VARIABLE, pid, 1) != 0) {
        return;  /* no fast path: json.dump is simply CPython's */
    }
}

int main(int argc, char **argv)
{
    char dir[PATH_MAX];
    char python[PATH_MAX];
    char prefix[PATH_MAX];
    launcher_dir(dir, sizeof dir);
    find_interpreter(dir, python, prefix, sizeof python);

    if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        char version[64];
        python_version(prefix, version, sizeof version);
        if (printf("pynox %s (CPython %s)\n", PYNOX_VERSION, version) < 0 || fflush(stdout) != 0) {
            return 1;
        }
        return 0;
    }

    /* argv for exec: python, [options], user arguments, NULL. */
    char **args = calloc((size_t)argc + 6, sizeof *args);
    if (args == NULL) {
        fail("cannot allocate its argument list", NULL);
    }
    size_t n = 0;
    args[n++] = python;
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--no-sandbox") == 0) {
        first = 2;  /* CPython's own command line, unchanged */
        mark_for_json_hook(argc, argv, first);
    } else {
        char site_dir[PATH_MAX];
        char marker[PATH_MAX];
        int with_site_dir =
            snprintf(site_dir, sizeof site_dir, "%s/lib/python%s/site-packages", prefix,
                     PYNOX_PYTHON_MINOR) < (int)sizeof site_dir
            && join(marker, sizeof marker, site_dir, "pynox/cli.py") == 0 && is_file(marker);
        args[n++] = "-I";
        if (with_site_dir) {
            args[n++] = "-S";
            args[n++] = "-c";
            args[n++] = (char *)BOOT_WITH_SITE_DIR;
            /* Normalized, so tracebacks can tell pynox's own frames by path. */
            args[n++] = realpath(site_dir, NULL);
            if (args[n - 1] == NULL) {
                fail("cannot resolve", site_dir);
            }
        } else {
            args[n++] = "-c";
            args[n++] = (char *)BOOT;
        }
    }
    for (int i = first; i < argc; i++) {
        args[n++] = argv[i];
    }
    args[n] = NULL;
    execv(python, args);
    fail("cannot start the interpreter", python);
    return EXIT_SETUP_FAILURE;
}
