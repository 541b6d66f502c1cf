/* pyddstore's one compiled function: PyDDStore.get into a numpy array in a
 * single C call.
 *
 * cffi's ABI-mode call of dds_get costs about 0.45 us (libffi, six arguments
 * converted one by one, the GIL released and retaken), more than the library
 * needs to copy a small node-local row; taking the array's address through
 * cffi costs as much again. Here the array's buffer is taken and the library
 * called directly. The module is optional: setup.py and _ffi_build.py build
 * it when a C compiler is there, and without it pyddstore takes the cffi path
 * with the same results and errors.
 *
 * It knows nothing of libddstore's header: PyDDStore hands it dds_get's
 * address (from cffi) and the store's handle as integers, so there is no
 * second declaration to keep in step with the header.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* dds_get's C type: enum dds_status dds_get(struct dds_store *, const char *,
 * void *, size_t, int64_t, int64_t); the enum is an int. */
typedef int (*dds_get_fn)(void *store, const char *name, void *dst, size_t dst_bytes, int64_t start,
                          int64_t count);

/* get(fn, store, name, arr, start) -> status, or None when the arguments are
 * not the plain case (arr not a writable C-contiguous buffer of rank >= 1,
 * start outside int64): the caller then takes its full path, which names
 * what is wrong. `name` is the variable's NUL-free C string as bytes. */
static PyObject *fast_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5 || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "get(fn, store, name: bytes, arr, start)");
        return NULL;
    }
    dds_get_fn fn = (dds_get_fn)PyLong_AsVoidPtr(args[0]);
    void *store = PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    int overflow = 0;
    long long start = PyLong_AsLongLongAndOverflow(args[4], &overflow);
    if (overflow || (start == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[3], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (view.ndim < 1) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    const char *name = PyBytes_AS_STRING(args[2]);
    int64_t rows = (int64_t)view.shape[0];
    int status;
    /* The export holds the array's memory in place (numpy refuses to resize
     * an exported array), so other Python threads may run meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    status = fn(store, name, view.buf, (size_t)view.len, (int64_t)start, rows);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromLong(status);
}

static PyMethodDef methods[] = {
    {"get", (PyCFunction)(void (*)(void))fast_get, METH_FASTCALL,
     "get(fn, store, name, arr, start): dds_get into arr; the status, or None for the full path."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyddstore._fastcall", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastcall(void) {
    return PyModule_Create(&module);
}
