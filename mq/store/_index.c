/*
 * mq.store._index: the index's key hashing and entry writer in C (optional; mq.store.index_service and
 * mq.store.index_file keep their Python code for installs without it, and write the same bytes).
 *
 * index_items(requests, rollback_type) -> list of (key hash, phy offset, store timestamp) | None
 *     IndexService.build_batch's items: for every ``DispatchRequest`` with a UNIQ_KEY or KEYS that is not a
 *     ROLLBACK record, its uniq key and then each non-empty space-separated key, hashed as ``topic#key`` by
 *     RocketMQ's indexKeyHashMethod (abs of Java's String.hashCode, Integer.MIN_VALUE -> 0). None when a
 *     request is not a DispatchRequest tuple (the Python code then reads it by attribute).
 *
 * put_entries(mm, items, start, count, limit, hash_slot_num, entries_at, begin_ts, begin_phy, slot_count)
 *     -> (next item, count, begin_ts, begin_phy, slot_count)
 *     IndexFile.put_hashes's loop: writes items[start:] as 20-byte entries numbered from ``count`` while
 *     ``count < limit``, chaining each through its hash slot. Every item is read and checked first, with the
 *     GIL; the stores into the mapping run without it, so the thread putting messages keeps running. The
 *     caller writes the header.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_bigendian.h"
#include "_jhash.h"

#define HEADER_SIZE 40
#define SLOT_SIZE 4
#define ENTRY_SIZE 20

/* DispatchRequest field positions */
enum { R_TOPIC, R_QID, R_QOFF, R_PHY, R_SIZE, R_TAGSCODE, R_TS, R_KEYS, R_UNIQ, R_TRAN, R_FIELDS };

static inline uint32_t abs_hash(uint32_t h) {
    if (h & 0x80000000u)
        return h == 0x80000000u ? 0 : 0u - h;
    return h;
}

/* Append (hash, phy, ts) to out; phy and ts are borrowed. 0 or -1 with an error set. */
static int add_item(PyObject *out, uint32_t h, PyObject *phy, PyObject *ts) {
    PyObject *hv = PyLong_FromUnsignedLong(h);
    if (hv == NULL)
        return -1;
    PyObject *t = PyTuple_New(3);
    if (t == NULL) {
        Py_DECREF(hv);
        return -1;
    }
    Py_INCREF(phy);
    Py_INCREF(ts);
    PyTuple_SET_ITEM(t, 0, hv);
    PyTuple_SET_ITEM(t, 1, phy);
    PyTuple_SET_ITEM(t, 2, ts);
    int rc = PyList_Append(out, t);
    Py_DECREF(t);
    return rc;
}

static int truthy_str(PyObject *o, const char *what) {
    if (o == Py_None)
        return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "dispatch request %s must be str or None, not %.100s", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    return PyUnicode_GET_LENGTH(o) > 0;
}

static PyObject *index_items(PyObject *self, PyObject *args) {
    PyObject *requests;
    long long rollback;
    (void)self;
    if (!PyArg_ParseTuple(args, "OL", &requests, &rollback))
        return NULL;
    PyObject *seq = PySequence_Fast(requests, "index_items expects a sequence of DispatchRequest");
    if (seq == NULL)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **reqs = PySequence_Fast_ITEMS(seq);
    PyObject *last_topic = NULL;  /* borrowed from a request that seq keeps alive */
    uint32_t prefix = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = reqs[i];
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != R_FIELDS) {  /* not a DispatchRequest: Python's turn */
            Py_DECREF(seq);
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyObject *keys = PyTuple_GET_ITEM(r, R_KEYS), *uniq = PyTuple_GET_ITEM(r, R_UNIQ);
        int has_keys = truthy_str(keys, "keys"), has_uniq = truthy_str(uniq, "uniq_key");
        if (has_keys < 0 || has_uniq < 0)
            goto fail;
        if (!has_keys && !has_uniq)
            continue;
        long long tran = PyLong_AsLongLong(PyTuple_GET_ITEM(r, R_TRAN));
        if (tran == -1 && PyErr_Occurred())
            goto fail;
        if (tran == rollback)
            continue;
        PyObject *topic = PyTuple_GET_ITEM(r, R_TOPIC);
        if (!PyUnicode_Check(topic)) {
            PyErr_SetString(PyExc_TypeError, "dispatch request topic must be str");
            goto fail;
        }
        if (topic != last_topic) {
            Py_ssize_t tl = PyUnicode_GET_LENGTH(topic);
            prefix = 31u * jhash_continue(0, topic, 0, tl) + (uint32_t)'#';
            last_topic = topic;
        }
        PyObject *phy = PyTuple_GET_ITEM(r, R_PHY), *ts = PyTuple_GET_ITEM(r, R_TS);
        if (has_uniq
            && add_item(out, abs_hash(jhash_continue(prefix, uniq, 0, PyUnicode_GET_LENGTH(uniq))), phy, ts) < 0)
            goto fail;
        if (has_keys) {
            int kind = PyUnicode_KIND(keys);
            const void *data = PyUnicode_DATA(keys);
            Py_ssize_t len = PyUnicode_GET_LENGTH(keys), from = 0;
            for (Py_ssize_t j = 0; j <= len; j++) {
                if (j < len && PyUnicode_READ(kind, data, j) != ' ')
                    continue;
                if (j > from && add_item(out, abs_hash(jhash_continue(prefix, keys, from, j)), phy, ts) < 0)
                    goto fail;
                from = j + 1;
            }
        }
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    Py_XDECREF(out);
    return NULL;
}

