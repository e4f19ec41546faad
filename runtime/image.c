/* map_file(): the start-up image (pynox._boot), mapped rather than read.
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

#include <limits.h>
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

PyMethodDef pynox_image_methods[] = {
    {"map_file", map_file, METH_O,
     "map_file(fd: int) -> memoryview\n\n"
     "A regular file's bytes, mapped read-only for the life of the process."},
    {NULL, NULL, 0, NULL},
};
