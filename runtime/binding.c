/* The calls of the sandbox core that a run makes (part of pynox._native), for
 * pynox.engine.sandbox.
 *
 * pynox._core binds every function of the core through cffi, for the tests and
 * `pynox doctor`. A run makes only these few calls, and loading cffi's backend on
 * top of _core took about 1.5 ms of every command's start-up; a plain extension
 * function costs nothing to find.
 *
 * A policy crosses as a tuple, in the order of struct pynox_policy:
 *   (read_paths, write_paths, keep_fds, allow_network, memory_bytes, max_file_size,
 *    new_session, own_group, parent_pid, paths_resolved, scratch_path)
 * with the paths lists of bytes, keep_fds a list of ints and scratch_path bytes
 * or None. The core reads the
 * paths from the bytes objects themselves, which the tuple holds while the call
 * lasts. A call returns None, or the core's reason (a str) when it failed:
 * pynox.engine.sandbox raises SandboxError with it.
 */
#include <limits.h>
#include <string.h>

#include "native.h"
#include "sandbox.h"

#define REASON_SIZE 512

/* A struct pynox_policy and the arrays it points into (PyMem, freed by policy_free). */
struct policy_arrays {
    struct pynox_policy policy;
    const char **paths;
    int *fds;
};

static void policy_free(struct policy_arrays *arrays)
{
    PyMem_Free(arrays->paths);
    PyMem_Free(arrays->fds);
    arrays->paths = NULL;
    arrays->fds = NULL;
}

/* out[i] = the bytes of list[i]; -1 with an exception for anything but bytes
 * without a NUL byte. */
static int path_array(PyObject *list, const char **out)
{
    Py_ssize_t count = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "a policy's paths must be bytes");
            return -1;
        }
        const char *path = PyBytes_AS_STRING(item);
        if ((size_t)PyBytes_GET_SIZE(item) != strlen(path)) {
            PyErr_SetString(PyExc_ValueError, "a policy's path holds a NUL byte");
            return -1;
        }
        out[i] = path;
    }
    return 0;
}

