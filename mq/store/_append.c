/*
 * mq.store._append: the commit log's record writer in C (optional; mq.store.commit_log falls back to its own
 * Python loop when this module is not built or a record needs what it does not handle).
 *
 * append_v4(mm, pos, base, batch, store_ts, store_host, table, request_type) writes the records of
 * ``batch`` (``commit_log.Prepared`` tuples) into the writable buffer ``mm`` from ``pos``: message format v1
 * with IPv4 born and store hosts, the layout mq.common.record draws. It assigns each record its queue offset
 * from ``table`` ((topic, queue_id) -> next offset) and returns one ``request_type`` (``DispatchRequest``) per
 * record, in log order. It returns None, having written and changed nothing, when a record has an IPv6 host;
 * the caller then writes the batch itself. Every field is read and checked before the first byte is written,
 * so a TypeError or OverflowError also leaves the buffer and the table as they were. ``mm`` is a segment's mapping
 * (ASYNC_FLUSH) or the commit log's staging buffer (SYNC_FLUSH, ``CommitLog.staging``).
 *
 * prepare_v4 is CommitLog.prepare for the common message, and put_one_v4 both steps for one message at a
 * segment's write position or after the staged records (``CommitLog.put_one``, the one-message put of both
 * flush modes), each returning None when the Python path must decide.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "_bigendian.h"
#include "_fastargs.h"
#include "_jhash.h"

#define MESSAGE_MAGIC 0xDAA320A7u
/* mq.common.sysflag.PRODUCER_BITS: compression and codec, tag filter type, transaction type */
#define PRODUCER_BITS 0x70FLL
#define TRAN_NOT 0x0
#define TRAN_COMMIT 0x8
#define HEADER_V4 88

/* commit_log.Prepared field positions */
enum { P_TOPIC, P_QID, P_BODY, P_TAIL, P_CRC, P_FLAG, P_SYSFLAG, P_BORNTS, P_BORNHOST, P_RECONSUME, P_PREPTX,
       P_TOTAL, P_TRAN, P_TAGSCODE, P_DELAY, P_KEYS, P_UNIQ, P_WAIT, P_FIELDS };

typedef struct {
    PyObject *prepared;
    PyObject *key;       /* (topic, queue_id), new reference; NULL when no queue offset is assigned */
    const char *body, *tail, *born;
    Py_ssize_t body_len, tail_len;
    long long flag, sys_flag, born_ts, reconsume, prep_tx, tags_code, delay;
    long long total, qid, crc, tran;
    long long qoff;
    PyObject *orig;      /* the table's entry before this record (new reference), NULL when there was none */
    int changed;
} rec_t;

static int as_i32(PyObject *o, long long *out, const char *what) {
    if (fa_ll(o, out) < 0)
        return -1;
    if (*out < INT32_MIN || *out > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s %lld does not fit a 32-bit field", what, *out);
        return -1;
    }
    return 0;
}

/* An instance of the tuple subclass ``type`` (a NamedTuple) holding ``n`` new references from ``items``
 * (stolen, also on failure). */
