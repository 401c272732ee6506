/*
 * mq.store._consume_queue: the dispatcher's consume-queue unit writer in C (optional; mq.store.consume_queue's
 * put_units is its Python twin and writes the same bytes).
 *
 * put_units(requests, queues, slow, notify, notify_failed) walks ``requests`` (a list of commit_log.DispatchRequest
 * tuples, in log order) and, for each record that takes a queue offset (transaction type NOT or COMMIT), writes its
 * 20-byte unit (commitLogOffset i64, size i32, tagsCode i64, big-endian) when that is the usual case: its queue is
 * in ``queues`` (topic -> {queue_id -> ConsumeQueue}), the unit is a duplicate (ends at or below the queue's
 * max_physic_offset: nothing to do) or is the next unit of the queue's last segment with its blocks already
 * reserved. Any other record goes to ``slow(request)``, which writes it in Python and returns False when the
 * consume queue cannot be written; put_units then stops and returns the number of requests done before it.
 * After each unit ``notify(topic, queue_id, queue_offset + 1, tags_code)`` runs unless ``notify`` is None; an
 * Exception from it is handed to ``notify_failed(exc)`` and the walk goes on. Returns len(requests) when all are
 * done.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_bigendian.h"
#include "_fastargs.h"

#define UNIT_SIZE 20
#define TRAN_NOT 0x0
#define TRAN_COMMIT 0x8

/* commit_log.DispatchRequest field positions */
enum { R_TOPIC, R_QID, R_QOFF, R_PHY, R_SIZE, R_TAGSCODE, R_STORE_TS, R_KEYS, R_UNIQ, R_TRAN, R_FIELDS };

static PyObject *s_max_physic_offset, *s_queue, *s_files, *s_wrote_position, *s_reserved_to, *s_start_offset,
    *s_mm;

/* obj.name as a C long long; -1 with an exception set on failure */
static int attr_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = fa_attr_ll(obj, name, out);
    Py_XDECREF(v);
    return v == NULL ? -1 : 0;
}

static int set_ll(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL)
        return -1;
    int rc = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return rc;
}

/* ConsumeQueue.put_fast: 1 when written (or a duplicate), 0 when not the usual case, -1 on an error */
static int put_fast(PyObject *cq, long long qoff, long long phy, long long size, long long tags_code) {
    long long max_phy, pos, reserved, start;
    if (size < INT32_MIN || size > INT32_MAX)
        return 0;  /* the Python path raises struct.error for it */
    if (attr_ll(cq, s_max_physic_offset, &max_phy) < 0)
        return -1;
    if (phy + size <= max_phy)
        return 1;
    PyObject *queue = PyObject_GetAttr(cq, s_queue);
    if (queue == NULL)
        return -1;
    PyObject *files = PyObject_GetAttr(queue, s_files);
    Py_DECREF(queue);
    if (files == NULL)
        return -1;
    if (!PyList_Check(files) || PyList_GET_SIZE(files) == 0) {
        Py_DECREF(files);
        return 0;
    }
    PyObject *mf = PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1);
    Py_INCREF(mf);
    Py_DECREF(files);
    int rc = -1;
    if (attr_ll(mf, s_wrote_position, &pos) < 0 || attr_ll(mf, s_reserved_to, &reserved) < 0
        || attr_ll(mf, s_start_offset, &start) < 0)
        goto done;
    rc = 0;
    if (pos < 0 || pos + UNIT_SIZE > reserved || qoff * UNIT_SIZE != start + pos)
        goto done;
    rc = -1;
    PyObject *mm = PyObject_GetAttr(mf, s_mm);
    if (mm == NULL)
        goto done;
    Py_buffer view;
    if (PyObject_GetBuffer(mm, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(mm);
        goto done;
    }
    Py_DECREF(mm);
    if (pos + UNIT_SIZE > view.len) {
        PyBuffer_Release(&view);
        rc = 0;
        goto done;
    }
    unsigned char *p = (unsigned char *)view.buf + pos;
    put64(p, (uint64_t)phy);
    put32(p + 8, (uint32_t)size);
    put64(p + 12, (uint64_t)tags_code);
    PyBuffer_Release(&view);
    if (set_ll(mf, s_wrote_position, pos + UNIT_SIZE) < 0 || set_ll(cq, s_max_physic_offset, phy + size) < 0)
        goto done;
    rc = 1;
done:
    Py_DECREF(mf);
    return rc;
}

