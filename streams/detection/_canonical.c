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
 * plain_outcome_hex(number_text, undefined, result, needle) -> str | None
 *
 *   The hex SHA-256 of the plain outcome fingerprint {"details": ..., "text": ...}
 *   of a tool result (docs/detection-rules.md §4.3 rule 8) for the usual shape: a
 *   dict whose `content` is a list of one dict block with str `text` (ASCII) and
 *   `type`, and whose `details` is a dict or absent; None for anything else, a
 *   `status` of "blocked", `changed` false, or a canonical text holding `needle` (bytes, or None
 *   for no needle): the caller then takes its Python path (streams.detection.recording).
 *
 * event_kind(event, kinds, strings, numbers, booleans, profiles) -> str | None
 *
 *   The `type` of a dict event that passes the schema check of
 *   streams.detection.events.validate_event, for the usual event: `type` one of
 *   `kinds`; every field named in the next three tuples absent, None, or of its
 *   kind (exactly str; int or float but not bool; bool); a session id or key
 *   unless it is a tool_result; not judged: false with ran_without_verdict: true;
 *   `profile` absent, None or one of `profiles`. None: the Python check decides
 *   (and says which field and why).
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
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
#ifdef __SSE2__
    /* 16 bytes at a time: the usual string has nothing to escape */
    const __m128i below = _mm_set1_epi8(0x1f), quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    while (i + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(v, below), below),
                                   _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
        int mask = _mm_movemask_epi8(hit);
        if (!mask) { i += 16; continue; }
        Py_ssize_t at = i + __builtin_ctz((unsigned)mask);
        if (buf_put(b, s + start, at - start) < 0) return -1;
        if (put_escape_ascii(b, (unsigned char)s[at]) < 0) return -1;
        start = i = at + 1;
    }
#endif
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
        int len = 0;
        unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
        do { digits[sizeof digits - 1 - len++] = (char)('0' + u % 10); u /= 10; } while (u);
        if (v < 0) digits[sizeof digits - 1 - len++] = '-';
        return buf_put(b, digits + sizeof digits - len, len);
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

/* prefix (NULL: none) + lower-case hex SHA-256 of the buffer's bytes, as a new str. */
static PyObject *sha256_hex(Buf *b, PyObject *prefix) {
    unsigned char md[32];
    unsigned int md_len = 0;
    int ok = EVP_DigestInit_ex2(sha256_ctx, sha256_md, NULL) && EVP_DigestUpdate(sha256_ctx, b->data, (size_t)b->len)
             && EVP_DigestFinal_ex(sha256_ctx, md, &md_len);
    if (!ok || md_len != 32) {
        PyErr_SetString(PyExc_RuntimeError, "SHA-256 failed");
        return NULL;
    }
    Py_ssize_t plen = 0;
    const char *head = "";
    if (prefix != NULL) {
        head = PyUnicode_AsUTF8AndSize(prefix, &plen);
        if (!head) return NULL;
        if (!PyUnicode_IS_ASCII(prefix)) {
            PyObject *hex = PyUnicode_New(64, 127);
            if (!hex) return NULL;
            Py_UCS1 *h = PyUnicode_1BYTE_DATA(hex);
            for (int i = 0; i < 32; i++) { h[2 * i] = HEX[md[i] >> 4]; h[2 * i + 1] = HEX[md[i] & 0xf]; }
            PyObject *out = PyUnicode_Concat(prefix, hex);
            Py_DECREF(hex);
            return out;
        }
    }
    PyObject *out = PyUnicode_New(plen + 64, 127);
    if (!out) return NULL;
    Py_UCS1 *o = PyUnicode_1BYTE_DATA(out);
    memcpy(o, head, (size_t)plen);
    for (int i = 0; i < 32; i++) {
        o[plen + 2 * i] = HEX[md[i] >> 4];
        o[plen + 2 * i + 1] = HEX[md[i] & 0xf];
    }
    return out;
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
    PyObject *out = sha256_hex(&b, args[3]);
    buf_free(&b);
    return out;
}

