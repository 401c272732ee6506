/*
 * Java String.hashCode over the UTF-16 code units of a Python str, shared by the store's C extensions.
 * Characters beyond the BMP count as their surrogate pair, as in a Java string; lone surrogates (which a str
 * may hold) count as themselves.
 */
#ifndef MQ_STORE_JHASH_H
#define MQ_STORE_JHASH_H

#include <Python.h>
#include <stdint.h>

/* h continued over the code units of s[from:to] (h * 31**units + hash of the units, mod 2**32) */
static inline uint32_t jhash_continue(uint32_t h, PyObject *s, Py_ssize_t from, Py_ssize_t to) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (Py_ssize_t i = from; i < to; i++)
            h = 31u * h + p[i];
        return h;
    }
    for (Py_ssize_t i = from; i < to; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0x10000) {
            c -= 0x10000;
            h = 31u * h + (uint32_t)(0xD800 + (c >> 10));
            h = 31u * h + (uint32_t)(0xDC00 + (c & 0x3FF));
        } else {
            h = 31u * h + (uint32_t)c;
        }
    }
    return h;
}

#endif