static int fd_array(PyObject *list, int *out)
{
    Py_ssize_t count = PyList_GET_SIZE(list);
    for (Py_ssize_t i = 0; i < count; i++) {
        long fd = PyLong_AsLong(PyList_GET_ITEM(list, i));
        if (fd == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (fd < 0 || fd > INT_MAX) {
            PyErr_SetString(PyExc_ValueError, "a descriptor to keep is out of range");
            return -1;
        }
        out[i] = (int)fd;
    }
    return 0;
}

/* Fills arrays from a policy tuple; 0, or -1 with an exception (nothing to free). */
static int policy_from(PyObject *tuple, struct policy_arrays *arrays)
{
    PyObject *reads;
    PyObject *writes;
    PyObject *fds;
    PyObject *scratch;
    struct pynox_policy *policy = &arrays->policy;
    memset(arrays, 0, sizeof *arrays);
    if (!PyTuple_Check(tuple)) {
        PyErr_SetString(PyExc_TypeError, "a policy must be a tuple");
        return -1;
    }
    if (!PyArg_ParseTuple(tuple, "O!O!O!iLLiiiiO:policy", &PyList_Type, &reads, &PyList_Type,
                          &writes, &PyList_Type, &fds, &policy->allow_network,
                          &policy->memory_bytes, &policy->max_file_size, &policy->new_session,
                          &policy->own_group, &policy->parent_pid, &policy->paths_resolved, &scratch)) {
        return -1;
    }
    if (scratch != Py_None && !PyBytes_Check(scratch)) {
        PyErr_SetString(PyExc_TypeError, "a policy's scratch path must be bytes or None");
        return -1;
    }
    policy->scratch_path = scratch == Py_None ? NULL : PyBytes_AS_STRING(scratch);
    size_t read_count = (size_t)PyList_GET_SIZE(reads);
    size_t write_count = (size_t)PyList_GET_SIZE(writes);
    size_t fd_count = (size_t)PyList_GET_SIZE(fds);
    /* One more than needed: PyMem_Malloc(0) may return NULL. */
    arrays->paths = PyMem_Malloc((read_count + write_count + 1) * sizeof *arrays->paths);
    arrays->fds = PyMem_Malloc((fd_count + 1) * sizeof *arrays->fds);
    if (arrays->paths == NULL || arrays->fds == NULL) {
        policy_free(arrays);
        PyErr_NoMemory();
        return -1;
    }
    if (path_array(reads, arrays->paths) != 0
        || path_array(writes, arrays->paths + read_count) != 0
        || fd_array(fds, arrays->fds) != 0) {
        policy_free(arrays);
        return -1;
    }
    policy->read_paths = arrays->paths;
    policy->read_count = read_count;
    policy->write_paths = arrays->paths + read_count;
    policy->write_count = write_count;
    policy->keep_fds = arrays->fds;
    policy->keep_fd_count = fd_count;
    return 0;
}

/* Both policies of a call, or -1 with an exception and nothing to free. */
static int policies_from(PyObject *base_tuple, PyObject *own_tuple, struct policy_arrays *base,
                         struct policy_arrays *own)
{
    if (policy_from(base_tuple, base) != 0) {
        return -1;
    }
    if (policy_from(own_tuple, own) != 0) {
        policy_free(base);
        return -1;
    }
    return 0;
}

/* None for rc 0, else the reason as a str. */
static PyObject *outcome(int rc, const char *reason)
{
    if (rc == 0) {
        Py_RETURN_NONE;
    }
    return PyUnicode_DecodeUTF8(reason, (Py_ssize_t)strlen(reason), "replace");
}

/* A bytearray the size of struct pynox_prepared, or NULL with an exception. */
static char *prepared_buffer(PyObject *state)
{
    if (!PyByteArray_Check(state)
        || (size_t)PyByteArray_GET_SIZE(state) != sizeof(struct pynox_prepared)) {
        PyErr_SetString(PyExc_TypeError, "the prepared state must be a bytearray(PREPARED_SIZE)");
        return NULL;
    }
    return PyByteArray_AS_STRING(state);
}

static PyObject *apply(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *base_tuple;
    PyObject *own_tuple;
    if (!PyArg_ParseTuple(args, "OO:apply", &base_tuple, &own_tuple)) {
        return NULL;
    }
    struct policy_arrays base;
    struct policy_arrays own;
    if (policies_from(base_tuple, own_tuple, &base, &own) != 0) {
        return NULL;
    }
    char reason[REASON_SIZE] = "";
    int rc = pynox_sandbox_apply(&base.policy, &own.policy, reason, sizeof reason);
    policy_free(&base);
    policy_free(&own);
    return outcome(rc, reason);
}

static PyObject *prepare(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *base_tuple;
    PyObject *state;
    if (!PyArg_ParseTuple(args, "OO:prepare", &base_tuple, &state)) {
        return NULL;
    }
    char *buffer = prepared_buffer(state);
    struct policy_arrays base;
    if (buffer == NULL || policy_from(base_tuple, &base) != 0) {
        return NULL;
    }
    /* Through a copy: a bytearray's bytes carry no alignment promise. */
    struct pynox_prepared prepared;
    memset(&prepared, 0, sizeof prepared);
    char reason[REASON_SIZE] = "";
    int rc = pynox_sandbox_prepare(&base.policy, &prepared, reason, sizeof reason);
    memcpy(buffer, &prepared, sizeof prepared);
    policy_free(&base);
    return outcome(rc, reason);
}

static PyObject *finish(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *state;
    PyObject *base_tuple;
    PyObject *own_tuple;
    if (!PyArg_ParseTuple(args, "OOO:finish", &state, &base_tuple, &own_tuple)) {
        return NULL;
    }
    char *buffer = prepared_buffer(state);
    struct policy_arrays base;
    struct policy_arrays own;
    if (buffer == NULL || policies_from(base_tuple, own_tuple, &base, &own) != 0) {
        return NULL;
    }
    struct pynox_prepared prepared;
    memcpy(&prepared, buffer, sizeof prepared);
    char reason[REASON_SIZE] = "";
    int rc = pynox_sandbox_finish(&prepared, &base.policy, &own.policy, reason, sizeof reason);
    memcpy(buffer, &prepared, sizeof prepared);
    policy_free(&base);
    policy_free(&own);
    return outcome(rc, reason);
}

/* A call of the core that takes nothing but the room for its reason. */
static PyObject *reason_of(int (*call)(char *err, size_t err_len))
{
    char reason[REASON_SIZE] = "";
    int rc = call(reason, sizeof reason);
    return outcome(rc, reason);
}

static PyObject *share_filter(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return reason_of(pynox_sandbox_share_filter);
}

static PyObject *scrub_environment_block(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return reason_of(pynox_scrub_environment_block);
}

/* For tests: the limit lives in this module's copy of the sandbox core, the one
 * apply(), prepare() and finish() use (pynox._core links a copy of its own). */
static PyObject *limit_landlock_abi(PyObject *module, PyObject *args)
{
    (void)module;
    int abi = 0;
    if (!PyArg_ParseTuple(args, "i:limit_landlock_abi", &abi)) {
        return NULL;
    }
    return PyLong_FromLong(pynox_limit_landlock_abi(abi));
}

static PyObject *wipe(PyObject *module, PyObject *value)
{
    (void)module;
    if (!PyBytes_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "wipe() takes bytes");
        return NULL;
    }
    memset(PyBytes_AS_STRING(value), 0, (size_t)PyBytes_GET_SIZE(value));
    Py_RETURN_NONE;
}

