/*
 * Canonical serialisation (OpenClaw's stableStringify, docs/detection-rules.md §4.1) in C.
 *
 * canonical_bytes(value, number_text, undefined) -> bytes (UTF-8)
 *
 *   value        JSON data as Python decodes it: dict (str keys), list, tuple,
 *                str, int, float, bool, None, or the `undefined` sentinel.
 *   number_text  callable(number) -> str, used for floats and for integers
 *                beyond +-2**53 (JavaScript number formatting lives in Python,
 *                where it is tested; such numbers are rare in tool payloads).
 *   undefined    the sentinel written as the bare word `undefined`.
 *
 * Raises TypeError for anything else (bytes, other types, non-str keys, nesting
 * deeper than MAX_DEPTH, which also catches cycles): the caller then uses the
 * pure-Python serialiser, which handles those. The output is byte-identical
 * to streams.detection.canonical._exact_text(value).encode("utf-8").
 *
 * digest_hex(value, number_text, undefined, prefix[, needle]) -> str | None
 *
 *   prefix + lower-case hex SHA-256 of those bytes, in one call (built only
 *   where OpenSSL's headers are present; the Python side uses hashlib else).
 *   With `needle` (bytes): None instead when the canonical text contains it
 *   (the 2026.9.6 outcome digest then takes the normalising Python path).
 *
 * fields_typed(event, strings, numbers, booleans) -> bool
 *
 *   Whether every field named in the three tuples of str is absent from the dict
 *   `event`, None, or of its kind: exactly str; int or float but not bool; bool.
 *   False sends the caller to its own checks, which say which field and why
 *   (streams.detection.events: the schema check every event passes through).
 *
 * Size: one walk serves both entry points, with its string escaping and key order; split, the static helpers
 * would need a header of their own for no reader's gain.
 *
 * Object keys sort by UTF-16 code unit, as JavaScript's default sort does.
 * Strings are escaped as JSON.stringify does: \" \\ \b \f \n \r \t, other
 * code points below U+0020 as \u00xx, lone surrogates as \udxxx, all else raw.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#ifdef LOOPWATCH_OPENSSL
#include <openssl/evp.h>
#endif
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 200
#define MAX_SAFE_INT 9007199254740992LL /* 2**53 */

/* The output buffer starts in the caller's stack frame (STACK_BUF bytes: most tool payloads fit, so most
 * calls allocate nothing) and moves to the heap when it outgrows it. */
#define STACK_BUF 16384

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
    char *stack; /* the initial buffer, not to be freed */
} Buf;

#define BUF_ON_STACK(name, space) char space[STACK_BUF]; Buf name = {space, 0, STACK_BUF, space}

static void buf_free(Buf *b) {
    if (b->data != b->stack) PyMem_Free(b->data);
}

static int buf_grow(Buf *b, Py_ssize_t extra) {
    Py_ssize_t need = b->len + extra;
    if (need <= b->cap) return 0;
    Py_ssize_t cap = b->cap;
    while (cap < need) cap *= 2;
    char *data;
    if (b->data == b->stack) {
        data = PyMem_Malloc((size_t)cap);
        if (data) memcpy(data, b->data, (size_t)b->len);
    } else {
        data = PyMem_Realloc(b->data, (size_t)cap);
    }
    if (!data) { PyErr_NoMemory(); return -1; }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_grow(b, n) < 0) return -1;
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

static inline int buf_byte(Buf *b, char c) {
    if (b->len >= b->cap && buf_grow(b, 1) < 0) return -1;
    b->data[b->len++] = c;
    return 0;
}

static const char HEX[] = "0123456789abcdef";

static int put_u_escape(Buf *b, Py_UCS4 c) {
    char esc[6] = {'\\', 'u', HEX[(c >> 12) & 0xf], HEX[(c >> 8) & 0xf], HEX[(c >> 4) & 0xf], HEX[c & 0xf]};
    return buf_put(b, esc, 6);
}

static int put_escape_ascii(Buf *b, unsigned char c) {
    switch (c) {
    case '"': return buf_put(b, "\\\"", 2);
    case '\\': return buf_put(b, "\\\\", 2);
    case '\b': return buf_put(b, "\\b", 2);
    case '\f': return buf_put(b, "\\f", 2);
    case '\n': return buf_put(b, "\\n", 2);
    case '\r': return buf_put(b, "\\r", 2);
    case '\t': return buf_put(b, "\\t", 2);
    default: return put_u_escape(b, c);
    }
}

