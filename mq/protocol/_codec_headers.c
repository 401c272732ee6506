/*
 * mq.protocol._codec, the typed headers' from_ext and to_ext (headers.py) for the usual case (see _codec.c for the
 * module's whole contract): header_spec describes a header class once; header_from_ext and header_to_ext read
 * and write its fields as the generated Python code does, and give None for anything the Python code must
 * judge.
 */
#include "_codec.h"

#include <limits.h>
#include <structmember.h>

enum { K_STR, K_INT, K_BOOL, K_OTHER };

typedef struct {
    Py_ssize_t offset;
    PyObject *wire;     /* interned key */
    PyObject *dflt;
    int kind, required;
    long long lo, hi;
} hfield_t;

typedef struct {
    PyTypeObject *cls;
    Py_ssize_t n;
    int usable;         /* every field a writable object slot of a kind handled here */
    hfield_t f[1];
} hspec_t;

static PyObject *s_true, *s_false;

int headers_init(void) {
    s_true = PyUnicode_InternFromString("true");
    s_false = PyUnicode_InternFromString("false");
    return s_true != NULL && s_false != NULL ? 0 : -1;
}

static void hspec_free(PyObject *capsule) {
    hspec_t *sp = PyCapsule_GetPointer(capsule, "mq.protocol._codec.hspec");
    if (sp == NULL)
        return;
    for (Py_ssize_t i = 0; i < sp->n; i++) {
        Py_XDECREF(sp->f[i].wire);
        Py_XDECREF(sp->f[i].dflt);
    }
    Py_XDECREF(sp->cls);
    PyMem_Free(sp);
}

/* header_spec(cls, fields) -> capsule: ``fields`` as headers.HeaderField tuples (attr, wire, kind, required,
 * default, long). */
PyObject *header_spec(PyObject *self, PyObject *args) {
    PyObject *cls, *fields;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!:header_spec", &PyType_Type, &cls, &PyTuple_Type, &fields))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    hspec_t *sp = PyMem_Calloc(1, sizeof(hspec_t) + sizeof(hfield_t) * (n ? n : 1));
    if (sp == NULL)
        return PyErr_NoMemory();
    Py_INCREF(cls);
    sp->cls = (PyTypeObject *)cls;
    sp->usable = 1;
    PyObject *capsule = PyCapsule_New(sp, "mq.protocol._codec.hspec", hspec_free);
    if (capsule == NULL) {
        Py_DECREF(cls);
        PyMem_Free(sp);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fd = PyTuple_GET_ITEM(fields, i);
        if (!PyTuple_Check(fd) || PyTuple_GET_SIZE(fd) < 6) {
            PyErr_SetString(PyExc_TypeError, "header_spec() fields must be HeaderField tuples");
            Py_DECREF(capsule);
            return NULL;
        }
        hfield_t *f = &sp->f[i];
        sp->n = i + 1;
        PyObject *attr = PyTuple_GET_ITEM(fd, 0), *wire = PyTuple_GET_ITEM(fd, 1), *kind = PyTuple_GET_ITEM(fd, 2);
        if (!PyUnicode_CheckExact(attr) || !PyUnicode_CheckExact(wire)) {
            PyErr_SetString(PyExc_TypeError, "header_spec() attr and wire must be str");
            Py_DECREF(capsule);
            return NULL;
        }
        Py_INCREF(wire);
        PyUnicode_InternInPlace(&wire);
        f->wire = wire;
        f->dflt = PyTuple_GET_ITEM(fd, 4);
        Py_INCREF(f->dflt);
        f->required = PyObject_IsTrue(PyTuple_GET_ITEM(fd, 3));
        int is_long = PyObject_IsTrue(PyTuple_GET_ITEM(fd, 5));
        if (f->required < 0 || is_long < 0) {
            Py_DECREF(capsule);
            return NULL;
        }
        f->kind = kind == (PyObject *)&PyUnicode_Type ? K_STR : kind == (PyObject *)&PyLong_Type ? K_INT
                  : kind == (PyObject *)&PyBool_Type ? K_BOOL : K_OTHER;
        f->lo = is_long ? LLONG_MIN : INT32_MIN;
        f->hi = is_long ? LLONG_MAX : INT32_MAX;
        PyObject *d = PyDict_GetItemWithError(((PyTypeObject *)cls)->tp_dict, attr);
        if (d == NULL && PyErr_Occurred()) {
            Py_DECREF(capsule);
            return NULL;
        }
        if (f->kind == K_OTHER || d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)
            || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX
            || (((PyMemberDescrObject *)d)->d_member->flags & READONLY))
            sp->usable = 0;
        else
            f->offset = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    return capsule;
}

static hspec_t *get_spec(PyObject *capsule) {
    return PyCapsule_GetPointer(capsule, "mq.protocol._codec.hspec");
}

/* Java's Integer.parseInt / Long.parseLong of ASCII text within [lo, hi]; 0 when the text is anything else
 * (the Python code then decides: Unicode digits, or the error). */
