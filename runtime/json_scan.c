/* pynox._jsonscan: whether data is plain JSON, checked without running any of
 * the program's code.
 *
 * json.dump's fast path (pynox/json_fast_path.py) hands data to CPython's C
 * encoder only when the encoder can run none of the program's code: every
 * object an exact dict, list, tuple, str, int, float, bool or None (a
 * subclass could override __iter__, items() or __repr__), every key an exact
 * str, int, float, bool or None, and nesting within a depth the caller
 * gives. A cycle nests without end, so it fails the depth check after one
 * path down; nothing here allocates or calls back into Python code.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int is_scalar(PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    return obj == Py_None || type == &PyUnicode_Type || type == &PyLong_Type ||
           type == &PyFloat_Type || type == &PyBool_Type;
}

static int is_plain(PyObject *obj, long depth_left)
{
    if (is_scalar(obj))
        return 1;
    if (depth_left <= 0)
        return 0;
    PyTypeObject *type = Py_TYPE(obj);
    if (type == &PyList_Type || type == &PyTuple_Type) {
        /* Nothing runs while this loop does, so the list cannot change under it. */
        Py_ssize_t size = PySequence_Fast_GET_SIZE(obj);
        PyObject **items = PySequence_Fast_ITEMS(obj);
        for (Py_ssize_t i = 0; i < size; i++)
            if (!is_plain(items[i], depth_left - 1))
                return 0;
        return 1;
    }
    if (type == &PyDict_Type) {
        Py_ssize_t position = 0;
        PyObject *key;
        PyObject *value;
        while (PyDict_Next(obj, &position, &key, &value))
            if (!is_scalar(key) || !is_plain(value, depth_left - 1))
                return 0;
        return 1;
    }
    return 0;
}

static PyObject *plain(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *obj;
    long max_depth;
    if (!PyArg_ParseTuple(args, "Ol:plain", &obj, &max_depth))
        return NULL;
    return PyBool_FromLong(is_plain(obj, max_depth));
}

static PyMethodDef methods[] = {
    {"plain", plain, METH_VARARGS,
     "plain(obj, max_depth) -> bool\n\n"
     "Whether obj holds only exact JSON types, nested at most max_depth deep."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "pynox._jsonscan", NULL, 0, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__jsonscan(void);

PyMODINIT_FUNC PyInit__jsonscan(void)
{
    return PyModule_Create(&module_def);
}