/* Word-at-a-time test for a byte that needs escaping: < 0x20, '"' or '\\'
 * (the classic "has zero byte" bit trick). Exact: no false negatives, and a
 * hit only sends that word through the byte loop. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline int word_needs_escape(uint64_t x) {
    uint64_t below_space = (x - ONES * 0x20) & ~x & HIGHS;
    uint64_t q = x ^ (ONES * '"');
    uint64_t quote = (q - ONES) & ~q & HIGHS;
    uint64_t bs = x ^ (ONES * '\\');
    uint64_t backslash = (bs - ONES) & ~bs & HIGHS;
    return (below_space | quote | backslash) != 0;
}

/* UTF-8 bytes of a string without lone surrogates: copy runs, escape specials. */
static int put_utf8_escaped(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_grow(b, n + 2) < 0) return -1;
    b->data[b->len++] = '"';
    Py_ssize_t start = 0, i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (!word_needs_escape(word)) { i += 8; continue; }
        }
        Py_ssize_t end = i + 8 <= n ? i + 8 : n;
        for (; i < end; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x20 || c == '"' || c == '\\') {
                if (buf_put(b, s + start, i - start) < 0) return -1;
                if (put_escape_ascii(b, c) < 0) return -1;
                start = i + 1;
            }
        }
    }
    if (buf_put(b, s + start, n - start) < 0) return -1;
    return buf_byte(b, '"');
}

/* Code point by code point, for strings holding lone surrogates. */
static int put_codepoints_escaped(Buf *b, PyObject *str) {
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    if (buf_byte(b, '"') < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        char out[4];
        if (c < 0x80) {
            if (c < 0x20 || c == '"' || c == '\\') {
                if (put_escape_ascii(b, (unsigned char)c) < 0) return -1;
            } else if (buf_byte(b, (char)c) < 0) return -1;
        } else if (c < 0x800) {
            out[0] = (char)(0xc0 | (c >> 6));
            out[1] = (char)(0x80 | (c & 0x3f));
            if (buf_put(b, out, 2) < 0) return -1;
        } else if (c >= 0xd800 && c <= 0xdfff) {
            if (put_u_escape(b, c) < 0) return -1;
        } else if (c < 0x10000) {
            out[0] = (char)(0xe0 | (c >> 12));
            out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
            out[2] = (char)(0x80 | (c & 0x3f));
            if (buf_put(b, out, 3) < 0) return -1;
        } else {
            out[0] = (char)(0xf0 | (c >> 18));
            out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
            out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
            out[3] = (char)(0x80 | (c & 0x3f));
            if (buf_put(b, out, 4) < 0) return -1;
        }
    }
    return buf_byte(b, '"');
}

static int put_string(Buf *b, PyObject *str) {
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(str, &n);
    if (utf8 != NULL) return put_utf8_escaped(b, utf8, n);
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
    PyErr_Clear(); /* lone surrogates */
    return put_codepoints_escaped(b, str);
}

/* ---- UTF-16 code-unit order of two str objects ---- */

static inline Py_UCS4 unit_at(int kind, const void *data, Py_ssize_t n, Py_ssize_t *i, int *trail) {
    Py_UCS4 c = PyUnicode_READ(kind, data, *i);
    if (c < 0x10000) { (*i)++; return c; }
    c -= 0x10000;
    if (*trail) { *trail = 0; (*i)++; return 0xdc00 + (c & 0x3ff); }
    *trail = 1;
    return 0xd800 + (c >> 10);
}

static int utf16_compare(PyObject *a, PyObject *b) {
    int ka = PyUnicode_KIND(a), kb = PyUnicode_KIND(b);
    Py_ssize_t na = PyUnicode_GET_LENGTH(a), nb = PyUnicode_GET_LENGTH(b);
    if (ka == PyUnicode_1BYTE_KIND && kb == PyUnicode_1BYTE_KIND) {
        Py_ssize_t m = na < nb ? na : nb;
        int r = memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)m);
        if (r) return r;
        return (na > nb) - (na < nb);
    }
    const void *da = PyUnicode_DATA(a), *db = PyUnicode_DATA(b);
    Py_ssize_t i = 0, j = 0;
    int ta = 0, tb = 0;
    while (i < na && j < nb) {
        Py_UCS4 ua = unit_at(ka, da, na, &i, &ta);
        Py_UCS4 ub = unit_at(kb, db, nb, &j, &tb);
        if (ua != ub) return ua < ub ? -1 : 1;
    }
    int a_left = i < na, b_left = j < nb;
    return a_left - b_left;
}

typedef struct {
    PyObject *key;
    PyObject *value;
} Item;

static int item_compare(const void *x, const void *y) {
    return utf16_compare(((const Item *)x)->key, ((const Item *)y)->key);
}

/* ---- the walk ---- */

static int put_value(Buf *b, PyObject *o, PyObject *number_text, PyObject *undefined, int depth);

