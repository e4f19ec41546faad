/* pynox._jsonscan: whether data is plain JSON, checked without running any of
 * the program's code, and plain JSON encoded as json.dumps encodes it.
 *
 * json.dump's fast path (pynox/jsonfast/fast_path.py) hands data to CPython's C
 * encoder only when the encoder can run none of the program's code: every
 * object an exact dict, list, tuple, str, int, float, bool or None (a
 * subclass could override __iter__, items() or __repr__), every key an exact
 * str, int, float, bool or None, and nesting within a depth the caller
 * gives. A cycle nests without end, so it fails the depth check after one
 * path down; nothing here allocates or calls back into Python code.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>

/* Where the main thread's stack began, near its top (glibc's, exported by its
 * dynamic loader); NULL where the C library has none (musl). */
extern void *__libc_stack_end __attribute__((weak));

/* The stack size assumed for a main thread whose stack limit is unlimited:
 * the default limit of most systems. */
#define MAIN_STACK_ASSUMED ((rlim_t)8 << 20)

/* Bytes of C stack left below this call in the calling thread, or -1 when that
 * cannot be told. The fast path nests in C as deep as the data, so it must know
 * the stack of the thread it runs in: a thread may have been started with a small
 * one (threading.stack_size) whatever threading.stack_size() says now, and the
 * program may already be deep in C calls.
 *
 * The main thread's stack is found from where it began and the stack limit,
 * since glibc's pthread_getattr_np looks for it in /proc/self/maps, which the
 * sandbox does not let the program read. The mapping also holds the arguments
 * and environment above where the stack began, at most a quarter of the limit
 * (execve's own bound): that quarter is counted as used. */
static long stack_left(void)
{
    char here;
    const uintptr_t sp = (uintptr_t)&here;
    if (&__libc_stack_end != NULL && (uintptr_t)__libc_stack_end > sp) {
        struct rlimit limit;
        if (getrlimit(RLIMIT_STACK, &limit) != 0)
            return -1;
        rlim_t size = limit.rlim_cur == RLIM_INFINITY ? MAIN_STACK_ASSUMED : limit.rlim_cur;
        size -= size / 4;
        const uintptr_t used = (uintptr_t)__libc_stack_end - sp;
        if (used < size)
            return (long)(size - used);
        /* Past it: not this stack (another thread's, mapped just below), or full. */
    }
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return -1;
    void *low = NULL;
    size_t size = 0;
    const int failed = pthread_attr_getstack(&attr, &low, &size);
    if (pthread_attr_destroy(&attr) != 0 || failed != 0)
        return -1;
    if (sp <= (uintptr_t)low || sp - (uintptr_t)low > size)
        return -1;
    return (long)(sp - (uintptr_t)low);
}

static PyObject *stack_room(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromLong(stack_left());
}

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


/* --- Encoding -------------------------------------------------------------
 *
 * encode() writes plain data as CPython's C encoder (Modules/_json.c) writes
 * it with indent=None and sort_keys=False, into one ASCII buffer instead of a
 * string per key, number and chunk. Floats and large ints go through the very
 * functions that encoder calls (float's and int's tp_repr). Whatever it does
 * not produce itself (a non-finite float without allow_nan, text that must
 * stay non-ASCII, an int too long for str()) makes it give up, and the caller
 * takes the path it took before. It allocates only str objects, which the
 * garbage collector does not track, so no collection (and so no finalizer of
 * the program's) can run while it walks the data.
 */

typedef struct {
    char *data;
    Py_ssize_t length;
    Py_ssize_t capacity;
    int ensure_ascii;
    int allow_nan;
    const char *item_separator;
    Py_ssize_t item_separator_length;
    const char *key_separator;
    Py_ssize_t key_separator_length;
} Writer;

enum { ENCODED = 0, NOT_PLAIN = 1, GIVE_UP = 2, FAILED = 3 };

static int reserve(Writer *w, Py_ssize_t more)
{
    if (w->capacity - w->length >= more)
        return ENCODED;
    Py_ssize_t wanted = w->capacity;
    while (wanted - w->length < more) {
        if (wanted > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return FAILED;
        }
        wanted *= 2;
    }
    char *grown = PyMem_Realloc(w->data, (size_t)wanted);
    if (grown == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    w->data = grown;
    w->capacity = wanted;
    return ENCODED;
}

static int put(Writer *w, const char *text, Py_ssize_t length)
{
    int status = reserve(w, length);
    if (status != ENCODED)
        return status;
    memcpy(w->data + w->length, text, (size_t)length);
    w->length += length;
    return ENCODED;
}

/* An ASCII str (as repr of an int or a float is), appended; it is released. */
static int put_ascii_str(Writer *w, PyObject *text)
{
    if (text == NULL) {
        PyErr_Clear(); /* e.g. an int beyond sys.get_int_max_str_digits(): CPython raises */
        return GIVE_UP;
    }
    int status = PyUnicode_IS_ASCII(text)
                     ? put(w, (const char *)PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text))
                     : GIVE_UP;
    Py_DECREF(text);
    return status;
}