static PyObject *str_content, *str_details, *str_text, *str_status, *str_changed;
static PyObject *str_type_key; /* "type", interned (also the event's kind field) */

/* A dict value by an interned str key: borrowed, NULL when absent (or on an error, then set). */
static inline PyObject *item(PyObject *dict, PyObject *key) { return PyDict_GetItemWithError(dict, key); }

static inline int js_space_ascii(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static PyObject *plain_outcome_hex(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || (args[3] != Py_None && !PyBytes_Check(args[3]))) {
        PyErr_SetString(PyExc_TypeError, "plain_outcome_hex(number_text, undefined, result, needle: bytes | None)");
        return NULL;
    }
    PyObject *result = args[2], *content, *block, *text, *kind, *details, *status;
    if (!PyDict_CheckExact(result)) Py_RETURN_NONE;
    if (!(content = item(result, str_content)) || !PyList_CheckExact(content) || PyList_GET_SIZE(content) != 1
        || !PyDict_CheckExact(block = PyList_GET_ITEM(content, 0))
        || !(text = item(block, str_text)) || !PyUnicode_CheckExact(text) || !PyUnicode_IS_ASCII(text)
        || !(kind = item(block, str_type_key)) || !PyUnicode_CheckExact(kind)) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    details = item(result, str_details);
    if (details != NULL && PyDict_Check(details)) {
        if (!PyDict_CheckExact(details)) Py_RETURN_NONE;
        if (item(details, str_changed) == Py_False) Py_RETURN_NONE; /* 2026.9.6: write's unchanged rule */
        status = item(details, str_status);
        /* a "blocked" status may be the detector's own veto (no outcome), and a value of another type may
           compare in its own way: both go to the Python path */
        if (status != NULL && !(status == Py_None || PyBool_Check(status) || PyLong_CheckExact(status)
                                || PyFloat_CheckExact(status) || PyDict_CheckExact(status) || PyList_CheckExact(status)
                                || (PyUnicode_CheckExact(status)
                                    && PyUnicode_CompareWithASCIIString(status, "blocked") != 0)))
            Py_RETURN_NONE;
    } else {
        details = NULL; /* absent or not a dict: {} */
    }
    if (PyErr_Occurred()) return NULL;
    /* JavaScript's trim of an ASCII text: tab, line feed, vertical tab, form feed, carriage return, space */
    const char *chars = (const char *)PyUnicode_1BYTE_DATA(text);
    Py_ssize_t first = 0, end = PyUnicode_GET_LENGTH(text);
    while (first < end && js_space_ascii(chars[first])) first++;
    while (end > first && js_space_ascii(chars[end - 1])) end--;
    BUF_ON_STACK(b, space);
    int rc = buf_put(&b, "{\"details\":", 11);
    if (rc == 0) rc = details != NULL ? put_value(&b, details, args[0], args[1], 1) : buf_put(&b, "{}", 2);
    if (rc == 0) rc = buf_put(&b, ",\"text\":", 8);
    if (rc == 0) rc = put_utf8_escaped(&b, chars + first, end - first);
    if (rc == 0) rc = buf_byte(&b, '}');
    if (rc < 0) {
        buf_free(&b);
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
        PyErr_Clear(); /* a value the Python path knows (bytes, a subclass, deep nesting) */
        Py_RETURN_NONE;
    }
    if (args[3] != Py_None && contains(b.data, b.len, PyBytes_AS_STRING(args[3]), PyBytes_GET_SIZE(args[3]))) {
        buf_free(&b);
        Py_RETURN_NONE;
    }
    PyObject *out = sha256_hex(&b, NULL);
    buf_free(&b);
    return out;
}
#endif

/* ---- the event schema (streams.detection.events.validate_event) ---- */

#ifndef LOOPWATCH_OPENSSL
static PyObject *str_type_key;
#endif
static PyObject *str_session_id, *str_session_key, *str_judged, *str_ran_without_verdict, *str_profile,
    *str_tool_result;

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

