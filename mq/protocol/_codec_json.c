/*
 * mq.protocol._codec, the JSON header both ways (see _codec.c for the module's whole contract).
 *
 * Reading: decode_frames hands the object orjson.loads made of a header to json_command, which builds the
 * command of the usual kind (four int32 numbers, a language name or code, a text remark, extFields of text);
 * anything else goes back to the Python decoder (codec.decode_json_header), which decodes or refuses it.
 *
 * Writing: json_header writes what codec.encode_json_header has orjson write: fastjson's key order, orjson's
 * compact form and escapes; a command it does not take goes to the Python encoder.
 */
#include "_codec.h"

/* setup_json(): orjson.loads, {language name: code} and {code: name}; NULL until then (every JSON header goes to
 * the Python code) */
PyObject *json_loads;
static PyObject *lang_by_name, *lang_name, *s_code, *s_language, *s_version, *s_opaque, *s_flag, *s_remark, *s_ext,
    *s_java;

/* ---- reading ------------------------------------------------------------------------------------------ */

PyObject *setup_json(PyObject *self, PyObject *args) {
    PyObject *loads, *by_name, *names;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!O!:setup_json", &loads, &PyDict_Type, &by_name, &PyDict_Type, &names))
        return NULL;
    if (s_code == NULL) {
        if ((s_code = PyUnicode_InternFromString("code")) == NULL
            || (s_language = PyUnicode_InternFromString("language")) == NULL
            || (s_version = PyUnicode_InternFromString("version")) == NULL
            || (s_opaque = PyUnicode_InternFromString("opaque")) == NULL
            || (s_flag = PyUnicode_InternFromString("flag")) == NULL
            || (s_remark = PyUnicode_InternFromString("remark")) == NULL
            || (s_ext = PyUnicode_InternFromString("extFields")) == NULL
            || (s_java = PyUnicode_InternFromString("JAVA")) == NULL)
            return NULL;
    }
    Py_INCREF(loads); Py_XSETREF(json_loads, loads);
    Py_INCREF(by_name); Py_XSETREF(lang_by_name, by_name);
    Py_INCREF(names); Py_XSETREF(lang_name, names);
    Py_RETURN_NONE;
}

/* an int32 field of a JSON header: 1 and *out set, or 0 for anything decode_json_header must judge (missing
 * without a default, not an exact int, out of range) */
static int json_int(PyObject *obj, PyObject *key, int has_default, PyObject **out) {
    PyObject *v = PyDict_GetItemWithError(obj, key);
    if (v == NULL) {
        if (PyErr_Occurred() || !has_default)
            return 0;
        *out = PyLong_FromLong(0);
        return *out != NULL;
    }
    if (!PyLong_CheckExact(v))
        return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x < INT32_MIN || x > INT32_MAX)
        return 0;
    Py_INCREF(v);
    *out = v;
    return 1;
}

/* decode_json_header's usual case over the object orjson parsed: four int32 numbers, a language name or code, a
 * remark that is text or absent, extFields whose values are all text. NULL without an exception for anything
 * else, which the Python function then decodes or refuses (it parses the header again: that is rare). */
PyObject *json_command(PyObject *obj) {
    if (!PyDict_CheckExact(obj))
        return NULL;
    PyObject *vals[F_COUNT] = {NULL};
    if (!json_int(obj, s_code, 0, &vals[F_CODE]) || !json_int(obj, s_opaque, 1, &vals[F_OPAQUE])
        || !json_int(obj, s_flag, 1, &vals[F_FLAG]) || !json_int(obj, s_version, 1, &vals[F_VERSION]))
        goto other;
    PyObject *lang = PyDict_GetItemWithError(obj, s_language), *language = NULL;
    if (lang == NULL) {
        if (PyErr_Occurred())
            goto other;
        lang = s_java;
    }
    if (PyUnicode_CheckExact(lang)) {
        language = PyDict_GetItemWithError(lang_by_name, lang);
        if (language == NULL && PyErr_Occurred())
            goto other;
    } else if (PyLong_CheckExact(lang)) {
        int known = PySet_Contains(lang_known, lang);
        if (known < 0)
            goto other;
        if (known)
            language = lang;
    }
    if (language == NULL)
        language = lang_other;
    Py_INCREF(language);
    vals[F_LANGUAGE] = language;
    PyObject *remark = PyDict_GetItemWithError(obj, s_remark);
    if (remark == NULL && PyErr_Occurred())
        goto other;
    if (remark != NULL && remark != Py_None) {
        if (!PyUnicode_CheckExact(remark))
            goto other;
        Py_INCREF(remark);
        vals[F_REMARK] = remark;
    }
    PyObject *ext = PyDict_GetItemWithError(obj, s_ext);
    if (ext == NULL && PyErr_Occurred())
        goto other;
    if (ext == NULL || ext == Py_None) {
        if ((ext = PyDict_New()) == NULL)
            goto other;
    } else {
        if (!PyDict_CheckExact(ext))
            goto other;
        Py_ssize_t i = 0;
        PyObject *k, *v;
        while (PyDict_Next(ext, &i, &k, &v))
            if (!PyUnicode_CheckExact(v))
                goto other;
        Py_INCREF(ext);
    }
    vals[F_EXT] = ext;
    Py_INCREF(stype_json);
    vals[F_STYPE] = stype_json;
    if ((vals[F_WIRE] = PyLong_FromLong(0)) == NULL)
        goto other;
    return new_command(vals);
other:
    for (int i = 0; i < F_COUNT; i++)
        Py_XDECREF(vals[i]);
    PyErr_Clear();
    return NULL;
}