static const char HEX[] = "0123456789abcdef";

static Py_ssize_t put_unit(char *out, Py_UCS4 unit)
{
    out[0] = '\\';
    out[1] = 'u';
    out[2] = HEX[(unit >> 12) & 0xf];
    out[3] = HEX[(unit >> 8) & 0xf];
    out[4] = HEX[(unit >> 4) & 0xf];
    out[5] = HEX[unit & 0xf];
    return 6;
}

/* One code point of a string, as _json.c's ascii_escape_unicode (ensure_ascii)
 * or escape_unicode (not) writes it; -1 when it stays non-ASCII. */
static inline Py_ssize_t put_code_point(char *out, Py_UCS4 c, int ensure_ascii)
{
    if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
        out[0] = (char)c;
        return 1;
    }
    char letter = 0;
    switch (c) {
    case '\\': letter = '\\'; break;
    case '"': letter = '"'; break;
    case '\b': letter = 'b'; break;
    case '\f': letter = 'f'; break;
    case '\n': letter = 'n'; break;
    case '\r': letter = 'r'; break;
    case '\t': letter = 't'; break;
    default: break;
    }
    if (letter != 0) {
        out[0] = '\\';
        out[1] = letter;
        return 2;
    }
    if (c < ' ')
        return put_unit(out, c);
    if (!ensure_ascii)
        return -1;
    if (c >= 0x10000) {
        put_unit(out, Py_UNICODE_HIGH_SURROGATE(c));
        return 6 + put_unit(out + 6, Py_UNICODE_LOW_SURROGATE(c));
    }
    return put_unit(out, c);
}

/* The loop once per string kind, so that reading a character is one load. */
#define PUT_CODE_POINTS(TYPE)                                        \
    do {                                                             \
        const TYPE *chars = (const TYPE *)data;                      \
        for (Py_ssize_t i = 0; i < length; i++) {                    \
            Py_ssize_t used = put_code_point(out + n, chars[i], ascii); \
            if (used < 0)                                            \
                return GIVE_UP;                                      \
            n += used;                                               \
        }                                                            \
    } while (0)

static int put_string(Writer *w, PyObject *text)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int ascii = w->ensure_ascii;
    /* At most 12 characters per code point: a surrogate pair as two \uXXXX. */
    if (length > (PY_SSIZE_T_MAX - 2) / 12) {
        PyErr_NoMemory();
        return FAILED;
    }
    int status = reserve(w, 2 + 12 * length);
    if (status != ENCODED)
        return status;
    char *out = w->data + w->length;
    Py_ssize_t n = 0;
    out[n++] = '"';
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND: PUT_CODE_POINTS(Py_UCS1); break;
    case PyUnicode_2BYTE_KIND: PUT_CODE_POINTS(Py_UCS2); break;
    default: PUT_CODE_POINTS(Py_UCS4); break;
    }
    out[n++] = '"';
    w->length += n;
    return ENCODED;
}

static int put_float(Writer *w, PyObject *number)
{
    double value = PyFloat_AS_DOUBLE(number);
    if (!Py_IS_FINITE(value)) {
        if (!w->allow_nan)
            return GIVE_UP; /* CPython raises ValueError */
        if (value > 0)
            return put(w, "Infinity", 8);
        if (value < 0)
            return put(w, "-Infinity", 9);
        return put(w, "NaN", 3);
    }
    return put_ascii_str(w, PyFloat_Type.tp_repr(number));
}

static int put_int(Writer *w, PyObject *number)
{
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(number, &overflow);
    if (overflow == 0) {
        if (value == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return GIVE_UP;
        }
        /* Decimal digits as int's repr writes them, from the last one back. */
        char digits[24];
        char *start = digits + sizeof digits;
        unsigned long long magnitude =
            value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
        do {
            *--start = (char)('0' + magnitude % 10);
            magnitude /= 10;
        } while (magnitude != 0);
        if (value < 0)
            *--start = '-';
        return put(w, start, digits + sizeof digits - start);
    }
    return put_ascii_str(w, PyLong_Type.tp_repr(number));
}

static int put_scalar(Writer *w, PyObject *obj)
{
    if (obj == Py_None)
        return put(w, "null", 4);
    if (obj == Py_True)
        return put(w, "true", 4);
    if (obj == Py_False)
        return put(w, "false", 5);
    PyTypeObject *type = Py_TYPE(obj);
    if (type == &PyUnicode_Type)
        return put_string(w, obj);
    if (type == &PyLong_Type)
        return put_int(w, obj);
    if (type == &PyFloat_Type)
        return put_float(w, obj);
    return NOT_PLAIN;
}