static int put_number_via(Buf *b, PyObject *o, PyObject *number_text) {
    PyObject *text = PyObject_CallOneArg(number_text, o);
    if (!text) return -1;
    if (!PyUnicode_Check(text)) {
        Py_DECREF(text);
        PyErr_SetString(PyExc_TypeError, "number_text must return str");
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    int rc = s ? buf_put(b, s, n) : -1;
    Py_DECREF(text);
    return rc;
}

static int put_dict(Buf *b, PyObject *o, PyObject *number_text, PyObject *undefined, int depth) {
    Py_ssize_t n = PyDict_GET_SIZE(o);
    if (n == 0) return buf_put(b, "{}", 2);
    Item stack_items[16];
    Item *items = n <= 16 ? stack_items : PyMem_Malloc(sizeof(Item) * (size_t)n);
    if (!items) { PyErr_NoMemory(); return -1; }
    Py_ssize_t pos = 0, count = 0;
    PyObject *key, *value;
    int rc = 0;
    while (PyDict_Next(o, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            PyErr_SetString(PyExc_TypeError, "non-str key");
            rc = -1;
            break;
        }
        items[count].key = key;
        items[count].value = value;
        count++;
    }
    if (rc == 0) {
        /* Borrowed references stay valid: nothing below mutates the dict. */
        if (count > 1) qsort(items, (size_t)count, sizeof(Item), item_compare);
        rc = buf_byte(b, '{');
        for (Py_ssize_t i = 0; rc == 0 && i < count; i++) {
            if (i && buf_byte(b, ',') < 0) { rc = -1; break; }
            if (put_string(b, items[i].key) < 0 || buf_byte(b, ':') < 0 ||
                put_value(b, items[i].value, number_text, undefined, depth + 1) < 0) rc = -1;
        }
        if (rc == 0) rc = buf_byte(b, '}');
    }
    if (items != stack_items) PyMem_Free(items);
    return rc;
}

static int put_value(Buf *b, PyObject *o, PyObject *number_text, PyObject *undefined, int depth) {
    if (depth > MAX_DEPTH) {
        PyErr_SetString(PyExc_TypeError, "nesting too deep");
        return -1;
    }
    if (PyUnicode_CheckExact(o)) return put_string(b, o);
    if (o == Py_None) return buf_put(b, "null", 4);
    if (o == Py_True) return buf_put(b, "true", 4);
    if (o == Py_False) return buf_put(b, "false", 5);
    if (o == undefined) return buf_put(b, "undefined", 9);
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow || v > MAX_SAFE_INT || v < -MAX_SAFE_INT) return put_number_via(b, o, number_text);
        char digits[24];
        int len = snprintf(digits, sizeof digits, "%lld", v);
        return buf_put(b, digits, len);
    }
    if (PyFloat_CheckExact(o)) return put_number_via(b, o, number_text);
    if (PyDict_CheckExact(o)) return put_dict(b, o, number_text, undefined, depth);
    if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
        PyObject *seq = o;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        PyObject **items = PySequence_Fast_ITEMS(seq);
        if (buf_byte(b, '[') < 0) return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i && buf_byte(b, ',') < 0) return -1;
            /* A list may change under a callback: re-read size and items. */
            if (PyList_CheckExact(seq) && i >= PyList_GET_SIZE(seq)) break;
            items = PySequence_Fast_ITEMS(seq);
            PyObject *item = items[i];
            Py_INCREF(item);
            int rc = put_value(b, item, number_text, undefined, depth + 1);
            Py_DECREF(item);
            if (rc < 0) return -1;
        }
        return buf_byte(b, ']');
    }
    PyErr_Format(PyExc_TypeError, "unsupported type %.100s", Py_TYPE(o)->tp_name);
    return -1;
}

static PyObject *canonical_bytes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "canonical_bytes(value, number_text, undefined)");
        return NULL;
    }
    BUF_ON_STACK(b, space);
    if (put_value(&b, args[0], args[1], args[2], 0) < 0) {
        buf_free(&b);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(b.data, b.len);
    buf_free(&b);
    return out;
}

#ifdef LOOPWATCH_OPENSSL
static EVP_MD *sha256_md = NULL; /* fetched once: implicit fetches cost per call in OpenSSL 3 */
/* One digest context, reused: no Python code runs while it is in use (the GIL is held from init to final). */
static EVP_MD_CTX *sha256_ctx = NULL;

static int contains(const char *hay, Py_ssize_t hay_len, const char *needle, Py_ssize_t needle_len) {
    if (needle_len == 0) return 1;
    for (Py_ssize_t i = 0; i + needle_len <= hay_len; i++) {
        const char *hit = memchr(hay + i, needle[0], (size_t)(hay_len - needle_len - i + 1));
        if (!hit) return 0;
        i = hit - hay;
        if (memcmp(hit, needle, (size_t)needle_len) == 0) return 1;
    }
    return 0;
}

