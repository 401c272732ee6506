/*
 * mq.protocol._codec: the remoting frame codec's per-frame loops in C (optional; mq.protocol.codec keeps the
 * Python twins, which give the same commands, bytes and errors, and uses them when this module is not built).
 *
 * setup(command_type, remote_error, serialize_types, lang_known, lang_other, json_decode, json_encode) is called
 * once by codec.py: RemotingCommand (whose __slots__ this module reads and writes through their member
 * descriptors' offsets), RemoteProtocolError, (SerializeType.JSON, SerializeType.ROCKETMQ), the frozenset of
 * known language codes, LanguageCode.OTHER, and the JSON header decoder and encoder (orjson, in Python).
 *
 * setup_json(loads, lang_by_name, lang_name): orjson.loads and codec.py's {language name: code} and {code: name}.
 * From then on a JSON header is parsed by ``loads`` and its command built in C when it is the usual kind
 * (_codec_json.c), and written there; else, and before, ``json_decode`` and ``json_encode`` do it.
 *
 * decode_frames(src, pos, max_frame, max_header) -> (commands, pos): FrameDecoder.feed's loop over the whole
 * frames of ``src`` from ``pos``: the length and header-word checks against the limits, the ROCKETMQ binary
 * header decoded here and the JSON header as setup_json says, the body copied to bytes, ``wire_size`` set. It
 * stops at the first incomplete frame and returns the position there; bad input raises RemoteProtocolError with
 * the Python code's message.
 *
 * encode_into(out, cmd) -> bool: appends ``cmd``'s frame to the bytearray ``out`` (the ROCKETMQ header written
 * here, the JSON one as setup_json says); False, with nothing appended, for anything it leaves to the Python
 * code: a subclass, a field of an unusual type or out of range, a key too long (the Python code raises the
 * LocalProtocolError).
 *
 * rocketmq_header(cmd) -> bytes | None: the ROCKETMQ binary header alone, None where encode_into says False.
 *
 * header_spec(cls, fields), header_from_ext(spec, cls, ext), header_to_ext(spec, header) (_codec_headers.c): the
 * typed headers' from_ext and to_ext (headers.py) for the usual case, every field read or written as the generated Python code
 * does; they return None for anything else (a number in other digits or out of range, a missing required field,
 * a value of another type), which the Python code then reads or refuses.
 */
#include "_codec.h"

#include <structmember.h>
#include <limits.h>

static const char *const slot_names[F_COUNT] = {"code", "language", "version", "opaque", "flag", "remark",
                                                "ext_fields", "body", "serialize_type", "wire_size"};
Py_ssize_t slot_off[F_COUNT];
PyTypeObject *cmd_type;
PyObject *stype_json, *lang_known, *lang_other;
static PyObject *remote_error, *stype_rocketmq, *json_decode, *json_encode;
/* one-byte keys (the V2 send header's a..z) as shared strings: no new str per frame for them */
static PyObject *short_keys[128];

static inline uint32_t get32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}
static inline uint16_t get16(const unsigned char *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
static inline void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }

static void set_slot(PyObject *o, int f, PyObject *v) {  /* steals v */
    PyObject *old = SLOT(o, f);
    SLOT(o, f) = v;
    Py_XDECREF(old);
}

static PyObject *setup(PyObject *self, PyObject *args) {
    PyObject *type, *err, *stypes, *known, *other, *jdec, *jenc;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!OO!O!OOO:setup", &PyType_Type, &type, &err, &PyTuple_Type, &stypes,
                          &PyFrozenSet_Type, &known, &other, &jdec, &jenc))
        return NULL;
    if (PyTuple_GET_SIZE(stypes) != 2) {
        PyErr_SetString(PyExc_ValueError, "setup() serialize_types must be (JSON, ROCKETMQ)");
        return NULL;
    }
    Py_ssize_t off[F_COUNT];
    for (int i = 0; i < F_COUNT; i++) {
        PyObject *d = PyDict_GetItemString(((PyTypeObject *)type)->tp_dict, slot_names[i]);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "setup() %s.%s is not a slot", ((PyTypeObject *)type)->tp_name,
                         slot_names[i]);
            return NULL;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "setup() %s.%s is not a writable object slot",
                         ((PyTypeObject *)type)->tp_name, slot_names[i]);
            return NULL;
        }
        off[i] = m->offset;
    }
    memcpy(slot_off, off, sizeof(off));
    Py_INCREF(type); Py_XSETREF(cmd_type, (PyTypeObject *)type);
    Py_INCREF(err); Py_XSETREF(remote_error, err);
    Py_INCREF(PyTuple_GET_ITEM(stypes, 0)); Py_XSETREF(stype_json, PyTuple_GET_ITEM(stypes, 0));
    Py_INCREF(PyTuple_GET_ITEM(stypes, 1)); Py_XSETREF(stype_rocketmq, PyTuple_GET_ITEM(stypes, 1));
    Py_INCREF(known); Py_XSETREF(lang_known, known);
    Py_INCREF(other); Py_XSETREF(lang_other, other);
    Py_INCREF(jdec); Py_XSETREF(json_decode, jdec);
    Py_INCREF(jenc); Py_XSETREF(json_encode, jenc);
    Py_RETURN_NONE;
}