static PyObject *new_record(PyObject *type, PyObject **items, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == NULL) {
            for (Py_ssize_t j = 0; j < n; j++)
                Py_XDECREF(items[j]);
            return NULL;
        }
    }
    PyObject *t = ((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, n);
    if (t == NULL) {
        for (Py_ssize_t j = 0; j < n; j++)
            Py_DECREF(items[j]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, items[i]);
    return t;
}

static inline PyObject *ref(PyObject *o) {
    Py_INCREF(o);
    return o;
}

static void free_recs(rec_t *recs, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
    {
        Py_XDECREF(recs[i].key);
        Py_XDECREF(recs[i].orig);
    }
    PyMem_Free(recs);
}

/* Read and check one Prepared tuple. 1: ok, 0: needs the Python writer (IPv6 host), -1: error set. */
static int read_rec(PyObject *m, rec_t *r) {
    if (!PyTuple_Check(m) || PyTuple_GET_SIZE(m) != P_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "append_v4 expects commit_log.Prepared records");
        return -1;
    }
    PyObject *body = PyTuple_GET_ITEM(m, P_BODY), *tail = PyTuple_GET_ITEM(m, P_TAIL);
    PyObject *born = PyTuple_GET_ITEM(m, P_BORNHOST);
    if (!PyBytes_Check(body) || !PyBytes_Check(tail) || !PyBytes_Check(born)) {
        PyErr_SetString(PyExc_TypeError, "a prepared record's body, tail and born host must be bytes");
        return -1;
    }
    if (PyBytes_GET_SIZE(born) != 8)
        return 0;
    r->prepared = m;
    r->key = NULL;
    r->body = PyBytes_AS_STRING(body);
    r->body_len = PyBytes_GET_SIZE(body);
    r->tail = PyBytes_AS_STRING(tail);
    r->tail_len = PyBytes_GET_SIZE(tail);
    r->born = PyBytes_AS_STRING(born);
    if (as_i32(PyTuple_GET_ITEM(m, P_QID), &r->qid, "queue id") < 0
        || as_i32(PyTuple_GET_ITEM(m, P_FLAG), &r->flag, "flag") < 0
        || as_i32(PyTuple_GET_ITEM(m, P_SYSFLAG), &r->sys_flag, "sys flag") < 0
        || fa_ll(PyTuple_GET_ITEM(m, P_BORNTS), &r->born_ts) < 0
        || as_i32(PyTuple_GET_ITEM(m, P_RECONSUME), &r->reconsume, "reconsume times") < 0
        || fa_ll(PyTuple_GET_ITEM(m, P_PREPTX), &r->prep_tx) < 0
        || as_i32(PyTuple_GET_ITEM(m, P_TOTAL), &r->total, "total size") < 0
        || fa_ll(PyTuple_GET_ITEM(m, P_CRC), &r->crc) < 0
        || fa_ll(PyTuple_GET_ITEM(m, P_TRAN), &r->tran) < 0
        || fa_ll(PyTuple_GET_ITEM(m, P_DELAY), &r->delay) < 0)
        return -1;
    if (r->total != HEADER_V4 + r->body_len + r->tail_len) {
        PyErr_Format(PyExc_ValueError, "a prepared record's total size %lld does not match its parts (%zd)",
                     r->total, HEADER_V4 + r->body_len + r->tail_len);
        return -1;
    }
    if (r->body_len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "body too long");
        return -1;
    }
    return 1;
}