static PyObject *digest_hex(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 4 && nargs != 5) || !PyUnicode_Check(args[3]) || (nargs == 5 && !PyBytes_Check(args[4]))) {
        PyErr_SetString(PyExc_TypeError, "digest_hex(value, number_text, undefined, prefix: str[, needle: bytes])");
        return NULL;
    }
    BUF_ON_STACK(b, space);
    if (put_value(&b, args[0], args[1], args[2], 0) < 0) {
        buf_free(&b);
        return NULL;
    }
    if (nargs == 5 && contains(b.data, b.len, PyBytes_AS_STRING(args[4]), PyBytes_GET_SIZE(args[4]))) {
        buf_free(&b);
        Py_RETURN_NONE;
    }
    unsigned char md[32];
    unsigned int md_len = 0;
    int ok = EVP_DigestInit_ex2(sha256_ctx, sha256_md, NULL) && EVP_DigestUpdate(sha256_ctx, b.data, (size_t)b.len)
             && EVP_DigestFinal_ex(sha256_ctx, md, &md_len);
    buf_free(&b);
    if (!ok || md_len != 32) {
        PyErr_SetString(PyExc_RuntimeError, "SHA-256 failed");
        return NULL;
    }
    Py_ssize_t plen;
    const char *prefix = PyUnicode_AsUTF8AndSize(args[3], &plen);
    if (!prefix) return NULL;
    if (!PyUnicode_IS_ASCII(args[3])) {
        PyObject *hex = PyUnicode_New(64, 127);
        if (!hex) return NULL;
        Py_UCS1 *h = PyUnicode_1BYTE_DATA(hex);
        for (int i = 0; i < 32; i++) { h[2 * i] = HEX[md[i] >> 4]; h[2 * i + 1] = HEX[md[i] & 0xf]; }
        PyObject *out = PyUnicode_Concat(args[3], hex);
        Py_DECREF(hex);
        return out;
    }
    PyObject *out = PyUnicode_New(plen + 64, 127);
    if (!out) return NULL;
    Py_UCS1 *o = PyUnicode_1BYTE_DATA(out);
    memcpy(o, prefix, (size_t)plen);
    for (int i = 0; i < 32; i++) {
        o[plen + 2 * i] = HEX[md[i] >> 4];
        o[plen + 2 * i + 1] = HEX[md[i] & 0xf];
    }
    return out;
}
#endif

/* ---- the event schema's field types ---- */

static int fields_of_kind(PyObject *event, PyObject *names, int kind) {
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyDict_GetItemWithError(event, PyTuple_GET_ITEM(names, i));
        if (value == NULL) {
            if (PyErr_Occurred()) return -1;
            continue;
        }
        if (value == Py_None) continue;
        if (kind == 0 ? !PyUnicode_CheckExact(value)
            : kind == 1 ? PyBool_Check(value) || !(PyLong_Check(value) || PyFloat_Check(value))
            : !PyBool_Check(value)) return 0;
    }
    return 1;
}

static PyObject *fields_typed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyDict_Check(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2])
        || !PyTuple_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "fields_typed(event: dict, strings, numbers, booleans: tuple)");
        return NULL;
    }
    for (int kind = 0; kind < 3; kind++) {
        int ok = fields_of_kind(args[0], args[1 + kind], kind);
        if (ok < 0) return NULL;
        if (!ok) Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"canonical_bytes", (PyCFunction)(void (*)(void))canonical_bytes, METH_FASTCALL,
     "canonical_bytes(value, number_text, undefined) -> bytes: OpenClaw's canonical text, UTF-8."},
    {"fields_typed", (PyCFunction)(void (*)(void))fields_typed, METH_FASTCALL,
     "fields_typed(event, strings, numbers, booleans) -> bool: every named field absent, None or of its kind."},
#ifdef LOOPWATCH_OPENSSL
    {"digest_hex", (PyCFunction)(void (*)(void))digest_hex, METH_FASTCALL,
     "digest_hex(value, number_text, undefined, prefix[, needle]) -> str | None: prefix + hex SHA-256 of the "
     "canonical text (None when it contains needle)."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_canonical", NULL, -1, methods};

PyMODINIT_FUNC PyInit__canonical(void) {
#ifdef LOOPWATCH_OPENSSL
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    sha256_ctx = EVP_MD_CTX_new();
    if (!sha256_md || !sha256_ctx) {
        PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA256");
        return NULL;
    }
#endif
    return PyModule_Create(&module);
}
