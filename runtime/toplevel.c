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
 *
 * - reserve_memory(): under a memory limit, room for pynox's own code once the
 *   program's returns, above all for its error report, which a program that
 *   used up its memory to the last byte would leave none for. exec_at_top()
 *   and call_at_top() give it back as they return, before any frame of pynox
 *   runs again, and set it aside again as they start, where there is room: a
 *   pool's session runs many steps, each with its report.
 *
 * - flags_with(): sys.flags as python shows them for the options it was given.
 *   Before 3.13 a struct sequence has no __replace__ and its type refuses to make
 *   instances from Python, so pynox's own interpreter's flags would show.
 */
#include "native.h" /* Python.h first, as CPython asks */

#include <sys/mman.h>

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

/* The reserve: a private writable mapping, which the limit (RLIMIT_DATA) counts
 * from the moment it exists, though no page of it is ever touched, so that it
 * costs the machine nothing. Unmapped, it hands its room to whatever allocates
 * next, the interpreter's arenas (mmap) among them; memory freed into malloc's
 * heap would stay malloc's. */
static size_t reserve_size; /* what reserve_memory() asked for; 0: none */
static void *reserve_start; /* the mapping while it is there */

/* 0 when the limit has no room left for the reserve, which then stays away. */
static int map_reserve(void)
{
    if (reserve_size == 0 || reserve_start != NULL) {
        return 1;
    }
    void *start = mmap(NULL, reserve_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    if (start == MAP_FAILED) {
        return 0;
    }
    reserve_start = start;
    return 1;
}

static void unmap_reserve(void)
{
    /* munmap fails only for a range that is no mapping's (EINVAL), which leaves
     * nothing to give back: the reserve is forgotten all the same. */
    if (reserve_start != NULL) {
        (void)munmap(reserve_start, reserve_size);
        reserve_start = NULL;
    }
}

static PyObject *reserve_memory(PyObject *module, PyObject *size_arg)
{
    (void)module;
    Py_ssize_t size = PyNumber_AsSsize_t(size_arg, PyExc_OverflowError);
    if (size == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (size <= 0) {
        PyErr_SetString(PyExc_ValueError, "reserve_memory() takes a size above 0");
        return NULL;
    }
    unmap_reserve();
    reserve_size = (size_t)size;
    return PyBool_FromLong(map_reserve());
}

/* What CPython gives a new thread as its budget of nested C calls, which a script's
 * code starts with under `python`: 3.12 and 3.13 count them apart from Python calls
 * (3.14 measures the C stack instead), and the macro's name changed within 3.12. */
#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030E0000
#if defined(Py_C_RECURSION_LIMIT)
#define TOP_C_RECURSION_LIMIT Py_C_RECURSION_LIMIT
#elif defined(C_RECURSION_LIMIT)
#define TOP_C_RECURSION_LIMIT C_RECURSION_LIMIT
#endif
#endif

/* The thread's view of "where are we": saved, cleared, restored. */
struct stack_state {
    void *frame;
    int recursion;
    int c_recursion;
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
#ifdef TOP_C_RECURSION_LIMIT
    /* pynox's own calls below the program (each eval loop, each C call into Python)
     * used up some of that budget, which `python` spends none of before the script:
     * without this, deeply nested data failed in repr() or json.dumps() a few levels
     * sooner than under python. */
    saved->c_recursion = tstate->c_recursion_remaining;
    tstate->c_recursion_remaining = TOP_C_RECURSION_LIMIT;
#endif
}

static void leave_top(PyThreadState *tstate, const struct stack_state *saved, int limit_before)
{
    /* A program that changed the recursion limit changed what remains by as much. */
    int limit_change = Py_GetRecursionLimit() - limit_before;
#ifdef TOP_C_RECURSION_LIMIT
    tstate->c_recursion_remaining = saved->c_recursion;
#endif
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
    (void)map_reserve(); /* no room: this run's report does without */
    enter_top(tstate, &saved);
    PyObject *result = PyEval_EvalCode(code, globals, globals);
    unmap_reserve();
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
    (void)map_reserve(); /* no room: this run's report does without */
    enter_top(tstate, &saved);
    PyObject *result = PyObject_Call(PyTuple_GET_ITEM(args, 0), rest, NULL);
    unmap_reserve();
    leave_top(tstate, &saved, limit_before);
    Py_DECREF(rest);
    return result;
}

/* A new sys.flags of the same type: its visible fields these values in order, any
 * hidden one (3.13 has one) as it was. */
static PyObject *flags_with(PyObject *module, PyObject *values)
{
    (void)module;
    if (!PyTuple_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "flags_with() takes a tuple");
        return NULL;
    }
    PyObject *flags = PySys_GetObject("flags"); /* borrowed */
    if (flags == NULL || !PyTuple_Check(flags)) {
        PyErr_SetString(PyExc_RuntimeError, "sys.flags is missing");
        return NULL;
    }
    PyTypeObject *type = Py_TYPE(flags);
    PyObject *n_fields = PyObject_GetAttrString((PyObject *)type, "n_fields");
    if (n_fields == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(n_fields);
    Py_DECREF(n_fields);
    if (count == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t visible = PyTuple_GET_SIZE(flags);
    if (visible != PyTuple_GET_SIZE(values) || count < visible) {
        PyErr_Format(PyExc_ValueError, "sys.flags has %zd visible fields; %zd given", visible,
                     PyTuple_GET_SIZE(values));
        return NULL;
    }
    PyObject *made = PyStructSequence_New(type);
    if (made == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *value = i < visible ? PyTuple_GET_ITEM(values, i)
                                      : PyStructSequence_GetItem(flags, i);
        Py_INCREF(value);
        PyStructSequence_SetItem(made, i, value); /* steals the reference */
    }
    return made;
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
    {"reserve_memory", reserve_memory, METH_O,
     "reserve_memory(size: int) -> bool\n\n"
     "Set aside size bytes of a memory limit, untouched, while program code runs\n"
     "(exec_at_top, call_at_top), given back as it returns; False when the limit has\n"
     "no room for them now."},
    {"flags_with", flags_with, METH_O,
     "flags_with(values: tuple) -> sys.flags\n\n"
     "A sys.flags of the same type with these values in its visible fields."},
    {NULL, NULL, 0, NULL},
};