static PyObject *append_v4(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *mm, *batch, *table, *req_type;
    Py_ssize_t pos;
    long long base, store_ts;
    Py_buffer host, view;
    (void)self;
    if (fa_nargs("append_v4", nargs, 8) < 0 || fa_ssize(args[1], &pos) < 0 || fa_ll(args[2], &base) < 0
        || fa_type("append_v4", 4, args[3], &PyList_Type) < 0 || fa_ll(args[4], &store_ts) < 0
        || fa_type("append_v4", 7, args[6], &PyDict_Type) < 0 || fa_type("append_v4", 8, args[7], &PyType_Type) < 0)
        return NULL;
    mm = args[0]; batch = args[3]; table = args[6]; req_type = args[7];
    if (PyObject_GetBuffer(args[5], &host, PyBUF_SIMPLE) < 0)
        return NULL;
    if (host.len != 8) {
        PyBuffer_Release(&host);
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyList_GET_SIZE(batch);
    rec_t *recs = PyMem_Calloc(n ? (size_t)n : 1, sizeof(rec_t));
    if (recs == NULL) {
        PyBuffer_Release(&host);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL, *out = NULL;
    int have_view = 0;
    Py_ssize_t need = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int ok = read_rec(PyList_GET_ITEM(batch, i), &recs[i]);
        if (ok < 0)
            goto done;
        if (ok == 0) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        need += (Py_ssize_t)recs[i].total;
    }
    if (PyObject_GetBuffer(mm, &view, PyBUF_WRITABLE) < 0)
        goto done;
    have_view = 1;
    if (pos < 0 || need > view.len - pos) {
        PyErr_Format(PyExc_ValueError, "%zd bytes do not fit at %zd of a %zd-byte segment", need, pos, view.len);
        goto done;
    }
    /* queue offsets, in log order; on a later failure the table gets its old entries back */
    for (Py_ssize_t i = 0; i < n; i++) {
        rec_t *r = &recs[i];
        r->qoff = 0;
        if (r->tran != TRAN_NOT && r->tran != TRAN_COMMIT)
            continue;
        r->key = PyTuple_Pack(2, PyTuple_GET_ITEM(r->prepared, P_TOPIC), PyTuple_GET_ITEM(r->prepared, P_QID));
        if (r->key == NULL)
            goto undo;
        PyObject *cur = PyDict_GetItemWithError(table, r->key);
        if (cur == NULL && PyErr_Occurred())
            goto undo;
        if (cur != NULL && fa_ll(cur, &r->qoff) < 0)
            goto undo;
        Py_XINCREF(cur);
        r->orig = cur;
        PyObject *v = PyLong_FromLongLong(r->qoff + 1);
        if (v == NULL || PyDict_SetItem(table, r->key, v) < 0) {
            Py_XDECREF(v);
            goto undo;
        }
        Py_DECREF(v);
        r->changed = 1;
    }
    out = PyList_New(n);
    if (out == NULL)
        goto undo;
    /* The requests outlive the put: they wait for the index thread, long enough to survive young collections
     * and be promoted to the oldest generation, whose full collections then walk the whole heap (0.6-0.7 us
     * per put in benchmarks/store_append.py with the index on). A request holding only objects the cyclic
     * collector does not track (str, int, None: always, from ``prepare``) cannot be part of a reference
     * cycle, so it is untracked, and so is the list when all of its requests are. */
    int untrack_all = 1;
    long long phy = base + pos;
    for (Py_ssize_t i = 0; i < n; i++) {  /* the requests, before any byte is written */
        rec_t *r = &recs[i];
        PyObject *m = r->prepared;
        PyObject *tc;
        if (r->delay) {
            tc = PyLong_FromLongLong(store_ts + r->delay);
        } else {
            tc = PyTuple_GET_ITEM(m, P_TAGSCODE);
            Py_INCREF(tc);
        }
        PyObject *items[10] = {ref(PyTuple_GET_ITEM(m, P_TOPIC)), ref(PyTuple_GET_ITEM(m, P_QID)),
                               PyLong_FromLongLong(r->qoff), PyLong_FromLongLong(phy),
                               ref(PyTuple_GET_ITEM(m, P_TOTAL)), tc, PyLong_FromLongLong(store_ts),
                               ref(PyTuple_GET_ITEM(m, P_KEYS)), ref(PyTuple_GET_ITEM(m, P_UNIQ)),
                               ref(PyTuple_GET_ITEM(m, P_TRAN))};
        PyObject *req = new_record(req_type, items, 10);
        if (req == NULL)
            goto undo;
        int atomic = 1;
        for (int k = 0; k < 10 && atomic; k++)
            atomic = !PyObject_IS_GC(items[k]);
        if (atomic)
            PyObject_GC_UnTrack(req);
        else
            untrack_all = 0;
        PyList_SET_ITEM(out, i, req);
        phy += r->total;
    }
    if (untrack_all)
        PyObject_GC_UnTrack(out);
    unsigned char *p = (unsigned char *)view.buf + pos;
    phy = base + pos;
    for (Py_ssize_t i = 0; i < n; i++) {
        rec_t *r = &recs[i];
        put32(p, (uint32_t)r->total);
        put32(p + 4, MESSAGE_MAGIC);
        put32(p + 8, (uint32_t)r->crc);
        put32(p + 12, (uint32_t)r->qid);
        put32(p + 16, (uint32_t)r->flag);
        put64(p + 20, (uint64_t)r->qoff);
        put64(p + 28, (uint64_t)phy);
        put32(p + 36, (uint32_t)r->sys_flag);
        put64(p + 40, (uint64_t)r->born_ts);
        memcpy(p + 48, r->born, 8);
        put64(p + 56, (uint64_t)store_ts);
        memcpy(p + 64, host.buf, 8);
        put32(p + 72, (uint32_t)r->reconsume);
        put64(p + 76, (uint64_t)r->prep_tx);
        put32(p + 84, (uint32_t)r->body_len);
        memcpy(p + HEADER_V4, r->body, (size_t)r->body_len);
        memcpy(p + HEADER_V4 + r->body_len, r->tail, (size_t)r->tail_len);
        p += r->total;
        phy += r->total;
    }
    result = out;
    out = NULL;
    goto done;
undo:
    for (Py_ssize_t i = n - 1; i >= 0; i--) {  /* reverse order: the first record's old entry wins */
        rec_t *r = &recs[i];
        if (!r->changed)
            continue;
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (r->orig != NULL)
            PyDict_SetItem(table, r->key, r->orig);
        else
            PyDict_DelItem(table, r->key);
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
done:
    Py_XDECREF(out);
    if (have_view)
        PyBuffer_Release(&view);
    PyBuffer_Release(&host);
    free_recs(recs, n);
    return result;
}

/* Whether the exact int o lies in [lo, hi] (no error is left set) */
static int in_range(PyObject *o, long long lo, long long hi) {
    if (!PyLong_CheckExact(o))
        return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !overflow && v >= lo && v <= hi;
}

/* Java String.hashCode of s as a signed 32-bit value (the consume queue's tagsCode) */
static long long java_hash(PyObject *s) {
    return (long long)(int32_t)jhash_continue(0, s, 0, PyUnicode_GET_LENGTH(s));
}

static PyObject *s_topic, *s_body, *s_properties, *s_sys_flag, *s_queue_id, *s_properties_string, *s_born_host,
    *s_tags_code, *s_flag, *s_born_timestamp, *s_reconsume_times, *s_prepared_transaction_offset,
    *k_delay, *k_tags, *k_keys, *k_uniq, *k_wait;

/* A dict's value for key, borrowed; NULL when absent (or props is not a dict, or a lookup error, cleared). */
static PyObject *prop(PyObject *props, PyObject *key) {
    if (props == NULL || !PyDict_CheckExact(props))
        return NULL;
    PyObject *v = PyDict_GetItemWithError(props, key);
    if (v == NULL)
        PyErr_Clear();
    return v;
}

/* RocketMQ's body CRC, crc32(body) & 0x7FFFFFFF, as a new int: through crc_fn (a zlib-compatible
   crc32(data) -> int, such as zlib-ng's SIMD one, ~7x zlib's for 1 KiB) or, when it is None, zlib's. */
static PyObject *body_crc(PyObject *crc_fn, PyObject *body) {
    if (crc_fn == Py_None) {
        unsigned long crc = crc32(0L, (const Bytef *)PyBytes_AS_STRING(body), (uInt)PyBytes_GET_SIZE(body));
        return PyLong_FromUnsignedLong(crc & 0x7FFFFFFFul);
    }
    PyObject *v = PyObject_Vectorcall(crc_fn, &body, 1, NULL);
    if (v == NULL)
        return NULL;
    unsigned long crc = PyLong_AsUnsignedLongMask(v);
    Py_DECREF(v);
    if (crc == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLong(crc & 0x7FFFFFFFul);
}

/* prepare_v4's work, its arguments checked: a new Prepared, a new reference to None, or NULL (error set) */
static PyObject *prepare_impl(PyObject *msg, PyObject *cache, Py_ssize_t max_body, Py_ssize_t max_total,
                              PyObject *ptype, PyObject *crc_fn) {
    PyObject *topic = NULL, *body = NULL, *props = NULL, *sysf = NULL, *qid = NULL, *props_s = NULL,
             *born = NULL, *tc = NULL, *flag = NULL, *born_ts = NULL, *recons = NULL, *prep_tx = NULL,
             *tail = NULL, *result = NULL;
    topic = PyObject_GetAttr(msg, s_topic);
    if (topic == NULL)
        goto done;
    PyObject *prefix = PyDict_GetItemWithError(cache, topic);  /* borrowed */
    if (prefix == NULL || !PyBytes_Check(prefix))
        goto fallback;  /* a new topic: the Python path checks and caches it */
    if ((body = PyObject_GetAttr(msg, s_body)) == NULL || (props = PyObject_GetAttr(msg, s_properties)) == NULL
        || (sysf = PyObject_GetAttr(msg, s_sys_flag)) == NULL || (qid = PyObject_GetAttr(msg, s_queue_id)) == NULL
        || (props_s = PyObject_GetAttr(msg, s_properties_string)) == NULL
        || (born = PyObject_GetAttr(msg, s_born_host)) == NULL || (tc = PyObject_GetAttr(msg, s_tags_code)) == NULL
        || (flag = PyObject_GetAttr(msg, s_flag)) == NULL
        || (born_ts = PyObject_GetAttr(msg, s_born_timestamp)) == NULL
        || (recons = PyObject_GetAttr(msg, s_reconsume_times)) == NULL
        || (prep_tx = PyObject_GetAttr(msg, s_prepared_transaction_offset)) == NULL)
        goto done;
    if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) > max_body || !PyUnicode_CheckExact(props_s)
        || !PyBytes_CheckExact(born) || PyBytes_GET_SIZE(born) != 8 || !PyLong_CheckExact(sysf)
        || (props != Py_None && !PyDict_CheckExact(props)) || (tc != Py_None && !PyLong_CheckExact(tc)))
        goto fallback;
    /* every integer within its field (queue id in [0, 2^31)): anything else is the Python path's to refuse */
    if (!in_range(qid, 0, INT32_MAX) || !in_range(flag, INT32_MIN, INT32_MAX)
        || !in_range(recons, INT32_MIN, INT32_MAX) || !in_range(born_ts, LLONG_MIN, LLONG_MAX)
        || !in_range(prep_tx, LLONG_MIN, LLONG_MAX) || (tc != Py_None && !in_range(tc, LLONG_MIN, LLONG_MAX)))
        goto fallback;
    PyObject *pd = props == Py_None ? NULL : props;
    int overflow;
    long long sys_flag = PyLong_AsLongLongAndOverflow(sysf, &overflow);
    if (sys_flag == -1 && PyErr_Occurred())
        goto done;
    if (overflow)
        goto fallback;
    /* the producer's bits only (sysflag.PRODUCER_BITS): this writer lays out IPv4 hosts, so no layout bit */
    sys_flag &= PRODUCER_BITS;
    long long tran = sys_flag & 0xC;
    if (tran == TRAN_NOT || tran == TRAN_COMMIT) {
        PyObject *level = prop(pd, k_delay);
        if (level != NULL && PyObject_IsTrue(level)
            && !(PyUnicode_Check(level) && PyUnicode_CompareWithASCIIString(level, "0") == 0))
            goto fallback;  /* a delayed message: the Python path reroutes it */
    }
    Py_ssize_t plen;
    const char *pb = PyUnicode_AsUTF8AndSize(props_s, &plen);
    if (pb == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            goto done;
        PyErr_Clear();  /* not valid text (a lone surrogate): the Python path refuses it */
        goto fallback;
    }
    /* a NUL at the end reads as a torn record: the Python path ends such properties with a separator */
    if (plen > 32767 || (plen > 0 && pb[plen - 1] == 0))
        goto fallback;
    Py_ssize_t blen = PyBytes_GET_SIZE(body), tlen = PyBytes_GET_SIZE(prefix);
    Py_ssize_t total = 90 + blen + tlen + plen;
    if (total > max_total)
        goto fallback;
    if (tc == Py_None) {
        PyObject *tags = prop(pd, k_tags);
        long long code = 0;
        if (tags != NULL && PyUnicode_Check(tags))
            code = java_hash(tags);
        else if (tags != NULL && PyObject_IsTrue(tags))
            goto fallback;
        Py_DECREF(tc);
        if ((tc = PyLong_FromLongLong(code)) == NULL)
            goto done;
    }
    PyObject *keys = prop(pd, k_keys), *uniq = prop(pd, k_uniq), *wait_v = prop(pd, k_wait);
    int wait = !(wait_v != NULL && PyUnicode_Check(wait_v) && PyUnicode_CompareWithASCIIString(wait_v, "false") == 0);
    if ((tail = PyBytes_FromStringAndSize(NULL, tlen + 2 + plen)) == NULL)
        goto done;
    char *t = PyBytes_AS_STRING(tail);
    memcpy(t, PyBytes_AS_STRING(prefix), (size_t)tlen);
    t[tlen] = (char)(plen >> 8);
    t[tlen + 1] = (char)plen;
    memcpy(t + tlen + 2, pb, (size_t)plen);
    PyObject *crc_v = body_crc(crc_fn, body);
    if (crc_v == NULL)
        goto done;
    PyObject *items[P_FIELDS] = {ref(topic), ref(qid), ref(body), tail, crc_v, ref(flag),
                                 PyLong_FromLongLong(sys_flag), ref(born_ts), ref(born), ref(recons), ref(prep_tx),
                                 PyLong_FromSsize_t(total), PyLong_FromLongLong(tran), ref(tc), PyLong_FromLong(0),
                                 ref(keys ? keys : Py_None), ref(uniq ? uniq : Py_None),
                                 ref(wait ? Py_True : Py_False)};
    tail = NULL;  /* stolen */
    result = new_record(ptype, items, P_FIELDS);
    goto done;
fallback:
    if (PyErr_Occurred())
        goto done;
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(topic); Py_XDECREF(body); Py_XDECREF(props); Py_XDECREF(sysf); Py_XDECREF(qid);
    Py_XDECREF(props_s); Py_XDECREF(born); Py_XDECREF(tc); Py_XDECREF(flag); Py_XDECREF(born_ts);
    Py_XDECREF(recons); Py_XDECREF(prep_tx); Py_XDECREF(tail);
    return result;
}

static int check_crc_fn(const char *fn, int pos, PyObject *crc_fn) {
    if (crc_fn == Py_None || PyCallable_Check(crc_fn))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() argument %d must be callable or None, not %.50s", fn, pos,
                 Py_TYPE(crc_fn)->tp_name);
    return -1;
}

