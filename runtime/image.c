/* What a run's start asks of the file system: map_file(), the start-up image
 * (pynox._boot), mapped rather than read; file_sizes(), the check of its modules' sources;
 * real_path(), os.path.realpath without importing os (pynox.lean_os).
 *
 * Every sandboxed run loads the image, some 200 KiB, before anything else. Read into
 * the heap, its bytes land in pages the process has never touched: the kernel zeroes
 * each and the copy faults on each, about 0.2 ms of a run on a virtual machine. Mapped,
 * the process uses the page cache's own pages, a few faults for many of them at once.
 *
 * The mapping stays for the life of the process (and of the processes forked from it,
 * a pool's zygote and children): the image's modules are unpacked from it when they are
 * first imported. Private and read-only: nothing written to the file after it was
 * mapped reaches the process by way of it, unless the file is cut short, which the
 * build never does (it writes a new file). */
#include "native.h" /* Python.h first, as CPython asks */

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

static PyObject *map_file(PyObject *module, PyObject *arg)
{
    (void)module;
    long fd = PyLong_AsLong(arg);
    if (fd == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (fd < 0 || fd > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "map_file() takes a file descriptor");
        return NULL;
    }
    struct stat status;
    if (fstat((int)fd, &status) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (!S_ISREG(status.st_mode) || status.st_size <= 0
        || (unsigned long long)status.st_size > (unsigned long long)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_ValueError, "map_file() maps a regular file that is not empty");
        return NULL;
    }
    size_t size = (size_t)status.st_size;
    void *start = mmap(NULL, size, PROT_READ, MAP_PRIVATE, (int)fd, 0);
    if (start == MAP_FAILED) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    PyObject *view = PyMemoryView_FromMemory(start, (Py_ssize_t)size, PyBUF_READ);
    if (view == NULL) {
        /* Nothing holds the mapping yet; munmap fails only for a range that is no
         * mapping's, which this one is. */
        (void)munmap(start, size);
    }
    return view;
}

/* The size of each file of a tuple of paths, -1 for one that cannot be stat()ed: the image
 * checks the sources of a group of modules at once (pynox._boot), where os.stat() would
 * build a stat_result for each, more than the system call itself costs. */
static PyObject *file_sizes(PyObject *module, PyObject *paths)
{
    (void)module;
    if (!PyTuple_Check(paths)) {
        PyErr_SetString(PyExc_TypeError, "file_sizes() takes a tuple of paths");
        return NULL;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(paths);
    PyObject *sizes = PyTuple_New(count);
    if (sizes == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *encoded = NULL;
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(paths, i), &encoded)) {
            Py_DECREF(sizes);
            return NULL;
        }
        struct stat status;
        long long size = -1;
        if (stat(PyBytes_AS_STRING(encoded), &status) == 0) {
            size = (long long)status.st_size;
        }
        Py_DECREF(encoded);
        PyObject *item = PyLong_FromLongLong(size);
        if (item == NULL) {
            Py_DECREF(sizes);
            return NULL;
        }
        PyTuple_SET_ITEM(sizes, i, item);
    }
    return sizes;
}

/* The path with every link resolved, by realpath(3); None where that fails (a missing
 * part, a loop of links, no permission), which os.path.realpath then resolves as far as
 * it can, as it documents. */
static PyObject *real_path(PyObject *module, PyObject *path)
{
    (void)module;
    if (!PyUnicode_Check(path)) {
        PyErr_SetString(PyExc_TypeError, "real_path() takes a str");
        return NULL;
    }
    PyObject *encoded = NULL;
    if (!PyUnicode_FSConverter(path, &encoded)) {
        return NULL;
    }
    char *resolved = realpath(PyBytes_AS_STRING(encoded), NULL);
    int error = errno;
    Py_DECREF(encoded);
    if (resolved == NULL) {
        if (error == ENOMEM) {
            return PyErr_NoMemory();
        }
        Py_RETURN_NONE;
    }
    PyObject *decoded = PyUnicode_DecodeFSDefault(resolved);
    free(resolved);
    return decoded;
}

PyMethodDef pynox_image_methods[] = {
    {"map_file", map_file, METH_O,
     "map_file(fd: int) -> memoryview\n\n"
     "A regular file's bytes, mapped read-only for the life of the process."},
    {"file_sizes", file_sizes, METH_O,
     "file_sizes(paths: tuple[str, ...]) -> tuple[int, ...]\n\n"
     "Each file's size, or -1 where it cannot be found."},
    {"real_path", real_path, METH_O,
     "real_path(path: str) -> str | None\n\n"
     "The path with every link resolved, or None where realpath(3) fails."},
    {NULL, NULL, 0, NULL},
};