static PyObject *lowest_limit(PyObject *module, PyObject *args)
{
    (void)module;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) {
        return NULL;
    }
    enum pynox_limit which;
    if (strcmp(name, "memory") == 0) {
        which = PYNOX_LIMIT_MEMORY;
    } else if (strcmp(name, "max_file_size") == 0) {
        which = PYNOX_LIMIT_FILE_SIZE;
    } else {
        return PyErr_Format(PyExc_ValueError, "no limit named %s", name);
    }
    unsigned long long bytes;
    if (pynox_lowest_limit(which, &bytes) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (bytes == ULLONG_MAX) {
        Py_RETURN_NONE;
    }
    return PyLong_FromUnsignedLongLong(bytes);
}

PyMethodDef pynox_binding_methods[] = {
    {"apply", apply, METH_VARARGS,
     "apply(base, policy) -> str | None\n\n"
     "pynox_sandbox_apply(): confine this process for good; the reason if it cannot."},
    {"prepare", prepare, METH_VARARGS,
     "prepare(base, state: bytearray) -> str | None\n\n"
     "pynox_sandbox_prepare(): the half of a confinement no program's policy changes."},
    {"finish", finish, METH_VARARGS,
     "finish(state, base, policy) -> str | None\n\n"
     "pynox_sandbox_finish(): the program's own policy, on top of a prepared state."},
    {"limit_landlock_abi", limit_landlock_abi, METH_VARARGS,
     "limit_landlock_abi(abi) -> int\n\n"
     "pynox_limit_landlock_abi(), for tests: confine as a kernel with at most this "
     "Landlock ABI would; returns the ABI now in effect."},
    {"share_filter", share_filter, METH_NOARGS,
     "share_filter() -> str | None\n\n"
     "pynox_sandbox_share_filter(): for a pool's zygote, the seccomp filter's shared part."},
    {"scrub_environment_block", scrub_environment_block, METH_NOARGS,
     "scrub_environment_block() -> str | None\n\n"
     "Overwrite the environment block the kernel placed on this process's stack."},
    {"lowest_limit", lowest_limit, METH_VARARGS,
     "lowest_limit(name) -> int | None\n\n"
     "pynox_lowest_limit(): the lowest finite (soft) limit among those the run's "
     "`memory` or `max_file_size` sets, in bytes; None when none is finite."},
    {"wipe", wipe, METH_O,
     "wipe(value: bytes) -> None\n\n"
     "Overwrite a bytes object's contents with zero bytes: only for one about to go."},
    {NULL, NULL, 0, NULL},
};

int pynox_binding_add_constants(PyObject *module)
{
    return PyModule_AddIntConstant(module, "PREPARED_SIZE", (long)sizeof(struct pynox_prepared));
}
