/* Mark what a forking server holds immortal (part of pynox._native).
 *
 * A pool child is forked from the pool's zygote and shares its memory until it
 * writes to a page, which the kernel then copies for it. CPython writes to an
 * object whenever it takes or drops a reference to it, so a child that merely
 * calls a preloaded function copies the page of every object on its way. From
 * 3.12 on, the count of an immortal object is never written (PEP 683, which
 * names this very case): marking the objects the pool server holds before it
 * forks the zygote spares every child most of those copies. They are never
 * freed, as they would not have been anyway: they live as long as the pool.
 *
 * The objects are the ones the caller passes (gc.get_objects()) and, from
 * them, everything their traversal reaches, which covers what the collector
 * does not track (strings, numbers, untracked tuples and dicts), plus the
 * constants and names of code objects, which have no traversal.
 */
#include "native.h"

#if PY_VERSION_HEX >= 0x030C0000 && !defined(Py_GIL_DISABLED) && SIZEOF_VOID_P > 4
#define PYNOX_HAS_IMMORTAL 1
/* The count an immortal object is given: 3.14 renamed it (and moved it to the middle
 * of the immortal range). */
#ifdef _Py_IMMORTAL_INITIAL_REFCNT
#define PYNOX_IMMORTAL_COUNT _Py_IMMORTAL_INITIAL_REFCNT
#else
#define PYNOX_IMMORTAL_COUNT _Py_IMMORTAL_REFCNT
#endif
#endif

#ifdef PYNOX_HAS_IMMORTAL

/* Objects marked whose references are still to be marked. */
struct pending {
    PyObject **items;
    size_t length;
    size_t capacity;
};

static int push(struct pending *pending, PyObject *op)
{
    if (pending->length == pending->capacity) {
        size_t capacity = pending->capacity ? pending->capacity * 2 : 4096;
        PyObject **items = PyMem_RawRealloc(pending->items, capacity * sizeof *items);
        if (items == NULL) {
            return -1;
        }
        pending->items = items;
        pending->capacity = capacity;
    }
    pending->items[pending->length++] = op;
    return 0;
}

/* A visitproc: marks op immortal, once, and queues it; -1 when out of memory. */
static int mark(PyObject *op, void *arg)
{
    if (op == NULL || _Py_IsImmortal(op)) {
        return 0; /* already marked (or immortal by birth): its references too */
    }
    Py_SET_REFCNT(op, PYNOX_IMMORTAL_COUNT);
    return push((struct pending *)arg, op);
}

static int mark_references(PyObject *op, struct pending *pending)
{
    if (PyCode_Check(op)) {
        PyCodeObject *code = (PyCodeObject *)op;
        PyObject *parts[] = {
            code->co_consts,         code->co_names,     code->co_localsplusnames,
            code->co_localspluskinds, code->co_filename, code->co_name,
            code->co_qualname,       code->co_linetable, code->co_exceptiontable,
        };
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            if (mark(parts[i], pending) != 0) {
                return -1;
            }
        }
        return 0;
    }
    traverseproc traverse = Py_TYPE(op)->tp_traverse;
    if (traverse == NULL || !PyObject_IS_GC(op)) {
        return 0;
    }
    return traverse(op, mark, pending) != 0 ? -1 : 0;
}

#endif

static PyObject *immortalize(PyObject *module, PyObject *roots)
{
    (void)module;
    if (!PyList_Check(roots)) {
        PyErr_SetString(PyExc_TypeError, "immortalize() takes a list, like gc.get_objects()");
        return NULL;
    }
#ifdef PYNOX_HAS_IMMORTAL
    struct pending pending = {NULL, 0, 0};
    size_t marked = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(roots); i++) {
        if (mark(PyList_GET_ITEM(roots, i), &pending) != 0) {
            goto out_of_memory;
        }
    }
    while (pending.length > 0) {
        marked++;
        if (mark_references(pending.items[--pending.length], &pending) != 0) {
            goto out_of_memory;
        }
    }
    PyMem_RawFree(pending.items);
    return PyLong_FromSize_t(marked);
out_of_memory:
    /* What was marked stays so: immortal objects only cost their memory. */
    PyMem_RawFree(pending.items);
    return PyErr_NoMemory();
#else
    return PyLong_FromLong(0); /* before 3.12 no object is immortal; nothing to gain */
#endif
}

PyMethodDef pynox_immortal_methods[] = {
    {"immortalize", immortalize, METH_O,
     "immortalize(objects) -> int: marks the objects, and all they reach, immortal; "
     "returns how many it marked (0 before Python 3.12)."},
    {NULL, NULL, 0, NULL},
};