/* ---- writing, as encode_json_header has orjson write it -------------------------------------------------- */

static int jb_reserve(jbuf_t *b, Py_ssize_t more) {
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = (b->len + more) * 2;
    char *p = b->p == b->stack ? PyMem_Malloc(cap) : PyMem_Realloc(b->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->p == b->stack)
        memcpy(p, b->stack, b->len);
    b->p = p;
    b->cap = cap;
    return 0;
}

static int jb_raw(jbuf_t *b, const char *s, Py_ssize_t n) {
    if (jb_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* a JSON string as orjson writes it: '"', '\\' and control characters escaped (\b \t \n \f \r, else \u00xx
 * in lowercase), everything else (DEL, '/', non-ASCII) as its UTF-8 */
static int jb_str(jbuf_t *b, const char *s, Py_ssize_t n) {
    if (jb_reserve(b, n * 6 + 2) < 0)
        return -1;
    char *o = b->p + b->len;
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\t': *o++ = 't'; break;
        case '\n': *o++ = 'n'; break;
        case '\f': *o++ = 'f'; break;
        case '\r': *o++ = 'r'; break;
        default:
            *o++ = 'u'; *o++ = '0'; *o++ = '0';
            *o++ = "0123456789abcdef"[c >> 4];
            *o++ = "0123456789abcdef"[c & 15];
        }
    }
    *o++ = '"';
    b->len = o - b->p;
    return 0;
}

/* "key": the header's fixed keys are plain ASCII */
#define JB_KEY(b, lit) jb_raw(b, lit, (Py_ssize_t)sizeof(lit) - 1)

static int jb_int(jbuf_t *b, PyObject *o) {  /* 1, 0 for a number orjson writes otherwise, -1 */
    if (!PyLong_Check(o) || PyBool_Check(o))
        return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    return jb_raw(b, tmp, n) < 0 ? -1 : 1;
}

/* The JSON header of ``cmd`` into ``b``: 1, 0 for a command encode_json_header must judge (a value not text,
 * text that is not UTF-8, a number out of 64 bits, a language that is no int), -1 on an error. */
int json_header(jbuf_t *b, PyObject *cmd) {
    if (lang_name == NULL)
        return 0;
    PyObject *ext = SLOT(cmd, F_EXT), *rem = SLOT(cmd, F_REMARK), *lang = SLOT(cmd, F_LANGUAGE);
    if (ext == NULL || !PyDict_CheckExact(ext) || rem == NULL || lang == NULL || !PyLong_Check(lang))
        return 0;
    const char *rs = NULL;
    Py_ssize_t rn = 0;
    if (rem != Py_None) {
        if (!PyUnicode_CheckExact(rem) || (rs = utf8_of(rem, &rn)) == NULL)
            return 0;
    }
    PyObject *name = PyDict_GetItemWithError(lang_name, lang);
    if (name == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    const char *ls = "OTHER";
    Py_ssize_t ln = 5;
    if (name != NULL && (!PyUnicode_CheckExact(name) || (ls = utf8_of(name, &ln)) == NULL))
        return 0;
    int r;
    if (JB_KEY(b, "{\"code\":") < 0)
        return -1;
    if ((r = jb_int(b, SLOT(cmd, F_CODE))) <= 0)
        return r;
    if (JB_KEY(b, ",\"extFields\":{") < 0)
        return -1;
    Py_ssize_t i = 0, first = 1;
    PyObject *k, *v;
    while (PyDict_Next(ext, &i, &k, &v)) {
        Py_ssize_t kn, vn;
        const char *ks, *vs;
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v) || (ks = utf8_of(k, &kn)) == NULL
            || (vs = utf8_of(v, &vn)) == NULL)
            return 0;
        if ((!first && jb_raw(b, ",", 1) < 0) || jb_str(b, ks, kn) < 0 || jb_raw(b, ":", 1) < 0
            || jb_str(b, vs, vn) < 0)
            return -1;
        first = 0;
    }
    if (JB_KEY(b, "},\"flag\":") < 0)
        return -1;
    if ((r = jb_int(b, SLOT(cmd, F_FLAG))) <= 0)
        return r;
    if (JB_KEY(b, ",\"language\":") < 0 || jb_str(b, ls, ln) < 0 || JB_KEY(b, ",\"opaque\":") < 0)
        return -1;
    if ((r = jb_int(b, SLOT(cmd, F_OPAQUE))) <= 0)
        return r;
    if (rs != NULL && (JB_KEY(b, ",\"remark\":") < 0 || jb_str(b, rs, rn) < 0))
        return -1;
    if (JB_KEY(b, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":") < 0)
        return -1;
    if ((r = jb_int(b, SLOT(cmd, F_VERSION))) <= 0)
        return r;
    return JB_KEY(b, "}") < 0 ? -1 : 1;
}