static PyObject *prepare_v4(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t max_body, max_total;
    (void)self;
    if (fa_nargs("prepare_v4", nargs, 6) < 0 || fa_type("prepare_v4", 2, args[1], &PyDict_Type) < 0
        || fa_ssize(args[2], &max_body) < 0 || fa_ssize(args[3], &max_total) < 0
        || fa_type("prepare_v4", 5, args[4], &PyType_Type) < 0 || check_crc_fn("prepare_v4", 6, args[5]) < 0)
        return NULL;
    return prepare_impl(args[0], args[1], max_body, max_total, args[4], args[5]);
}

static PyObject *s_wrote_position, *s_file_size, *s_reserved_to, *s_zeroing_from, *s_start_offset, *s_mm;

enum { C_CACHE, C_MAX_BODY, C_MAX_TOTAL, C_PREPARED, C_CRC, C_HOST, C_REQUEST, C_STAGE_LIMIT, C_FIELDS };

/* put_one_v4(msg, mf, store_ts, table, config, stage, staged): prepare_v4 and append_v4 of one message as the
 * next record of the segment ``mf`` (a MappedFile), when that is the usual case: the C encoder takes the
 * message and its record fits below the segment's reserved blocks and the warm-ahead thread's zeroing, leaving
 * room for the BLANK end. ``stage`` None: the record goes through the mapping at ``mf.wrote_position``, which
 * then moves past it. Else ``stage`` is the commit log's staging buffer holding ``staged`` bytes (the records
 * after ``mf.wrote_position``; SYNC_FLUSH): the record goes after them while the buffer has room for it within
 * the stage limit, and the caller counts it as staged. Returns the one-request list, or None with nothing
 * written or changed. ``config`` is (topic_prefixes, max_body, max_total, prepared_type, crc32, store_host,
 * request_type, stage_limit). */
