/*
 * Argument checks for METH_FASTCALL functions of the store's C extensions: the put path calls them once per
 * message, where PyArg_ParseTuple's format parsing (and the argument tuple METH_VARARGS builds) cost about as
 * much as the work. Errors read like the interpreter's own.
 */
#ifndef MQ_STORE_FASTARGS_H
#define MQ_STORE_FASTARGS_H

#include <Python.h>

static inline int fa_nargs(const char *fn, Py_ssize_t nargs, Py_ssize_t want) {
    if (nargs == want)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd arguments (%zd given)", fn, want, nargs);
    return -1;
}

/* ``o`` must be an instance of ``type`` (subclasses too, as PyArg_ParseTuple's "O!"). */
static inline int fa_type(const char *fn, int pos, PyObject *o, PyTypeObject *type) {
    if (PyObject_TypeCheck(o, type))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() argument %d must be %s, not %.50s", fn, pos, type->tp_name,
                 Py_TYPE(o)->tp_name);
    return -1;
}

/* An index (int, or __index__) that fits Py_ssize_t, as "n". */
static inline int fa_ssize(PyObject *o, Py_ssize_t *out) {
    Py_ssize_t v = PyNumber_AsSsize_t(o, PyExc_OverflowError);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* A C long long, as "L". */
static inline int fa_ll(PyObject *o, long long *out) {
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* obj.name, a new reference, with its value as a C long long in *out; NULL with an exception set on failure. */
static inline PyObject *fa_attr_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v != NULL && fa_ll(v, out) < 0)
        Py_CLEAR(v);
    return v;
}

#endif
