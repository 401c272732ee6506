/*
 * What the parts of mq.protocol._codec share: _codec.c (setup, the frame loop, the ROCKETMQ binary header,
 * frame encoding, the module), _codec_json.c (the JSON header both ways) and _codec_headers.c (the typed
 * headers' from_ext and to_ext).
 */
#ifndef MQ_CODEC_H
#define MQ_CODEC_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* RemotingCommand's slots, in this order */
enum { F_CODE, F_LANGUAGE, F_VERSION, F_OPAQUE, F_FLAG, F_REMARK, F_EXT, F_BODY, F_STYPE, F_WIRE, F_COUNT };

/* set by setup() (_codec.c) */
extern Py_ssize_t slot_off[F_COUNT];
extern PyTypeObject *cmd_type;
extern PyObject *stype_json, *lang_known, *lang_other;

#define SLOT(o, f) (*(PyObject **)((char *)(o) + slot_off[f]))

/* a RemotingCommand with every slot set (the values are stolen; NULL ones become None) */
PyObject *new_command(PyObject *vals[F_COUNT]);
/* A str's UTF-8 (the str's own buffer for ASCII); NULL with no exception for a str that does not encode. */
const char *utf8_of(PyObject *s, Py_ssize_t *len);

/* _codec_json.c */
extern PyObject *json_loads;  /* orjson.loads once setup_json() ran, else NULL */
PyObject *setup_json(PyObject *self, PyObject *args);
PyObject *json_command(PyObject *obj);

typedef struct {
    char *p;
    Py_ssize_t len, cap;
    char stack[1024];
} jbuf_t;

int json_header(jbuf_t *b, PyObject *cmd);

/* _codec_headers.c */
int headers_init(void);
PyObject *header_spec(PyObject *self, PyObject *args);
PyObject *header_from_ext(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *header_to_ext(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#endif