static int ready(void) {
    if (cmd_type != NULL)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "mq.protocol._codec.setup() was not called");
    return -1;
}

/* a RemotingCommand with every slot set (the values are stolen; NULL ones become None) */
PyObject *new_command(PyObject *vals[F_COUNT]) {
    PyObject *o = cmd_type->tp_alloc(cmd_type, 0);
    if (o == NULL) {
        for (int i = 0; i < F_COUNT; i++)
            Py_XDECREF(vals[i]);
        return NULL;
    }
    for (int i = 0; i < F_COUNT; i++) {
        PyObject *v = vals[i];
        if (v == NULL) {
            v = Py_None;
            Py_INCREF(v);
        }
        SLOT(o, i) = v;
    }
    return o;
}

/* UTF-8 text as a str: ASCII copied straight into a new compact str (PyUnicode_DecodeUTF8 costs several times
 * that for the short texts of a header), anything else decoded strictly. */
static PyObject *decode_text(const char *p, Py_ssize_t n) {
    if (n == 1 && (unsigned char)p[0] < 128) {
        PyObject *k = short_keys[(unsigned char)p[0]];
        Py_INCREF(k);
        return k;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if ((unsigned char)p[i] >= 128)
            return PyUnicode_DecodeUTF8(p, n, NULL);
    PyObject *s = PyUnicode_New(n, 127);
    if (s != NULL)
        memcpy(PyUnicode_1BYTE_DATA(s), p, (size_t)n);
    return s;
}

/* The last value seen under each one-byte key (the V2 send header's a..n: the producer group, topic, default
 * topic, flags repeat from frame to frame), handed out again when the same bytes come: no new str for them. */
#define VALUE_CACHE_MAX 64
static PyObject *last_value[128];

static PyObject *decode_value(unsigned char key, const char *p, Py_ssize_t n) {
    if (key >= 128 || n > VALUE_CACHE_MAX)
        return decode_text(p, n);
    PyObject *v = last_value[key];
    if (v != NULL && PyUnicode_IS_ASCII(v) && PyUnicode_GET_LENGTH(v) == n && memcmp(PyUnicode_1BYTE_DATA(v), p, n) == 0) {
        Py_INCREF(v);
        return v;
    }
    if ((v = decode_text(p, n)) != NULL && PyUnicode_IS_ASCII(v)) {
        Py_INCREF(v);
        Py_XSETREF(last_value[key], v);
    }
    return v;
}

static PyObject *protocol_error(const char *fmt, ...) {
    va_list va;
    va_start(va, fmt);
    PyObject *msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (msg != NULL) {
        PyErr_SetObject(remote_error, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

/* codec.decode_rocketmq_header */
static PyObject *decode_rocketmq(const unsigned char *d, Py_ssize_t n) {
    if (n < 13 + 8)
        return protocol_error("ROCKETMQ header of %zd bytes is shorter than its fixed part", n);
    int16_t code = (int16_t)get16(d);
    int8_t lang = (int8_t)d[2];
    int16_t version = (int16_t)get16(d + 3);
    int32_t opaque = (int32_t)get32(d + 5), flag = (int32_t)get32(d + 9);
    Py_ssize_t pos = 13;
    int32_t rlen = (int32_t)get32(d + pos);
    pos += 4;
    if (rlen < 0 || pos + (Py_ssize_t)rlen + 4 > n)
        return protocol_error("ROCKETMQ header remark length %d exceeds the header", (int)rlen);
    PyObject *remark = NULL, *ext = NULL, *key = NULL, *val = NULL;
    if (rlen) {
        remark = PyUnicode_DecodeUTF8((const char *)d + pos, rlen, NULL);
        if (remark == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                protocol_error("ROCKETMQ header remark is not UTF-8");
            }
            return NULL;
        }
    }
    pos += rlen;
    int32_t elen = (int32_t)get32(d + pos);
    pos += 4;
    if (elen < 0 || pos + (Py_ssize_t)elen != n) {
        Py_XDECREF(remark);
        return protocol_error("ROCKETMQ header extFields length %d does not match the header", (int)elen);
    }
    /* count the entries first (lengths only) so the dict is made at its size, not grown twice */
    Py_ssize_t count = 0;
    for (Py_ssize_t q = pos; q + 2 <= n; count++) {
        q += 2 + get16(d + q);
        if (q + 4 > n)
            break;
        q += 4 + (Py_ssize_t)get32(d + q);
    }
    if ((ext = _PyDict_NewPresized(count)) == NULL)
        goto fail;
    /* As the Python loop: lengths are unsigned, slices stop at the end, a read past the end is "truncated". */
    while (pos < n) {
        if (pos + 2 > n)
            goto truncated;
        Py_ssize_t klen = get16(d + pos);
        pos += 2;
        Py_ssize_t kstart = pos, kend = pos + klen < n ? pos + klen : n;
        if ((key = decode_text((const char *)d + pos, kend - pos)) == NULL)
            goto text_error;
        pos += klen;
        if (pos + 4 > n)
            goto truncated;
        Py_ssize_t vlen = get32(d + pos);
        pos += 4;
        Py_ssize_t vend = pos + vlen < n ? pos + vlen : n;
        /* a one-byte key (whole: the value length after it was read) may reuse its last value */
        val = klen == 1 ? decode_value(d[kstart], (const char *)d + pos, vend - pos)
                        : decode_text((const char *)d + pos, vend - pos);
        if (val == NULL)
            goto text_error;
        if (PyDict_SetItem(ext, key, val) < 0)
            goto fail;
        Py_CLEAR(key);
        Py_CLEAR(val);
        pos += vlen;
    }
    if (pos != n) {
        protocol_error("extFields entry exceeds the header");
        goto fail;
    }
    PyObject *language;
    PyObject *lang_o = PyLong_FromLong(lang);
    if (lang_o == NULL)
        goto fail;
    int known = PySet_Contains(lang_known, lang_o);
    if (known < 0) {
        Py_DECREF(lang_o);
        goto fail;
    }
    if (known)
        language = lang_o;
    else {
        Py_DECREF(lang_o);
        language = lang_other;
        Py_INCREF(language);
    }
    PyObject *vals[F_COUNT] = {PyLong_FromLong(code), language, PyLong_FromLong(version), PyLong_FromLong(opaque),
                               PyLong_FromLong(flag), remark, ext, NULL, stype_rocketmq, PyLong_FromLong(0)};
    Py_INCREF(stype_rocketmq);
    if (vals[0] == NULL || vals[2] == NULL || vals[3] == NULL || vals[4] == NULL || vals[9] == NULL) {
        for (int i = 0; i < F_COUNT; i++)
            Py_XDECREF(vals[i]);
        return NULL;
    }
    return new_command(vals);
truncated:
    protocol_error("truncated extFields entry");
    goto fail;
text_error:
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        protocol_error("extFields entry is not UTF-8");
    }
fail:
    Py_XDECREF(key);
    Py_XDECREF(val);
    Py_XDECREF(ext);
    Py_XDECREF(remark);
    return NULL;
}

static PyObject *decode_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "decode_frames() takes exactly 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (ready() < 0)
        return NULL;
    Py_ssize_t pos = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (pos == -1 && PyErr_Occurred())
        return NULL;
    long long max_frame = PyLong_AsLongLong(args[2]), max_header;
    if (max_frame == -1 && PyErr_Occurred())
        return NULL;
    max_header = PyLong_AsLongLong(args[3]);
    if (max_header == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = PyList_New(0), *result = NULL;
    if (out == NULL)
        goto done;
    const unsigned char *src = view.buf;
    Py_ssize_t n = view.len;
    if (pos < 0)
        pos = 0;
    while (n - pos >= 4) {
        int32_t length = (int32_t)get32(src + pos);
        if (length < 4) {
            protocol_error("frame length %d is invalid (less than 4)", (int)length);
            goto done;
        }
        if (length > max_frame) {
            protocol_error("frame length %d is over the limit of %lld bytes", (int)length, max_frame);
            goto done;
        }
        if (n - pos < 8)
            break;
        uint32_t word = get32(src + pos + 4);
        unsigned stype = word >> 24;
        long long hlen = word & 0xFFFFFF;
        if (stype > 1) {
            protocol_error("unknown serialize type %u", stype);
            goto done;
        }
        if (hlen > (long long)length - 4) {
            protocol_error("header length %lld is longer than the frame (%d bytes)", hlen, (int)(length - 4));
            goto done;
        }
        if (hlen > max_header) {
            protocol_error("header length %lld is over the limit of %lld bytes", hlen, max_header);
            goto done;
        }
        Py_ssize_t end = pos + 4 + (Py_ssize_t)length;
        if (end > n)
            break;
        Py_ssize_t hstart = pos + 8;
        PyObject *cmd;
        if (stype == 0) {
            PyObject *hdr = PyBytes_FromStringAndSize((const char *)src + hstart, (Py_ssize_t)hlen);
            if (hdr == NULL)
                goto done;
            cmd = NULL;
            if (json_loads != NULL) {
                PyObject *obj = PyObject_CallOneArg(json_loads, hdr);
                if (obj == NULL)
                    PyErr_Clear();  /* json_decode says what is wrong with it */
                else {
                    cmd = json_command(obj);
                    Py_DECREF(obj);
                }
            }
            if (cmd == NULL)
                cmd = PyObject_CallOneArg(json_decode, hdr);
            Py_DECREF(hdr);
            if (cmd == NULL)
                goto done;
            if (!Py_IS_TYPE(cmd, cmd_type)) {
                PyErr_Format(PyExc_TypeError, "the JSON header decoder returned %.50s", Py_TYPE(cmd)->tp_name);
                Py_DECREF(cmd);
                goto done;
            }
        } else if ((cmd = decode_rocketmq(src + hstart, (Py_ssize_t)hlen)) == NULL)
            goto done;
        if (end > hstart + hlen) {
            PyObject *body = PyBytes_FromStringAndSize((const char *)src + hstart + hlen, end - hstart - hlen);
            if (body == NULL) {
                Py_DECREF(cmd);
                goto done;
            }
            set_slot(cmd, F_BODY, body);
        }
        PyObject *ws = PyLong_FromLongLong((long long)length + 4);
        if (ws == NULL) {
            Py_DECREF(cmd);
            goto done;
        }
        set_slot(cmd, F_WIRE, ws);
        int rc = PyList_Append(out, cmd);
        Py_DECREF(cmd);
        if (rc < 0)
            goto done;
        pos = end;
    }
    result = Py_BuildValue("(On)", out, pos);
done:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------------------------------------------- */
/* encoding */

typedef struct {
    const char *k, *v;
    Py_ssize_t klen, vlen;
} entry_t;

/* A str's UTF-8 (the str's own buffer for ASCII); NULL with no exception for a str that does not encode. */
const char *utf8_of(PyObject *s, Py_ssize_t *len) {
    const char *p = PyUnicode_AsUTF8AndSize(s, len);
    if (p == NULL)
        PyErr_Clear();  /* lone surrogates: the Python code raises the error */
    return p;
}

static int small_int(PyObject *o, long lo, long hi, long *out) {
    if (!PyLong_Check(o))
        return 0;
    int overflow;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

/* Appends the frame; 1 done, 0 left to the Python code (nothing appended), -1 error. With ``header_only`` the
 * ROCKETMQ header alone goes to *header_out (a new bytes) and ``out`` is not touched. */
static int encode_impl(PyObject *out, PyObject *cmd, int header_only, PyObject **header_out) {
    if (!Py_IS_TYPE(cmd, cmd_type))
        return 0;
    PyObject *stype = SLOT(cmd, F_STYPE);
    long st;
    if (stype == NULL || !small_int(stype, 0, 1, &st))
        return 0;
    if (header_only && st != 1)
        return 0;
    PyObject *body = SLOT(cmd, F_BODY);
    Py_buffer bview;
    int have_body = 0;
    if (!header_only && body != NULL && body != Py_None) {
        if (!(PyBytes_CheckExact(body) || PyByteArray_CheckExact(body)
              || (PyMemoryView_Check(body) && PyMemoryView_GET_BUFFER(body)->itemsize == 1)))
            return 0;
        if (PyObject_GetBuffer(body, &bview, PyBUF_SIMPLE) < 0) {
            PyErr_Clear();  /* not contiguous bytes */
            return 0;
        }
        have_body = 1;
    }
    int rc = 0;
    PyObject *jhdr = NULL;
    jbuf_t jb;
    jb.p = NULL;
    entry_t stack_entries[16], *entries = stack_entries;
    Py_ssize_t hlen;
    const char *remark = NULL;
    Py_ssize_t rlen = 0;
    long code, version, opaque, flag, lang;
    Py_ssize_t count = 0;
    jb.p = jb.stack;
    jb.len = 0;
    jb.cap = sizeof jb.stack;
    if (st == 0) {
        int r = json_header(&jb, cmd);
        if (r < 0) {
            rc = -1;
            goto done;
        }
        if (r == 0) {
            if ((jhdr = PyObject_CallOneArg(json_encode, cmd)) == NULL) {
                rc = -1;
                goto done;
            }
            if (!PyBytes_Check(jhdr))
                goto done;
            hlen = PyBytes_GET_SIZE(jhdr);
        } else
            hlen = jb.len;
    } else {
        PyObject *ext = SLOT(cmd, F_EXT), *rem = SLOT(cmd, F_REMARK);
        if (ext == NULL || !PyDict_CheckExact(ext) || rem == NULL)
            goto done;
        if (!small_int(SLOT(cmd, F_CODE), -0x8000, 0x7FFF, &code)
            || !small_int(SLOT(cmd, F_VERSION), -0x8000, 0x7FFF, &version)
            || !small_int(SLOT(cmd, F_OPAQUE), -0x7FFFFFFFL - 1, 0x7FFFFFFFL, &opaque)
            || !small_int(SLOT(cmd, F_FLAG), -0x7FFFFFFFL - 1, 0x7FFFFFFFL, &flag))
            goto done;
        PyObject *lo = SLOT(cmd, F_LANGUAGE);
        if (lo == NULL || !PyLong_Check(lo))
            goto done;
        if (!small_int(lo, 0, 127, &lang))
            lang = PyLong_AsLong(lang_other);
        if (rem != Py_None) {
            if (!PyUnicode_Check(rem))
                goto done;
            if (PyUnicode_GET_LENGTH(rem) && (remark = utf8_of(rem, &rlen)) == NULL)
                goto done;
        }
        Py_ssize_t size = PyDict_GET_SIZE(ext);
        if (size > 16 && (entries = PyMem_Malloc(sizeof(entry_t) * size)) == NULL) {
            PyErr_NoMemory();
            rc = -1;
            goto done;
        }
        Py_ssize_t i = 0;
        PyObject *k, *v;
        hlen = 13 + 4 + rlen + 4;
        while (PyDict_Next(ext, &i, &k, &v)) {
            if (v == Py_None)
                continue;
            if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v))
                goto done;
            entry_t *e = &entries[count];
            if ((e->k = utf8_of(k, &e->klen)) == NULL || e->klen > 0x7FFF || (e->v = utf8_of(v, &e->vlen)) == NULL
                || e->vlen > 0x7FFFFFFF)
                goto done;
            hlen += 2 + e->klen + 4 + e->vlen;
            count++;
        }
    }
    if (hlen > 0xFFFFFF)
        goto done;
    Py_ssize_t blen = have_body ? bview.len : 0;
    long long total = 4 + (long long)hlen + blen;
    if (total > 0x7FFFFFFF)
        goto done;
    unsigned char *p;
    if (header_only) {
        if ((*header_out = PyBytes_FromStringAndSize(NULL, hlen)) == NULL) {
            rc = -1;
            goto done;
        }
        p = (unsigned char *)PyBytes_AS_STRING(*header_out);
    } else {
        Py_ssize_t old = PyByteArray_GET_SIZE(out);
        if (PyByteArray_Resize(out, old + 8 + hlen + (Py_ssize_t)(blen ? blen : 0)) < 0) {
            rc = -1;
            goto done;
        }
        p = (unsigned char *)PyByteArray_AS_STRING(out) + old;
        put32(p, (uint32_t)total);
        put32(p + 4, ((uint32_t)st << 24) | (uint32_t)hlen);
        p += 8;
    }
    if (st == 0) {
        memcpy(p, jhdr != NULL ? PyBytes_AS_STRING(jhdr) : jb.p, hlen);
        p += hlen;
    } else {
        put16(p, (uint16_t)code);
        p[2] = (unsigned char)(int8_t)lang;
        put16(p + 3, (uint16_t)version);
        put32(p + 5, (uint32_t)opaque);
        put32(p + 9, (uint32_t)flag);
        put32(p + 13, (uint32_t)rlen);
        p += 17;
        if (rlen) {
            memcpy(p, remark, rlen);
            p += rlen;
        }
        put32(p, (uint32_t)(hlen - 13 - 4 - rlen - 4));
        p += 4;
        for (Py_ssize_t j = 0; j < count; j++) {
            entry_t *e = &entries[j];
            put16(p, (uint16_t)e->klen);
            memcpy(p + 2, e->k, e->klen);
            p += 2 + e->klen;
            put32(p, (uint32_t)e->vlen);
            memcpy(p + 4, e->v, e->vlen);
            p += 4 + e->vlen;
        }
    }
    if (blen)
        memcpy(p, bview.buf, blen);
    rc = 1;
done:
    if (entries != stack_entries)
        PyMem_Free(entries);
    if (jb.p != NULL && jb.p != jb.stack)
        PyMem_Free(jb.p);
    Py_XDECREF(jhdr);
    if (have_body)
        PyBuffer_Release(&bview);
    return rc;
}

static PyObject *encode_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "encode_into() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (ready() < 0)
        return NULL;
    if (!PyByteArray_CheckExact(args[0])) {
        PyErr_Format(PyExc_TypeError, "encode_into() argument 1 must be bytearray, not %.50s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    int rc = encode_impl(args[0], args[1], 0, NULL);
    if (rc < 0)
        return NULL;
    return PyBool_FromLong(rc);
}

static PyObject *rocketmq_header(PyObject *self, PyObject *cmd) {
    (void)self;
    if (ready() < 0)
        return NULL;
    PyObject *hdr = NULL;
    int rc = encode_impl(NULL, cmd, 1, &hdr);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        Py_RETURN_NONE;
    return hdr;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(command_type, remote_error, serialize_types, lang_known, lang_other, json_decode, json_encode)"},
    {"setup_json", setup_json, METH_VARARGS,
     "setup_json(loads, lang_by_name, lang_name): JSON headers are read from loads' object and written in C"},
    {"decode_frames", (PyCFunction)(void (*)(void))decode_frames, METH_FASTCALL,
     "decode_frames(src, pos, max_frame, max_header) -> (commands, pos)\n\n"
     "Decode the whole frames of src from pos; pos is where the first incomplete frame starts."},
    {"encode_into", (PyCFunction)(void (*)(void))encode_into, METH_FASTCALL,
     "encode_into(out, cmd) -> bool\n\nAppend cmd's frame to the bytearray out; False (nothing appended) for a "
     "command the Python encoder must handle."},
    {"rocketmq_header", rocketmq_header, METH_O,
     "rocketmq_header(cmd) -> bytes | None\n\nThe ROCKETMQ binary header of cmd; None where the Python encoder "
     "must handle it."},
    {"header_spec", header_spec, METH_VARARGS,
     "header_spec(cls, fields) -> capsule\n\nWhat header_from_ext and header_to_ext need of a header class."},
    {"header_from_ext", (PyCFunction)(void (*)(void))header_from_ext, METH_FASTCALL,
     "header_from_ext(spec, cls, ext) -> header | None\n\nThe header read from ext; None for the Python code to decide."},
    {"header_to_ext", (PyCFunction)(void (*)(void))header_to_ext, METH_FASTCALL,
     "header_to_ext(spec, header) -> dict | None\n\nThe header's extFields; None for the Python code to decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mq.protocol._codec", NULL, -1, methods};

PyMODINIT_FUNC PyInit__codec(void) {
    if (headers_init() < 0)
        return NULL;
    for (int c = 0; c < 128; c++) {
        char ch = (char)c;
        if ((short_keys[c] = PyUnicode_DecodeUTF8(&ch, 1, NULL)) == NULL)
            return NULL;
        PyUnicode_InternInPlace(&short_keys[c]);
    }
    return PyModule_Create(&module);
}
