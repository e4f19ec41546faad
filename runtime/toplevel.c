/* Run a program the way `python script.py` runs it (part of pynox._native).
 *
 * Two things a Python-level runner cannot do:
 *
 * - compile_source(): the builtin compile() first asks whether its argument is
 *   an ast.AST, which builds every Python AST class on the first call of a
 *   process (about 1.8 ms measured here, a tenth of a `python -I` start).
 *   Running a script never pays that; this calls the compiler directly, with
 *   the flags compile(source, filename, "exec", dont_inherit=True) would use.
 *
 * - exec_at_top(): the program's module frame must be the bottom of the stack,
 *   as under `python`: no caller for sys._getframe(1), inspect.stack(),
 *   traceback.print_stack() or warnings' stacklevel, and the whole recursion
 *   limit for the program. This runs the code object with the thread's frame
 *   chain and recursion count set as they are when CPython starts a script,
 *   and puts both back afterwards. The fields are CPython's per-version
 *   thread state, hence the version branches.
 */
#include "native.h"

static PyObject *compile_source(PyObject *module, PyObject *args)
{
    (void)module;
    const char *source;
    Py_ssize_t length;
    PyObject *filename;
    int from_text = 0;
    if (!PyArg_ParseTuple(args, "y#U|p:compile_source", &source, &length, &filename,
                          &from_text)) {
        return NULL;
    }
    if ((size_t)length != strlen(source)) {
        PyErr_SetString(PyExc_SyntaxError, "source code string cannot contain null bytes");
        return NULL;
    }
    PyCompilerFlags flags = _PyCompilerFlags_INIT;
    if (from_text) {
        /* Source that was text already: UTF-8 now, and a coding cookie no longer applies. */
        flags.cf_flags |= PyCF_IGNORE_COOKIE;
    }
    return Py_CompileStringObject(source, filename, Py_file_input, &flags, -1);
}

/* The thread's view of "where are we": saved, cleared, restored. */
struct stack_state {
    void *frame;
    int recursion;
};

static void enter_top(PyThreadState *tstate, struct stack_state *saved)
{
#if PY_VERSION_HEX >= 0x030D0000
    saved->frame = tstate->current_frame;
    saved->recursion = tstate->py_recursion_remaining;
    tstate->current_frame = NULL;
    tstate->py_recursion_remaining = tstate->py_recursion_limit;
#elif PY_VERSION_HEX >= 0x030C0000
    saved->frame = tstate->cframe->current_frame;
    saved->recursion = tstate->py_recursion_remaining;
    tstate->cframe->current_frame = NULL;
    tstate->py_recursion_remaining = tstate->py_recursion_limit;
#elif PY_VERSION_HEX >= 0x030B0000
    saved->frame = tstate->cframe->current_frame;
    saved->recursion = tstate->recursion_remaining;
    tstate->cframe->current_frame = NULL;
    tstate->recursion_remaining = tstate->recursion_limit;
#else
    saved->frame = tstate->frame;
    saved->recursion = tstate->recursion_depth;
    tstate->frame = NULL;
    tstate->recursion_depth = 0;
#endif
}

static void leave_top(PyThreadState *tstate, const struct stack_state *saved, int limit_before)
{
    /* A program that changed the recursion limit changed what remains by as much. */
    int limit_change = Py_GetRecursionLimit() - limit_before;
#if PY_VERSION_HEX >= 0x030D0000
    tstate->current_frame = saved->frame;
    tstate->py_recursion_remaining = saved->recursion + limit_change;
#elif PY_VERSION_HEX >= 0x030C0000
    tstate->cframe->current_frame = saved->frame;
    tstate->py_recursion_remaining = saved->recursion + limit_change;
#elif PY_VERSION_HEX >= 0x030B0000
    tstate->cframe->current_frame = saved->frame;
    tstate->recursion_remaining = saved->recursion + limit_change;
#else
    (void)limit_change;
    tstate->frame = saved->frame;
    tstate->recursion_depth = saved->recursion;
#endif
}

static PyObject *exec_at_top(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *code;
    PyObject *globals;
    if (!PyArg_ParseTuple(args, "O!O!:exec_at_top", &PyCode_Type, &code, &PyDict_Type,
                          &globals)) {
        return NULL;
    }
    PyThreadState *tstate = PyThreadState_Get();
    struct stack_state saved;
    int limit_before = Py_GetRecursionLimit();
    enter_top(tstate, &saved);
    PyObject *result = PyEval_EvalCode(code, globals, globals);
    leave_top(tstate, &saved, limit_before);
    return result;
}

static PyObject *call_at_top(PyObject *module, PyObject *args)
{
    (void)module;
    Py_ssize_t count = PyTuple_GET_SIZE(args);
    if (count < 1 || !PyCallable_Check(PyTuple_GET_ITEM(args, 0))) {
        PyErr_SetString(PyExc_TypeError, "call_at_top() needs a callable first");
        return NULL;
    }
    PyObject *rest = PyTuple_GetSlice(args, 1, count);
    if (rest == NULL) {
        return NULL;
    }
    PyThreadState *tstate = PyThreadState_Get();
    struct stack_state saved;
    int limit_before = Py_GetRecursionLimit();
    enter_top(tstate, &saved);
    PyObject *result = PyObject_Call(PyTuple_GET_ITEM(args, 0), rest, NULL);
    leave_top(tstate, &saved, limit_before);
    Py_DECREF(rest);
    return result;
}

PyMethodDef pynox_toplevel_methods[] = {
    {"compile_source", compile_source, METH_VARARGS,
     "compile_source(source: bytes, filename: str, from_text: bool = False) -> code\n\n"
     "Compile a module's source as `python` compiles a script."},
    {"exec_at_top", exec_at_top, METH_VARARGS,
     "exec_at_top(code, globals) -> None\n\n"
     "Run a module's code as the bottom frame of the stack, as `python` runs a script."},
    {"call_at_top", call_at_top, METH_VARARGS,
     "call_at_top(function, *args)\n\n"
     "Call a function as the bottom frame of the stack, as `python -m` calls runpy."},
    {NULL, NULL, 0, NULL},
};
