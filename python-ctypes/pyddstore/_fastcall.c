/* pyddstore's compiled path: PyDDStore.get of a known variable into a numpy
 * array in a single C call.
 *
 * cffi's ABI-mode call of dds_get costs about 0.45 us (libffi, six arguments
 * converted one by one), more than the library needs to copy a small
 * node-local row; taking the array's address through cffi costs as much
 * again, and each check made in Python (the variable's cache, the dtype, the
 * argument types) costs tens of nanoseconds more. A Getter does all of that
 * here. The module is optional: setup.py and _ffi_build.py build it when a C
 * compiler is there, and without it pyddstore takes the cffi path with the
 * same results and errors.
 *
 * It knows nothing of libddstore's header: PyDDStore hands it dds_get's
 * address (from cffi) and the store's handle as integers, so there is no
 * second declaration to keep in step with the header. Nor does it know the
 * layout of PyDDStore's variable cache: PyDDStore passes the positions of
 * the two fields it reads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* dds_get's C type: enum dds_status dds_get(struct dds_store *, const char *,
 * void *, size_t, int64_t, int64_t); the enum is an int. */
typedef int (*dds_get_fn)(void *store, const char *name, void *dst, size_t dst_bytes, int64_t start,
                          int64_t count);

/* Getter(fn, store, vars, ndarray, i_cname, i_dtypes): `vars` is PyDDStore's
 * dict of known variables, name -> tuple whose items i_cname (the C name as
 * bytes) and i_dtypes (a frozenset of the accepted numpy dtypes) it reads;
 * `ndarray` is numpy.ndarray. The Getter holds no reference to the
 * PyDDStore, so it makes no cycle that would delay the store's (collective)
 * free until the garbage collector runs. */
typedef struct {
    PyObject_HEAD dds_get_fn fn;
    void *store; /* NULL once closed */
    PyObject *vars;
    PyObject *ndarray;
    Py_ssize_t i_cname, i_dtypes;
} Getter;

static PyObject *dtype_str; /* "dtype", interned */

static int getter_init(Getter *self, PyObject *args, PyObject *kwds) {
    PyObject *fn, *store, *vars, *ndarray;
    Py_ssize_t i_cname, i_dtypes;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Getter takes positional arguments only");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOO!O!nn", &fn, &store, &PyDict_Type, &vars, &PyType_Type, &ndarray,
                          &i_cname, &i_dtypes)) {
        return -1;
    }
    if (i_cname < 0 || i_dtypes < 0) {
        PyErr_SetString(PyExc_ValueError, "Getter: negative field position");
        return -1;
    }
    self->fn = (dds_get_fn)PyLong_AsVoidPtr(fn);
    self->store = PyLong_AsVoidPtr(store);
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_INCREF(vars);
    Py_XSETREF(self->vars, vars);
    Py_INCREF(ndarray);
    Py_XSETREF(self->ndarray, ndarray);
    self->i_cname = i_cname;
    self->i_dtypes = i_dtypes;
    return 0;
}

static void getter_dealloc(Getter *self) {
    Py_XDECREF(self->vars);
    Py_XDECREF(self->ndarray);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The variable's (C name, accepted dtypes) from the cache, borrowed; 0 when
 * it is not the plain case. */
static int cached(Getter *self, PyObject *name, PyObject **cname, PyObject **dtypes) {
    PyObject *var = PyDict_GetItemWithError(self->vars, name);
    if (var == NULL || !PyTuple_Check(var) || PyTuple_GET_SIZE(var) <= self->i_cname ||
        PyTuple_GET_SIZE(var) <= self->i_dtypes) {
        return 0;
    }
    *cname = PyTuple_GET_ITEM(var, self->i_cname);
    *dtypes = PyTuple_GET_ITEM(var, self->i_dtypes);
    return PyBytes_Check(*cname) && PyFrozenSet_Check(*dtypes);
}

/* get(name, arr, start) -> status, or None when it is not the plain case: a
 * closed Getter, a name not in the cache (or not a str), arr not a writable
 * C-contiguous numpy array of rank >= 1 of an accepted dtype, start not an
 * int within int64. The caller then takes its full path, which names what
 * is wrong. */
static PyObject *getter_get(Getter *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "get(name, arr, start)");
        return NULL;
    }
    PyObject *name = args[0], *arr = args[1], *cname, *dtypes;
    if (self->store == NULL || !PyUnicode_CheckExact(name) || Py_TYPE(arr) != (PyTypeObject *)self->ndarray ||
        !PyLong_CheckExact(args[2]) || !cached(self, name, &cname, &dtypes)) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    int overflow = 0;
    long long start = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (overflow) {
        Py_RETURN_NONE;
    }
    PyObject *dtype = PyObject_GetAttr(arr, dtype_str);
    if (dtype == NULL) {
        return NULL;
    }
    int accepted = PySet_Contains(dtypes, dtype);
    Py_DECREF(dtype);
    if (accepted <= 0) {
        if (accepted < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (view.ndim < 1) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    /* Borrowed from the cache: held across the call, since another thread
     * may clear the cache (free) while this one runs without the GIL. */
    Py_INCREF(cname);
    int64_t rows = (int64_t)view.shape[0];
    dds_get_fn fn = self->fn;
    void *store = self->store;
    int status;
    /* The export holds the array's memory in place (numpy refuses to resize
     * an exported array), so other Python threads may run meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    status = fn(store, PyBytes_AS_STRING(cname), view.buf, (size_t)view.len, (int64_t)start, rows);
    Py_END_ALLOW_THREADS
    Py_DECREF(cname);
    PyBuffer_Release(&view);
    return PyLong_FromLong(status);
}

/* close(): from now on get answers None, so the caller's full path raises
 * the freed store's error. */
static PyObject *getter_close(Getter *self, PyObject *unused) {
    (void)unused;
    self->store = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef getter_methods[] = {
    {"get", (PyCFunction)(void (*)(void))getter_get, METH_FASTCALL,
     "get(name, arr, start): dds_get into arr; the status, or None for the full path."},
    {"close", (PyCFunction)getter_close, METH_NOARGS, "close(): every later get answers None."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GetterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyddstore._fastcall.Getter",
    .tp_basicsize = sizeof(Getter),
    .tp_dealloc = (destructor)getter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Getter(fn, store, vars, ndarray, i_cname, i_dtypes): PyDDStore.get's compiled path.",
    .tp_methods = getter_methods,
    .tp_init = (initproc)getter_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyddstore._fastcall", NULL, -1, NULL,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastcall(void) {
    dtype_str = PyUnicode_InternFromString("dtype");
    if (dtype_str == NULL || PyType_Ready(&GetterType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&GetterType);
    if (PyModule_AddObject(m, "Getter", (PyObject *)&GetterType) < 0) {
        Py_DECREF(&GetterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
