/*
 * mq.common._properties: the message properties string's reader in C (optional; mq.common.properties keeps
 * ``decode_properties`` in Python, which gives the same dict, and uses it when this module is not built).
 *
 * decode(text) -> dict: Java's string2messageProperties as properties.py reads it: ``text`` split on \x02, a
 * segment kept when its first \x01 has a non-empty name before it and a non-empty value after it, a later
 * name replacing an earlier one. ``text`` must be a str (None and "" are the caller's: they give {}).
 *
 * splice(text, drop, pair) -> str: ``text`` without its first segment that starts with ``drop`` (a name and its
 * \x01), then a \x02 unless the rest is empty or ends with one, then ``pair`` (properties.py's
 * ``py_splice_properties``). One allocation: the pieces are copied into the result.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

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

/* Copy ``len`` characters of ``src`` from ``start`` into the new string ``out`` at ``at``; every one of them fits
 * ``out``'s kind (the caller sized it). Not PyUnicode_CopyCharacters: CPython 3.11's check for Latin-1 into ASCII
 * scans the source from its first character rather than from ``start``, and refuses a copy of a part that is all
 * ASCII when the cut-off part before it is not. */
static void copy_part(PyObject *out, Py_ssize_t at, PyObject *src, Py_ssize_t start, Py_ssize_t len) {
    int ok = PyUnicode_KIND(out), sk = PyUnicode_KIND(src);
    void *od = PyUnicode_DATA(out);
    const void *sd = PyUnicode_DATA(src);
    if (ok == sk) {
        memcpy((char *)od + at * ok, (const char *)sd + start * sk, (size_t)len * (size_t)sk);
        return;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        PyUnicode_WRITE(ok, od, at + i, PyUnicode_READ(sk, sd, start + i));
}

static PyObject *splice(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "splice() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *text = args[0], *drop = args[1], *pair = args[2];
    if (!PyUnicode_Check(text) || !PyUnicode_Check(drop) || !PyUnicode_Check(pair)) {
        PyErr_SetString(PyExc_TypeError, "splice() takes three str");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), dn = PyUnicode_GET_LENGTH(drop);
    Py_ssize_t cut_from = n, cut_to = n;  /* [cut_from, cut_to) leaves; nothing when cut_from == n */
    Py_ssize_t i = dn ? PyUnicode_Find(text, drop, 0, n, 1) : -1;
    while (i > 0 && PyUnicode_READ_CHAR(text, i - 1) != 0x02)
        i = PyUnicode_Find(text, drop, i + 1, n, 1);
    if (i == -2)
        return NULL;
    if (i >= 0) {
        Py_ssize_t j = PyUnicode_FindChar(text, 0x02, i, n, 1);
        if (j == -2)
            return NULL;
        cut_from = i;
        cut_to = j >= 0 ? j + 1 : n;
    }
    Py_ssize_t kept = n - (cut_to - cut_from);
    /* the last kept character: the one before the cut when the cut runs to the end */
    Py_ssize_t last = cut_to < n ? n - 1 : cut_from - 1;
    int sep = kept > 0 && PyUnicode_READ_CHAR(text, last) != 0x02;
    /* The result must be a canonical str (the narrowest kind that holds its characters: str equality compares
     * kinds first). A whole canonical string's kind bound is right for its part of the result; after a cut the
     * kept characters may need a narrower kind, so a non-ASCII text's kept characters are scanned. */
    Py_UCS4 maxchar = PyUnicode_MAX_CHAR_VALUE(text);
    if (cut_from < n && !PyUnicode_IS_ASCII(text)) {
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        maxchar = 0;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (k == cut_from)
                k = cut_to;
            if (k >= n)
                break;
            Py_UCS4 ch = PyUnicode_READ(kind, data, k);
            if (ch > maxchar)
                maxchar = ch;
        }
    }
    if (PyUnicode_MAX_CHAR_VALUE(pair) > maxchar)
        maxchar = PyUnicode_MAX_CHAR_VALUE(pair);
    Py_ssize_t pn = PyUnicode_GET_LENGTH(pair);
    PyObject *out = PyUnicode_New(kept + sep + pn, maxchar);
    if (out == NULL)
        return NULL;
    copy_part(out, 0, text, 0, cut_from);
    Py_ssize_t at = cut_from;
    copy_part(out, at, text, cut_to, n - cut_to);
    at += n - cut_to;
    if (sep)
        PyUnicode_WRITE(PyUnicode_KIND(out), PyUnicode_DATA(out), at++, 0x02);
    copy_part(out, at, pair, 0, pn);
    return out;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_O, "decode(text) -> dict: a properties string's pairs (properties.decode_properties)"},
    {"splice", (PyCFunction)(void (*)(void))splice, METH_FASTCALL,
     "splice(text, drop, pair) -> str: without the first ``drop`` segment, ``pair`` appended "
     "(properties.splice_properties)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mq.common._properties", NULL, -1, methods};

PyMODINIT_FUNC PyInit__properties(void) { return PyModule_Create(&module); }