static PyObject *put_one_v4(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t max_body, max_total, staged, stage_limit;
    (void)self;
    if (fa_nargs("put_one_v4", nargs, 7) < 0 || fa_type("put_one_v4", 4, args[3], &PyDict_Type) < 0
        || fa_type("put_one_v4", 5, args[4], &PyTuple_Type) < 0 || fa_ssize(args[6], &staged) < 0)
        return NULL;
    PyObject *msg = args[0], *mf = args[1], *config = args[4], *stage = args[5];
    if (PyTuple_GET_SIZE(config) != C_FIELDS) {
        PyErr_Format(PyExc_TypeError, "put_one_v4() config must have %d items, not %zd", C_FIELDS,
                     PyTuple_GET_SIZE(config));
        return NULL;
    }
    if (stage != Py_None && !PyByteArray_CheckExact(stage)) {
        PyErr_Format(PyExc_TypeError, "put_one_v4() argument 6 must be bytearray or None, not %.50s",
                     Py_TYPE(stage)->tp_name);
        return NULL;
    }
    PyObject *cache = PyTuple_GET_ITEM(config, C_CACHE), *ptype = PyTuple_GET_ITEM(config, C_PREPARED),
             *crc_fn = PyTuple_GET_ITEM(config, C_CRC);
    if (fa_type("put_one_v4", 1, cache, &PyDict_Type) < 0
        || fa_ssize(PyTuple_GET_ITEM(config, C_MAX_BODY), &max_body) < 0
        || fa_ssize(PyTuple_GET_ITEM(config, C_MAX_TOTAL), &max_total) < 0
        || fa_type("put_one_v4", 4, ptype, &PyType_Type) < 0 || check_crc_fn("put_one_v4", 5, crc_fn) < 0
        || fa_ssize(PyTuple_GET_ITEM(config, C_STAGE_LIMIT), &stage_limit) < 0)
        return NULL;
    long long store_ts;
    if (fa_ll(args[2], &store_ts) < 0)
        return NULL;
    PyObject *prepared = prepare_impl(msg, cache, max_body, max_total, ptype, crc_fn);
    if (prepared == NULL || prepared == Py_None)
        return prepared;
    PyObject *pos_o = NULL, *start_o = NULL, *size_o = NULL, *res_o = NULL, *zero_o = NULL, *mm = NULL,
             *batch = NULL, *at_o = NULL, *base_o = NULL, *result = NULL;
    long long total, wrote, start, size, reserved, zeroing;
    if (fa_ll(PyTuple_GET_ITEM(prepared, P_TOTAL), &total) < 0
        || (pos_o = fa_attr_ll(mf, s_wrote_position, &wrote)) == NULL
        || (size_o = fa_attr_ll(mf, s_file_size, &size)) == NULL
        || (res_o = fa_attr_ll(mf, s_reserved_to, &reserved)) == NULL
        || (zero_o = fa_attr_ll(mf, s_zeroing_from, &zeroing)) == NULL
        || (start_o = fa_attr_ll(mf, s_start_offset, &start)) == NULL)
        goto done;
    long long end = wrote + staged + total;  /* the record's end in the segment */
    if (wrote < 0 || staged < 0 || end + 8 > size || end > reserved || end > zeroing
        || (stage != Py_None && (staged + total > PyByteArray_GET_SIZE(stage) || staged + total > stage_limit))) {
        result = Py_None;  /* a roll, more blocks to reserve, a chunk being zeroed, a full stage: the general path */
        Py_INCREF(result);
        goto done;
    }
    if (stage == Py_None) {
        if ((mm = PyObject_GetAttr(mf, s_mm)) == NULL)
            goto done;
        at_o = pos_o; base_o = start_o;
        Py_INCREF(at_o); Py_INCREF(base_o);
    } else {
        mm = stage;
        Py_INCREF(mm);
        if ((at_o = PyLong_FromSsize_t(staged)) == NULL || (base_o = PyLong_FromLongLong(start + wrote)) == NULL)
            goto done;
    }
    if ((batch = PyList_New(1)) == NULL)
        goto done;
    PyList_SET_ITEM(batch, 0, prepared);
    prepared = NULL;  /* stolen */
    PyObject *app_args[8] = {mm, at_o, base_o, batch, args[2], PyTuple_GET_ITEM(config, C_HOST), args[3],
                             PyTuple_GET_ITEM(config, C_REQUEST)};
    result = append_v4(NULL, app_args, 8);
    if (result != NULL && result != Py_None && stage == Py_None) {
        PyObject *end_o = PyLong_FromLongLong(end);
        /* the record is written: a failure to move the write position would leave it invisible */
        if (end_o == NULL || PyObject_SetAttr(mf, s_wrote_position, end_o) < 0)
            Py_CLEAR(result);
        Py_XDECREF(end_o);
    }
done:
    Py_XDECREF(prepared); Py_XDECREF(pos_o); Py_XDECREF(size_o); Py_XDECREF(res_o); Py_XDECREF(zero_o);
    Py_XDECREF(start_o); Py_XDECREF(mm); Py_XDECREF(batch); Py_XDECREF(at_o); Py_XDECREF(base_o);
    return result;
}