/* Hand the current Exception to notify_failed; 0 when handled, -1 when it must propagate */
static int report(PyObject *notify_failed) {
    if (!PyErr_ExceptionMatches(PyExc_Exception) || notify_failed == Py_None)
        return -1;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    PyObject *res = PyObject_CallOneArg(notify_failed, value != NULL ? value : Py_None);
    Py_XDECREF(value);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    return 0;
}

static int field_ll(PyObject *r, int i, long long *out) {
    *out = PyLong_AsLongLong(PyTuple_GET_ITEM(r, i));
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *put_units(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *requests, *queues, *slow, *notify, *notify_failed;
    if (fa_nargs("put_units", nargs, 5) < 0 || fa_type("put_units", 1, args[0], &PyList_Type) < 0
        || fa_type("put_units", 2, args[1], &PyDict_Type) < 0)
        return NULL;
    requests = args[0]; queues = args[1]; slow = args[2]; notify = args[3]; notify_failed = args[4];
    Py_ssize_t i;
    for (i = 0; i < PyList_GET_SIZE(requests); i++) {
        PyObject *r = PyList_GET_ITEM(requests, i);
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) < R_FIELDS) {
            PyErr_Format(PyExc_TypeError, "put_units: request %zd is not a DispatchRequest", i);
            return NULL;
        }
        long long tran, qoff, phy, size, tags_code;
        if (field_ll(r, R_TRAN, &tran) < 0)
            return NULL;
        if (tran != TRAN_NOT && tran != TRAN_COMMIT)
            continue;
        if (field_ll(r, R_QOFF, &qoff) < 0 || field_ll(r, R_PHY, &phy) < 0 || field_ll(r, R_SIZE, &size) < 0
            || field_ll(r, R_TAGSCODE, &tags_code) < 0)
            return NULL;
        Py_INCREF(r);
        PyObject *topic = PyTuple_GET_ITEM(r, R_TOPIC), *qid = PyTuple_GET_ITEM(r, R_QID);
        int ok = 0;
        PyObject *per = PyDict_GetItemWithError(queues, topic);
        if (per != NULL && PyDict_Check(per)) {
            PyObject *cq = PyDict_GetItemWithError(per, qid);
            if (cq != NULL) {
                Py_INCREF(cq);
                ok = put_fast(cq, qoff, phy, size, tags_code);
                Py_DECREF(cq);
            }
        }
        if (ok == 0 && PyErr_Occurred())
            ok = -1;
        if (ok == 0) {
            PyObject *res = PyObject_CallOneArg(slow, r);
            if (res == NULL) {
                ok = -1;
            } else {
                ok = PyObject_IsTrue(res);
                Py_DECREF(res);
                if (ok == 0) {
                    Py_DECREF(r);
                    return PyLong_FromSsize_t(i);
                }
            }
        }
        if (ok < 0) {
            Py_DECREF(r);
            return NULL;
        }
        if (notify != Py_None) {
            PyObject *next = PyLong_FromLongLong(qoff + 1);
            if (next == NULL) {
                Py_DECREF(r);
                return NULL;
            }
            PyObject *argv[4] = {topic, qid, next, PyTuple_GET_ITEM(r, R_TAGSCODE)};
            PyObject *res = PyObject_Vectorcall(notify, argv, 4, NULL);
            Py_DECREF(next);
            if (res != NULL) {
                Py_DECREF(res);
            } else if (report(notify_failed) < 0) {
                Py_DECREF(r);
                return NULL;
            }
        }
        Py_DECREF(r);
    }
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"put_units", (PyCFunction)(void (*)(void))put_units, METH_FASTCALL,
     "put_units(requests, queues, slow, notify, notify_failed) -> int\n\n"
     "Write the consume-queue units of dispatched records; records off the usual path go to slow(request), "
     "which returns False to stop. Returns how many requests were done."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mq.store._consume_queue", NULL, -1, methods};

PyMODINIT_FUNC PyInit__consume_queue(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_max_physic_offset, "max_physic_offset");
    INTERN(s_queue, "queue");
    INTERN(s_files, "files");
    INTERN(s_wrote_position, "wrote_position");
    INTERN(s_reserved_to, "reserved_to");
    INTERN(s_start_offset, "start_offset");
    INTERN(s_mm, "mm");
#undef INTERN
    return PyModule_Create(&module);
}
