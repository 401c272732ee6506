/*
 * mq.common._properties: the message properties string's reader in C (optional; mq.common.properties keeps
 * ``decode_properties`` in Python, which gives the same dict, and uses it when this module is not built).
 *
 * decode(text) -> dict: Java's string2messageProperties as properties.py reads it: ``text`` split on \x02, a
 * segment kept when its first \x01 has a non-empty name before it and a non-empty value after it, a later
 * name replacing an earlier one. ``text`` must be a str (None and "" are the caller's: they give {}).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *decode(PyObject *self, PyObject *text) {
    (void)self;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "decode() takes a str, not %.50s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), start = 0;
    while (start <= n) {
        Py_ssize_t end = PyUnicode_FindChar(text, 0x02, start, n, 1);
        if (end == -2)
            goto fail;
        if (end < 0)
            end = n;
        Py_ssize_t i = end > start ? PyUnicode_FindChar(text, 0x01, start, end, 1) : -1;
        if (i == -2)
            goto fail;
        if (i > start && i < end - 1) {
            PyObject *k = PyUnicode_Substring(text, start, i), *v = NULL;
            if (k == NULL || (v = PyUnicode_Substring(text, i + 1, end)) == NULL || PyDict_SetItem(out, k, v) < 0) {
                Py_XDECREF(k);
                Py_XDECREF(v);
                goto fail;
            }
            Py_DECREF(k);
            Py_DECREF(v);
        }
        start = end + 1;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_O, "decode(text) -> dict: a properties string's pairs (properties.decode_properties)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mq.common._properties", NULL, -1, methods};

PyMODINIT_FUNC PyInit__properties(void) { return PyModule_Create(&module); }