/* A key as the C encoder turns it into a string: str as it is, bool and None
 * as their JSON words, float and int as they encode, then quoted. */
static int put_key(Writer *w, PyObject *key)
{
    PyTypeObject *type = Py_TYPE(key);
    if (type == &PyUnicode_Type)
        return put_string(w, key);
    if (!is_scalar(key))
        return NOT_PLAIN;
    int status = put(w, "\"", 1);
    if (status == ENCODED)
        status = put_scalar(w, key); /* digits and words: nothing to escape */
    if (status == ENCODED)
        status = put(w, "\"", 1);
    return status;
}

static int put_value(Writer *w, PyObject *obj, long depth_left)
{
    int status = put_scalar(w, obj);
    if (status != NOT_PLAIN)
        return status;
    if (depth_left <= 0)
        return NOT_PLAIN; /* too deep for CPython's encoder, or a cycle */
    PyTypeObject *type = Py_TYPE(obj);
    if (type == &PyList_Type || type == &PyTuple_Type) {
        Py_ssize_t size = PySequence_Fast_GET_SIZE(obj);
        PyObject **items = PySequence_Fast_ITEMS(obj);
        if ((status = put(w, "[", 1)) != ENCODED)
            return status;
        for (Py_ssize_t i = 0; i < size; i++) {
            if (i > 0 && (status = put(w, w->item_separator, w->item_separator_length)) != ENCODED)
                return status;
            if ((status = put_value(w, items[i], depth_left - 1)) != ENCODED)
                return status;
        }
        return put(w, "]", 1);
    }
    if (type == &PyDict_Type) {
        Py_ssize_t position = 0;
        PyObject *key;
        PyObject *value;
        int first = 1;
        if ((status = put(w, "{", 1)) != ENCODED)
            return status;
        while (PyDict_Next(obj, &position, &key, &value)) {
            if (!first && (status = put(w, w->item_separator, w->item_separator_length)) != ENCODED)
                return status;
            first = 0;
            if ((status = put_key(w, key)) != ENCODED)
                return status;
            if ((status = put(w, w->key_separator, w->key_separator_length)) != ENCODED)
                return status;
            if ((status = put_value(w, value, depth_left - 1)) != ENCODED)
                return status;
        }
        return put(w, "}", 1);
    }
    return NOT_PLAIN;
}

static PyObject *encode(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *obj;
    long max_depth;
    int ensure_ascii;
    int allow_nan;
    PyObject *item_separator;
    PyObject *key_separator;
    if (!PyArg_ParseTuple(args, "OlppUU:encode", &obj, &max_depth, &ensure_ascii, &allow_nan,
                          &item_separator, &key_separator))
        return NULL;
    if (!PyUnicode_IS_ASCII(item_separator) || !PyUnicode_IS_ASCII(key_separator))
        Py_RETURN_NOTIMPLEMENTED;
    Writer w = {
        .data = PyMem_Malloc(4096),
        .length = 0,
        .capacity = 4096,
        .ensure_ascii = ensure_ascii,
        .allow_nan = allow_nan,
        .item_separator = (const char *)PyUnicode_DATA(item_separator),
        .item_separator_length = PyUnicode_GET_LENGTH(item_separator),
        .key_separator = (const char *)PyUnicode_DATA(key_separator),
        .key_separator_length = PyUnicode_GET_LENGTH(key_separator),
    };
    if (w.data == NULL)
        return PyErr_NoMemory();
    int status = put_value(&w, obj, max_depth);
    PyObject *result = NULL;
    if (status == ENCODED) {
        result = PyUnicode_New(w.length, 127);
        if (result != NULL)
            memcpy(PyUnicode_DATA(result), w.data, (size_t)w.length);
    } else if (status == NOT_PLAIN) {
        result = Py_NewRef(Py_None);
    } else if (status == GIVE_UP) {
        result = Py_NewRef(Py_NotImplemented);
    }
    PyMem_Free(w.data);
    return result;
}

static PyMethodDef methods[] = {
    {"stack_left", stack_room, METH_NOARGS,
     "stack_left() -> int\n\n"
     "Bytes of C stack left to the calling thread, or -1 when that cannot be told."},
    {"plain", plain, METH_VARARGS,
     "plain(obj, max_depth) -> bool\n\n"
     "Whether obj holds only exact JSON types, nested at most max_depth deep."},
    {"encode", encode, METH_VARARGS,
     "encode(obj, max_depth, ensure_ascii, allow_nan, item_separator, key_separator)\n\n"
     "json.dumps(obj) for plain obj (indent None, sort_keys False); None when obj is not\n"
     "plain, NotImplemented when the text is not for this encoder to write."},
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
