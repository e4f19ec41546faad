/* The access log's gate (part of pynox._native).
 *
 * A hook added with sys.addaudithook is a Python call for every audit event
 * the program raises, `id()`, `sys._getframe()` and each object copy.deepcopy
 * looks at among them: about ten times the cost of `id()` itself (copy.deepcopy
 * took twice as long as under python), and one frame more on the stack, so
 * that at the recursion limit such a call raised RecursionError where python
 * raised none. gate_audit() adds one C hook instead, which hands only the
 * events the access log watches to it, as CPython hands any event to a Python
 * hook (tracing off), with room above the program's recursion limits for the
 * log's own frames.
 */
#include "native.h"

#include <stdlib.h>
#include <string.h>

/* Room for the access log's few frames, as much as CPython gives a RecursionError's
 * handling above the limit. */
#define GATE_HEADROOM 50

static PyObject *gate_hook;   /* the access log, NULL until gate_audit() */
/* The interpreter the log belongs to. CPython calls a C hook for the events of every
 * interpreter, a Python hook only for its own: a subinterpreter's thread must not touch
 * the log (from 3.12 on it runs under a GIL of its own). */
static PyInterpreterState *gate_interpreter;
static char **gate_events;    /* the event names it watches, sorted */
static size_t gate_event_count;
static int gate_added;        /* whether the C hook is in CPython's list (never removed) */

static int compare_names(const void *left, const void *right)
{
    return strcmp(*(char *const *)left, *(char *const *)right);
}

static void free_events(char **events, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        free(events[i]);
    }
    free(events);
}

/* What remains of the thread's recursion budgets, moved by `amount`. */
static void move_headroom(PyThreadState *tstate, int amount)
{
#if PY_VERSION_HEX >= 0x030C0000
    tstate->py_recursion_remaining += amount;
#if PY_VERSION_HEX < 0x030E0000
    tstate->c_recursion_remaining += amount;
#endif
#elif PY_VERSION_HEX >= 0x030B0000
    tstate->recursion_remaining += amount;
#else
    tstate->recursion_depth -= amount;
#endif
}

static void enter_tracing(PyThreadState *tstate)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyThreadState_EnterTracing(tstate);
#else
    tstate->tracing++;
    tstate->cframe->use_tracing = 0;
#endif
}

static void leave_tracing(PyThreadState *tstate)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyThreadState_LeaveTracing(tstate);
#else
    tstate->tracing--;
    tstate->cframe->use_tracing =
        tstate->tracing == 0 && (tstate->c_tracefunc != NULL || tstate->c_profilefunc != NULL);
#endif
}

static PyThreadState *current_thread(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyThreadState_GetUnchecked();
#else
    return _PyThreadState_UncheckedGet();
#endif
}

static int gate(const char *event, PyObject *args, void *data)
{
    (void)data;
    if (gate_hook == NULL
        || bsearch(&event, gate_events, gate_event_count, sizeof *gate_events, compare_names)
               == NULL) {
        return 0;
    }
    PyThreadState *tstate = current_thread();
    if (tstate == NULL || PyThreadState_GetInterpreter(tstate) != gate_interpreter) {
        return 0;
    }
    PyObject *hook = gate_hook;
    Py_INCREF(hook); /* the log may be replaced while it runs */
    enter_tracing(tstate);
    move_headroom(tstate, GATE_HEADROOM);
    PyObject *result = PyObject_CallFunction(hook, "sO", event, args);
    move_headroom(tstate, -GATE_HEADROOM);
    leave_tracing(tstate);
    Py_DECREF(hook);
    if (result == NULL) {
        return -1;
    }
    Py_DECREF(result);
    return 0;
}

/* The names of `events`, an iterable of str, copied and sorted; NULL with an exception
 * set on failure. */
static char **copy_events(PyObject *events, size_t *count)
{
    PyObject *list = PySequence_List(events);
    if (list == NULL) {
        return NULL;
    }
    Py_ssize_t size = PyList_GET_SIZE(list);
    char **names = calloc((size_t)size + 1, sizeof *names);
    if (names == NULL) {
        Py_DECREF(list);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        const char *name = PyUnicode_AsUTF8(PyList_GET_ITEM(list, i));
        names[i] = name == NULL ? NULL : strdup(name);
        if (names[i] == NULL) {
            if (name != NULL) {
                PyErr_NoMemory();
            }
            free_events(names, (size_t)i);
            Py_DECREF(list);
            return NULL;
        }
    }
    Py_DECREF(list);
    qsort(names, (size_t)size, sizeof *names, compare_names);
    *count = (size_t)size;
    return names;
}

static PyObject *gate_audit(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *hook;
    PyObject *events;
    if (!PyArg_ParseTuple(args, "OO:gate_audit", &hook, &events)) {
        return NULL;
    }
    if (!PyCallable_Check(hook)) {
        PyErr_SetString(PyExc_TypeError, "gate_audit() needs a callable hook");
        return NULL;
    }
    size_t count = 0;
    char **names = copy_events(events, &count);
    if (names == NULL) {
        return NULL;
    }
    if (!gate_added) {
        if (PySys_AddAuditHook(gate, NULL) != 0) {
            free_events(names, count);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "the audit hook could not be added");
            }
            return NULL;
        }
        gate_added = 1;
    }
    /* Set the hook aside while the names change: nothing runs in between (the GIL). */
    PyObject *old_hook = gate_hook;
    gate_hook = NULL;
    free_events(gate_events, gate_event_count);
    gate_events = names;
    gate_event_count = count;
    Py_INCREF(hook);
    gate_interpreter = PyInterpreterState_Get();
    gate_hook = hook;
    Py_XDECREF(old_hook);
    Py_RETURN_NONE;
}

PyMethodDef pynox_audit_gate_methods[] = {
    {"gate_audit", gate_audit, METH_VARARGS,
     "gate_audit(hook, events) -> None\n\n"
     "Calls hook(event, args) for the audit events named in events only."},
    {NULL, NULL, 0, NULL},
};