/* 1 when `value` is an exact str equal to one of the str of the tuple `names`, else 0. */
static int one_of(PyObject *value, PyObject *names) {
    if (!PyUnicode_CheckExact(value)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (PyUnicode_CheckExact(name) && PyUnicode_Compare(value, name) == 0) return 1;
    }
    return 0;
}

/* a present, non-empty str (the fields are checked to be str or None first) */
static inline int filled(PyObject *value) { return value != NULL && value != Py_None && PyUnicode_GET_LENGTH(value) > 0; }

static PyObject *event_kind(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyDict_Check(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2])
        || !PyTuple_Check(args[3]) || !PyTuple_Check(args[4]) || !PyTuple_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "event_kind(event: dict, kinds, strings, numbers, booleans, profiles: tuple)");
        return NULL;
    }
    PyObject *event = args[0];
    PyObject *kind = PyDict_GetItemWithError(event, str_type_key);
    if (kind == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    int ok = one_of(kind, args[1]);
    for (int field_kind = 0; ok == 1 && field_kind < 3; field_kind++)
        ok = fields_of_kind(event, args[2 + field_kind], field_kind);
    if (ok < 0) return NULL;
    if (!ok) Py_RETURN_NONE;
    PyObject *judged = PyDict_GetItemWithError(event, str_judged);
    PyObject *ran = judged == Py_False ? PyDict_GetItemWithError(event, str_ran_without_verdict) : NULL;
    PyObject *profile = PyDict_GetItemWithError(event, str_profile);
    int sessionless = PyUnicode_Compare(kind, str_tool_result) != 0
                      && !filled(PyDict_GetItemWithError(event, str_session_id))
                      && !filled(PyDict_GetItemWithError(event, str_session_key));
    if (PyErr_Occurred()) return NULL;
    if (sessionless || ran == Py_True) Py_RETURN_NONE;
    if (profile != NULL && profile != Py_None && !one_of(profile, args[5])) Py_RETURN_NONE;
    Py_INCREF(kind);
    return kind;
}

static PyMethodDef methods[] = {
    {"canonical_bytes", (PyCFunction)(void (*)(void))canonical_bytes, METH_FASTCALL,
     "canonical_bytes(value, number_text, undefined) -> bytes: OpenClaw's canonical text, UTF-8."},
    {"event_kind", (PyCFunction)(void (*)(void))event_kind, METH_FASTCALL,
     "event_kind(event, kinds, strings, numbers, booleans, profiles) -> str | None: the type of a usual valid "
     "event, else None."},
#ifdef LOOPWATCH_OPENSSL
    {"digest_hex", (PyCFunction)(void (*)(void))digest_hex, METH_FASTCALL,
     "digest_hex(value, number_text, undefined, prefix[, needle]) -> str | None: prefix + hex SHA-256 of the "
     "canonical text (None when it contains needle)."},
    {"plain_outcome_hex", (PyCFunction)(void (*)(void))plain_outcome_hex, METH_FASTCALL,
     "plain_outcome_hex(number_text, undefined, result, needle) -> str | None: hex SHA-256 of the plain outcome "
     "fingerprint of a usual result, else None."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_canonical", NULL, -1, methods};

static int intern(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot != NULL ? 0 : -1;
}

PyMODINIT_FUNC PyInit__canonical(void) {
    if (intern(&str_type_key, "type") || intern(&str_session_id, "session_id") || intern(&str_session_key, "session_key")
        || intern(&str_judged, "judged") || intern(&str_ran_without_verdict, "ran_without_verdict")
        || intern(&str_profile, "profile") || intern(&str_tool_result, "tool_result"))
        return NULL;
#ifdef LOOPWATCH_OPENSSL
    if (intern(&str_content, "content") || intern(&str_details, "details") || intern(&str_text, "text")
        || intern(&str_status, "status") || intern(&str_changed, "changed"))
        return NULL;
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
    sha256_ctx = EVP_MD_CTX_new();
    if (!sha256_md || !sha256_ctx) {
        PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA256");
        return NULL;
    }
#endif
    return PyModule_Create(&module);
}