static int java_int(PyObject *s, long long lo, long long hi, long long *out) {
    if (!PyUnicode_IS_ASCII(s))
        return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), i = 0;
    const char *p = (const char *)PyUnicode_1BYTE_DATA(s);
    int neg = 0;
    if (n && (p[0] == '+' || p[0] == '-')) {
        neg = p[0] == '-';
        i = 1;
    }
    if (i >= n)
        return 0;
    unsigned long long v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)(p[i] - '0');
        if (d > 9)
            return 0;
        if (v > (ULLONG_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1ULL)
            return 0;
        long long x = v == (unsigned long long)LLONG_MAX + 1ULL ? LLONG_MIN : -(long long)v;
        if (x < lo)
            return 0;
        *out = x;
    } else {
        if (v > (unsigned long long)LLONG_MAX || (long long)v > hi)
            return 0;
        *out = (long long)v;
    }
    return 1;
}

/* Boolean.parseBoolean of ASCII text, and the C++ client's "1"; -1 for text left to the Python code. */
static int java_bool(PyObject *s) {
    if (!PyUnicode_IS_ASCII(s))
        return -1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const char *p = (const char *)PyUnicode_1BYTE_DATA(s);
    if (n == 1)
        return p[0] == '1';
    if (n != 4)
        return 0;
    return (p[0] | 0x20) == 't' && (p[1] | 0x20) == 'r' && (p[2] | 0x20) == 'u' && (p[3] | 0x20) == 'e';
}

/* header_from_ext(spec, cls, ext) -> header | None: the ``cls`` header of ``ext`` where every field is the usual
 * case (text as sent, numbers in ASCII within range, required fields present); None leaves it to the Python code
 * (also for a ``cls`` other than the spec's: a subclass). */
PyObject *header_from_ext(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "header_from_ext() takes exactly 3 arguments (%zd given)", nargs);
        return NULL;
    }
    hspec_t *sp = get_spec(args[0]);
    if (sp == NULL)
        return NULL;
    PyObject *ext = args[2];
    if (!sp->usable || args[1] != (PyObject *)sp->cls || (ext != Py_None && !PyDict_CheckExact(ext)))
        Py_RETURN_NONE;
    PyObject *vals[64];
    if (sp->n > 64)
        Py_RETURN_NONE;
    Py_ssize_t i;
    for (i = 0; i < sp->n; i++) {
        hfield_t *f = &sp->f[i];
        PyObject *v = ext == Py_None ? NULL : PyDict_GetItemWithError(ext, f->wire), *val;
        if (v == NULL && PyErr_Occurred())
            goto fail;
        if (v == NULL || v == Py_None || (f->kind != K_STR && PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) == 0)) {
            if (f->required)
                goto fallback;
            val = f->dflt;
            Py_INCREF(val);
        } else if (!PyUnicode_CheckExact(v)) {
            goto fallback;
        } else if (f->kind == K_STR) {
            val = v;
            Py_INCREF(val);
        } else if (f->kind == K_INT) {
            long long x;
            if (!java_int(v, f->lo, f->hi, &x))
                goto fallback;
            if ((val = PyLong_FromLongLong(x)) == NULL)
                goto fail;
        } else {
            int b = java_bool(v);
            if (b < 0)
                goto fallback;
            val = b ? Py_True : Py_False;
            Py_INCREF(val);
        }
        vals[i] = val;
    }
    PyObject *o = sp->cls->tp_alloc(sp->cls, 0);
    if (o == NULL)
        goto fail;
    for (Py_ssize_t j = 0; j < sp->n; j++)
        *(PyObject **)((char *)o + sp->f[j].offset) = vals[j];
    return o;
fallback:
    for (Py_ssize_t j = 0; j < i; j++)
        Py_DECREF(vals[j]);
    Py_RETURN_NONE;
fail:
    for (Py_ssize_t j = 0; j < i; j++)
        Py_DECREF(vals[j]);
    return NULL;
}

/* header_to_ext(spec, header) -> dict | None: to_ext where every field is None or of its declared type (exact
 * str, int, bool); None leaves it to the Python code. */
PyObject *header_to_ext(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "header_to_ext() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    hspec_t *sp = get_spec(args[0]);
    if (sp == NULL)
        return NULL;
    PyObject *h = args[1];
    if (!sp->usable || !Py_IS_TYPE(h, sp->cls))
        Py_RETURN_NONE;
    PyObject *out = _PyDict_NewPresized(sp->n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < sp->n; i++) {
        hfield_t *f = &sp->f[i];
        PyObject *v = *(PyObject **)((char *)h + f->offset), *text;
        if (v == NULL)
            goto fallback;  /* unset: the Python code raises AttributeError */
        if (v == Py_None)
            continue;
        if (f->kind == K_STR) {
            if (!PyUnicode_CheckExact(v))
                goto fallback;
            text = v;
            Py_INCREF(text);
        } else if (f->kind == K_INT) {
            if (!PyLong_CheckExact(v))
                goto fallback;
            if ((text = PyObject_Str(v)) == NULL)
                goto fail;
        } else {
            if (!PyBool_Check(v))
                goto fallback;
            text = v == Py_True ? s_true : s_false;
            Py_INCREF(text);
        }
        int rc = PyDict_SetItem(out, f->wire, text);
        Py_DECREF(text);
        if (rc < 0)
            goto fail;
    }
    return out;
fallback:
    Py_DECREF(out);
    Py_RETURN_NONE;
fail:
    Py_DECREF(out);
    return NULL;
}