static PyMethodDef methods[] = {
    {"append_v4", (PyCFunction)(void (*)(void))append_v4, METH_FASTCALL,
     "append_v4(mm, pos, base, batch, store_ts, store_host, table, request_type) -> list | None\n\n"
     "Write prepared records with IPv4 hosts at mm[pos:],\n"
     "assigning queue offsets from table; the dispatch requests, or None (nothing written) when a record\n"
     "needs the Python writer."},
    {"prepare_v4", (PyCFunction)(void (*)(void))prepare_v4, METH_FASTCALL,
     "prepare_v4(msg, topic_prefixes, max_body, max_total, prepared_type, crc32) -> Prepared | None\n\n"
     "CommitLog.prepare for the common message (a known topic, an 8-byte born host, its properties string\n"
     "given, no delay level); None when the Python path must decide. crc32 computes the body CRC (None:\n"
     "zlib's)."},
    {"put_one_v4", (PyCFunction)(void (*)(void))put_one_v4, METH_FASTCALL,
     "put_one_v4(msg, mf, store_ts, table, config, stage, staged) -> list | None\n\n"
     "prepare_v4 and append_v4 of one message as segment mf's next record: at its write position, which it\n"
     "advances (stage None), or after the staged bytes of the staging buffer stage; None, with nothing\n"
     "written, when the message or the room left is not the usual case. config is (topic_prefixes, max_body,\n"
     "max_total, prepared_type, crc32, store_host, request_type, stage_limit)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mq.store._append", NULL, -1, methods};

#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__append(void) {
    INTERN(s_topic, "topic"); INTERN(s_body, "body"); INTERN(s_properties, "properties");
    INTERN(s_sys_flag, "sys_flag"); INTERN(s_queue_id, "queue_id"); INTERN(s_properties_string, "properties_string");
    INTERN(s_born_host, "born_host"); INTERN(s_tags_code, "tags_code"); INTERN(s_flag, "flag");
    INTERN(s_born_timestamp, "born_timestamp"); INTERN(s_reconsume_times, "reconsume_times");
    INTERN(s_prepared_transaction_offset, "prepared_transaction_offset");
    INTERN(k_delay, "DELAY"); INTERN(k_tags, "TAGS"); INTERN(k_keys, "KEYS"); INTERN(k_uniq, "UNIQ_KEY");
    INTERN(k_wait, "WAIT");
    INTERN(s_wrote_position, "wrote_position"); INTERN(s_file_size, "file_size"); INTERN(s_reserved_to, "reserved_to");
    INTERN(s_zeroing_from, "zeroing_from"); INTERN(s_start_offset, "start_offset"); INTERN(s_mm, "mm");
    return PyModule_Create(&module);
}