typedef struct {
    int64_t hash, phy, ts;
} item_t;

static PyObject *put_entries(PyObject *self, PyObject *args) {
    PyObject *mm, *items;
    Py_ssize_t start, count, limit, slots, entries_at;
    long long bt, begin_phy, hsc;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!nnnnnLLL", &mm, &PyList_Type, &items, &start, &count, &limit, &slots,
                          &entries_at, &bt, &begin_phy, &hsc))
        return NULL;
    Py_ssize_t end = PyList_GET_SIZE(items);
    if (start < 0 || count < 0 || slots <= 0 || entries_at < HEADER_SIZE + slots * SLOT_SIZE) {
        PyErr_SetString(PyExc_ValueError, "put_entries: bad start, count, slot number or entry position");
        return NULL;
    }
    Py_ssize_t todo = 0;
    if (start < end && count < limit)
        todo = end - start < limit - count ? end - start : limit - count;
    if (todo == 0)
        return Py_BuildValue("(nnLLL)", start, count, bt, begin_phy, hsc);
    Py_buffer view;
    if (PyObject_GetBuffer(mm, &view, PyBUF_WRITABLE) < 0)
        return NULL;
    item_t *its = NULL;
    PyObject *result = NULL;
    if (entries_at + (count + todo) * (Py_ssize_t)ENTRY_SIZE > view.len) {
        PyErr_Format(PyExc_ValueError, "put_entries: entries up to number %zd do not fit a %zd-byte mapping",
                     count + todo, view.len);
        goto done;
    }
    if ((its = PyMem_Malloc((size_t)todo * sizeof(item_t))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < todo; k++) {
        PyObject *t = PyList_GET_ITEM(items, start + k);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
            PyErr_SetString(PyExc_TypeError, "put_entries expects (key hash, phy offset, store timestamp) tuples");
            goto done;
        }
        long long h = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 0));
        if (h == -1 && PyErr_Occurred())
            goto done;
        if (h < INT32_MIN || h > INT32_MAX) {
            PyErr_Format(PyExc_OverflowError, "index key hash %lld does not fit a 32-bit field", h);
            goto done;
        }
        its[k].hash = h;
        its[k].phy = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 1));
        if (its[k].phy == -1 && PyErr_Occurred())
            goto done;
        its[k].ts = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 2));
        if (its[k].ts == -1 && PyErr_Occurred())
            goto done;
    }
    unsigned char *base = view.buf;
    Py_ssize_t n = count;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < todo; k++, n++) {
        const item_t *it = &its[k];
        int64_t m = it->hash % slots;
        if (m < 0)
            m += slots;  /* Python's modulo of a negative hash */
        unsigned char *slot = base + HEADER_SIZE + m * SLOT_SIZE;
        int32_t prev = (int32_t)get32(slot);
        if (prev <= 0 || prev > n) {
            prev = 0;
            hsc++;
        }
        int64_t diff;
        if (n <= 1) {  /* the first entry defines the file's start */
            bt = it->ts;
            begin_phy = it->phy;
            diff = 0;
        } else if (bt <= 0) {
            diff = 0;
        } else {
            int64_t delta = it->ts - bt;
            diff = delta > 0 ? delta / 1000 : 0;
            if (diff > INT32_MAX)
                diff = INT32_MAX;
        }
        unsigned char *e = base + entries_at + n * ENTRY_SIZE;
        put32(e, (uint32_t)it->hash);
        put32(e + 4, (uint32_t)((uint64_t)it->phy >> 32));
        put32(e + 8, (uint32_t)it->phy);
        put32(e + 12, (uint32_t)diff);
        put32(e + 16, (uint32_t)prev);
        put32(slot, (uint32_t)n);
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(nnLLL)", start + todo, n, bt, begin_phy, hsc);
done:
    PyMem_Free(its);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"index_items", index_items, METH_VARARGS,
     "index_items(requests, rollback_type) -> list[(key hash, phy offset, store timestamp)] | None\n\n"
     "The index entries of dispatched records: uniq key then each KEYS token, hashed as topic#key."},
    {"put_entries", put_entries, METH_VARARGS,
     "put_entries(mm, items, start, count, limit, hash_slot_num, entries_at, begin_ts, begin_phy, slot_count)\n"
     "    -> (next item, count, begin_ts, begin_phy, slot_count)\n\n"
     "Write items[start:] as index entries while count < limit; the stores run without the GIL."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mq.store._index", NULL, -1, methods};

PyMODINIT_FUNC PyInit__index(void) {
    return PyModule_Create(&module);
}
