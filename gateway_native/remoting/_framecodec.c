/* The remoting frame codec's common case, compiled.
 *
 * gateway_native.remoting.command decodes and encodes every RocketMQ request and answer; this is
 * its fast path when the extension could be built at install time (setup.py marks it optional:
 * without a C compiler the install still succeeds and the Python codec is used). The compiled
 * functions handle only the frames clients and the broker actually exchange and answer None for
 * anything else, so the Python codec keeps every edge case, with its exact results and errors.
 * tests/gateway_native/test_framecodec.py checks both against each other on real, random and
 * damaged frames.
 *
 * setup(command_class, slots, languages, java, other, language_names, json_type, rocketmq_type,
 *       int_enum, decode_fallback, encode_fallback): called once by command.py with the objects the
 *       results are made of and the Python codec. slots: RemotingCommand's member descriptors in
 *       field order when command.py has checked that its __init__ only assigns them (the object is
 *       then allocated and its slots filled, a fifth faster than calling the class), else None.
 *
 * try_decode_frame(frame) -> RemotingCommand | None. frame: bytes or bytearray without its length
 * prefix. Handled: a ROCKETMQ binary header that decodes without error, and a JSON header that is
 * one object whose keys are among code, language, version, opaque, flag, remark, extFields,
 * serializeTypeCurrentRPC, each once; the four numbers plain integers in the Java int range;
 * language a string or such an integer; remark a string or null; extFields null or an object of
 * string values; serializeTypeCurrentRPC a string. Strings are strict UTF-8 without raw control
 * characters, with JSON's escapes (a \u escape of a lone UTF-16 surrogate is not handled: Python
 * refuses it with its own message). Anything else, a malformed frame included, answers None.
 *
 * try_encode(cmd) -> bytes | None: the whole frame of a command with a JSON header whose numbers
 * are ints (code may be an IntEnum), remark None or a str, extFields a dict of str -> str and body
 * None or bytes, byte for byte what the Python encode builds; None for anything else.
 *
 * decode_frame(frame), encode(cmd): the above, calling the Python codec for what they do not
 * handle; command.py binds them as its decode_frame and encode.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

#define NFIELDS 9 /* code, opaque, flag, remark, ext_fields, body, language, version, serialize_type */

static PyObject *command_class;  /* RemotingCommand */
static Py_ssize_t slot_offset[NFIELDS]; /* its slots, in field order (all 0: call the class) */
static PyObject *languages;      /* LanguageCode name -> member */
static PyObject *language_java;  /* a JSON header without "language" */
static PyObject *language_other; /* a name not in languages */
static PyObject *language_names; /* int -> LanguageCode name, for encoding */
static PyObject *stype_json, *stype_rocketmq;
static PyObject *int_enum;       /* enum.IntEnum: a code of this type encodes as its int */
static PyObject *decode_fallback, *encode_fallback; /* the Python codec */
static PyObject *str_code, *str_opaque, *str_flag, *str_remark, *str_ext_fields, *str_body, *str_language,
    *str_version, *str_serialize_type;

/* The outcome of a parse step: handled, not handled (no exception set: the Python path decides),
 * or an exception that is not about the input (memory). */
#define OK 1
#define DEFER 0
#define FAIL -1

/* -- building the command --------------------------------------------------------------------- */

/* A RemotingCommand of the given fields (references stolen, NULL stands for "not made": the
 * caller failed). With the slots known, the object is allocated and its slots filled, as the
 * dataclass __init__ would assign them; otherwise the class is called. */
static PyObject *make_command(PyObject *fields[NFIELDS])
{
    PyObject *cmd = NULL;
    for (int i = 0; i < NFIELDS; i++)
        if (fields[i] == NULL)
            goto done;
    if (slot_offset[0]) {
        PyTypeObject *tp = (PyTypeObject *)command_class;
        cmd = tp->tp_alloc(tp, 0);
        if (cmd == NULL)
            goto done;
        for (int i = 0; i < NFIELDS; i++) {
            *(PyObject **)((char *)cmd + slot_offset[i]) = fields[i];
            fields[i] = NULL;
        }
        return cmd;
    }
    cmd = PyObject_Vectorcall(command_class, fields, NFIELDS, NULL);
done:
    for (int i = 0; i < NFIELDS; i++)
        Py_XDECREF(fields[i]);
    return cmd;
}

/* -- JSON header ------------------------------------------------------------------------------ */

typedef struct {
    const unsigned char *s;
    Py_ssize_t pos, len;
} Cursor;

static inline void skip_ws(Cursor *c)
{
    while (c->pos < c->len) {
        unsigned char ch = c->s[c->pos];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
            break;
        c->pos++;
    }
}

static inline int peek(Cursor *c)
{
    return c->pos < c->len ? c->s[c->pos] : -1;
}

/* A str from UTF-8; an invalid sequence defers (Python names the byte in its error). */
static int utf8_str(const char *p, Py_ssize_t n, PyObject **out)
{
    *out = PyUnicode_DecodeUTF8(p, n, NULL);
    if (*out != NULL)
        return OK;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        return FAIL;
    PyErr_Clear();
    return DEFER;
}

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9')
            v |= ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            v |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F')
            v |= ch - 'A' + 10;
        else
            return 0;
    }
    *out = v;
    return 1;
}

/* The escaped string body s[0:n] (its closing quote found, so a backslash is never its last byte)
 * into buf as UTF-8; no escape makes more bytes than it is written with, so n bytes suffice. */
static int unescape(const unsigned char *s, Py_ssize_t n, char *buf, Py_ssize_t *out_len)
{
    Py_ssize_t o = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = s[i];
        if (ch != '\\') {
            buf[o++] = (char)ch;
            continue;
        }
        ch = s[++i];
        switch (ch) {
        case '"': case '\\': case '/': buf[o++] = (char)ch; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (i + 4 >= n || !hex4(s + i + 1, &cp))
                return DEFER;
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDFFF) { /* only a high surrogate escape then a low one */
                if (cp >= 0xDC00 || i + 6 >= n || s[i + 1] != '\\' || s[i + 2] != 'u' || !hex4(s + i + 3, &lo)
                    || lo < 0xDC00 || lo > 0xDFFF)
                    return DEFER;
                i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp < 0x80) {
                buf[o++] = (char)cp;
            } else if (cp < 0x800) {
                buf[o++] = (char)(0xC0 | (cp >> 6));
                buf[o++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                buf[o++] = (char)(0xE0 | (cp >> 12));
                buf[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[o++] = (char)(0xF0 | (cp >> 18));
                buf[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                buf[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[o++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
            return DEFER;
        }
    }
    *out_len = o;
    return OK;
}

/* The string at the cursor (on its opening quote). With raw_only, a string with an escape defers
 * and *out stays NULL: the span is left in *start and *n (object keys compared with known names). */
static int parse_string(Cursor *c, PyObject **out, int raw_only, const unsigned char **start, Py_ssize_t *n)
{
    const unsigned char *s = c->s + c->pos + 1;
    Py_ssize_t avail = c->len - c->pos - 1, i = 0;
    int escaped = 0;
    unsigned char high = 0; /* the bits of every byte: below 0x80, an ASCII string */
    for (;;) {
        if (i >= avail)
            return DEFER; /* unterminated */
        unsigned char ch = s[i];
        high |= ch;
        if (ch == '"')
            break;
        if (ch == '\\') {
            escaped = 1;
            i += 2;
            continue;
        }
        if (ch < 0x20)
            return DEFER; /* a raw control character (NUL included): Python's strict parser refuses it */
        i++;
    }
    c->pos += i + 2;
    if (raw_only) {
        if (escaped)
            return DEFER;
        *start = s;
        *n = i;
        return OK;
    }
    if (!escaped && high < 0x80 && i > 1) { /* the usual string: no validation to do (a 0 or 1 character
                                               * string takes the decoder's shared objects) */
        if ((*out = PyUnicode_New(i, 127)) == NULL)
            return FAIL;
        memcpy(PyUnicode_DATA(*out), s, (size_t)i);
        return OK;
    }
    if (!escaped)
        return utf8_str((const char *)s, i, out);
    char small[256] = {0}; /* zeroed: the compiler cannot see that unescape fills what is read */
    char *buf = i <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc((size_t)i);
    if (buf == NULL) {
        PyErr_NoMemory();
        return FAIL;
    }
    Py_ssize_t blen;
    int rc = unescape(s, i, buf, &blen);
    if (rc == OK)
        rc = utf8_str(buf, blen, out);
    if (buf != small)
        PyMem_Free(buf);
    return rc;
}

/* A JSON integer in the Java int range at the cursor; a fraction or exponent is left unread, so
 * the caller, expecting ',' or '}', defers. */
static int parse_int(Cursor *c, int32_t *out)
{
    Py_ssize_t p = c->pos;
    int neg = 0;
    if (p < c->len && c->s[p] == '-') {
        neg = 1;
        p++;
    }
    if (p >= c->len || c->s[p] < '0' || c->s[p] > '9')
        return DEFER;
    int64_t v = 0;
    if (c->s[p] == '0') {
        p++;
    } else {
        int digits = 0;
        while (p < c->len && c->s[p] >= '0' && c->s[p] <= '9') {
            if (++digits > 10)
                return DEFER;
            v = v * 10 + (c->s[p++] - '0');
        }
    }
    if (neg)
        v = -v;
    if (v < INT32_MIN || v > INT32_MAX)
        return DEFER;
    c->pos = p;
    *out = (int32_t)v;
    return OK;
}

static int parse_null(Cursor *c)
{
    if (c->len - c->pos >= 4 && memcmp(c->s + c->pos, "null", 4) == 0) {
        c->pos += 4;
        return OK;
    }
    return DEFER;
}

/* extFields' object (the cursor on its '{') into a new dict of str -> str. */
static int parse_ext(Cursor *c, PyObject **out)
{
    PyObject *ext = PyDict_New();
    if (ext == NULL)
        return FAIL;
    int rc = DEFER;
    c->pos++;
    skip_ws(c);
    if (peek(c) == '}') {
        c->pos++;
        *out = ext;
        return OK;
    }
    for (;;) {
        PyObject *key = NULL, *value = NULL;
        if (peek(c) != '"' || (rc = parse_string(c, &key, 0, NULL, NULL)) != OK)
            break;
        skip_ws(c);
        if (peek(c) != ':') {
            Py_DECREF(key);
            rc = DEFER;
            break;
        }
        c->pos++;
        skip_ws(c);
        rc = peek(c) == '"' ? parse_string(c, &value, 0, NULL, NULL) : DEFER;
        if (rc != OK) {
            Py_DECREF(key);
            break;
        }
        int err = PyDict_SetItem(ext, key, value); /* a repeated key: the last value, first place, as Python */
        Py_DECREF(key);
        Py_DECREF(value);
        if (err < 0) {
            rc = FAIL;
            break;
        }
        skip_ws(c);
        int ch = peek(c);
        c->pos++;
        if (ch == '}') {
            *out = ext;
            return OK;
        }
        rc = DEFER;
        if (ch != ',')
            break;
        skip_ws(c);
    }
    Py_DECREF(ext);
    return rc;
}

enum { K_CODE, K_LANGUAGE, K_VERSION, K_OPAQUE, K_FLAG, K_REMARK, K_EXT, K_STYPE };

static int header_key(const unsigned char *k, Py_ssize_t n)
{
#define IS(name) (n == (Py_ssize_t)sizeof(name) - 1 && memcmp(k, name, sizeof(name) - 1) == 0)
    if (IS("code")) return K_CODE;
    if (IS("extFields")) return K_EXT;
    if (IS("flag")) return K_FLAG;
    if (IS("language")) return K_LANGUAGE;
    if (IS("opaque")) return K_OPAQUE;
    if (IS("serializeTypeCurrentRPC")) return K_STYPE;
    if (IS("version")) return K_VERSION;
    if (IS("remark")) return K_REMARK;
#undef IS
    return -1;
}

/* The JSON header s[0:n] into fields[] (code, opaque, flag, remark, ext_fields, language, version;
 * the caller adds body and serialize type). */
static int parse_json_header(const unsigned char *s, Py_ssize_t n, PyObject *fields[NFIELDS])
{
    Cursor cur = {s, 0, n}, *c = &cur;
    int32_t num[4] = {0, 0, 0, 0}; /* code, opaque, flag, version: absent is 0 */
    PyObject *remark = NULL, *ext = NULL, *language = NULL;
    unsigned seen = 0;
    int rc = DEFER;
    skip_ws(c);
    if (peek(c) != '{')
        return DEFER;
    c->pos++;
    skip_ws(c);
    if (peek(c) == '}') {
        c->pos++;
        goto end;
    }
    for (;;) {
        const unsigned char *k;
        Py_ssize_t klen;
        if (peek(c) != '"' || parse_string(c, NULL, 1, &k, &klen) != OK)
            goto defer;
        int key = header_key(k, klen);
        if (key < 0 || seen & (1u << key))
            goto defer; /* another key, or one twice: Python's dict decides */
        seen |= 1u << key;
        skip_ws(c);
        if (peek(c) != ':')
            goto defer;
        c->pos++;
        skip_ws(c);
        int ch = peek(c);
        switch (key) {
        case K_CODE: rc = parse_int(c, &num[0]); break;
        case K_OPAQUE: rc = parse_int(c, &num[1]); break;
        case K_FLAG: rc = parse_int(c, &num[2]); break;
        case K_VERSION: rc = parse_int(c, &num[3]); break;
        case K_LANGUAGE:
            if (ch == '"') {
                PyObject *name;
                if ((rc = parse_string(c, &name, 0, NULL, NULL)) != OK)
                    break;
                language = PyDict_GetItemWithError(languages, name);
                Py_DECREF(name);
                if (language == NULL && PyErr_Occurred())
                    rc = FAIL;
                else
                    language = Py_NewRef(language != NULL ? language : language_other);
            } else {
                int32_t v;
                if ((rc = parse_int(c, &v)) == OK && (language = PyLong_FromLong(v)) == NULL)
                    rc = FAIL;
            }
            break;
        case K_REMARK:
            rc = ch == '"' ? parse_string(c, &remark, 0, NULL, NULL) : parse_null(c);
            break;
        case K_EXT:
            rc = ch == '{' ? parse_ext(c, &ext) : parse_null(c);
            break;
        case K_STYPE: { /* not kept, but it must be a valid string */
            PyObject *ignored = NULL;
            rc = ch == '"' ? parse_string(c, &ignored, 0, NULL, NULL) : DEFER;
            Py_XDECREF(ignored);
            break;
        }
        }
        if (rc != OK)
            goto out;
        rc = DEFER;
        skip_ws(c);
        ch = peek(c);
        c->pos++;
        if (ch == '}')
            break;
        if (ch != ',')
            goto defer;
        skip_ws(c);
    }
end:
    skip_ws(c);
    if (c->pos != n)
        goto defer; /* trailing data */
    if (ext == NULL && (ext = PyDict_New()) == NULL)
        goto fail;
    fields[0] = PyLong_FromLong(num[0]);
    fields[1] = PyLong_FromLong(num[1]);
    fields[2] = PyLong_FromLong(num[2]);
    fields[3] = remark != NULL ? remark : Py_NewRef(Py_None);
    fields[4] = ext;
    fields[6] = language != NULL ? language : Py_NewRef(language_java);
    fields[7] = PyLong_FromLong(num[3]);
    return OK;
defer:
    rc = DEFER;
    goto out;
fail:
    rc = FAIL;
out:
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    Py_XDECREF(language);
    return rc;
}

/* -- ROCKETMQ header -------------------------------------------------------------------------- */

static inline int32_t be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int16_t be16(const unsigned char *p)
{
    return (int16_t)(((unsigned)p[0] << 8) | p[1]);
}

/* decode_header_rocketmq's reading; every malformed header defers (Python names the problem). */
static int parse_rocketmq_header(const unsigned char *s, Py_ssize_t n, PyObject *fields[NFIELDS])
{
    if (n < 21)
        return DEFER;
    int64_t pos = 17, end;
    int32_t rlen = be32(s + 13), elen;
    if (rlen < 0 || pos + rlen + 4 > n)
        return DEFER;
    pos += rlen;
    elen = be32(s + pos);
    pos += 4;
    if (elen < 0 || pos + elen != n)
        return DEFER;
    end = pos + elen;
    PyObject *remark, *ext = PyDict_New();
    if (ext == NULL)
        return FAIL;
    while (pos < end) {
        if (pos + 2 > end)
            goto defer;
        int64_t klen = ((unsigned)s[pos] << 8) | s[pos + 1];
        pos += 2;
        if (pos + klen + 4 > end)
            goto defer;
        const unsigned char *k = s + pos;
        pos += klen;
        int32_t vlen = be32(s + pos);
        pos += 4;
        if (vlen < 0 || pos + vlen > end)
            goto defer;
        PyObject *key = PyUnicode_DecodeUTF8((const char *)k, (Py_ssize_t)klen, "replace");
        PyObject *value = key ? PyUnicode_DecodeUTF8((const char *)s + pos, vlen, "replace") : NULL;
        int err = value == NULL || PyDict_SetItem(ext, key, value) < 0;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (err) {
            Py_DECREF(ext);
            return FAIL;
        }
        pos += vlen;
    }
    remark = rlen ? PyUnicode_DecodeUTF8((const char *)s + 17, rlen, "replace") : Py_NewRef(Py_None);
    if (remark == NULL) {
        Py_DECREF(ext);
        return FAIL;
    }
    fields[0] = PyLong_FromLong(be16(s));
    fields[1] = PyLong_FromLong(be32(s + 5));
    fields[2] = PyLong_FromLong(be32(s + 9));
    fields[3] = remark;
    fields[4] = ext;
    fields[6] = PyLong_FromLong(s[2]); /* a signed byte & 0xFF */
    fields[7] = PyLong_FromLong(be16(s + 3));
    return OK;
defer:
    Py_DECREF(ext);
    return DEFER;
}

static PyObject *try_decode_frame(PyObject *self, PyObject *frame)
{
    if (command_class == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_framecodec.setup() was not called");
        return NULL;
    }
    if (!PyBytes_CheckExact(frame) && !PyByteArray_CheckExact(frame))
        Py_RETURN_NONE;
    Py_buffer view; /* held to the end: a bytearray cannot be resized under the parse */
    if (PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t n = view.len;
    PyObject *fields[NFIELDS] = {NULL};
    PyObject *cmd = NULL;
    int rc = DEFER;
    if (n >= 4) {
        unsigned stype = p[0];
        Py_ssize_t hlen = ((Py_ssize_t)p[1] << 16) | ((Py_ssize_t)p[2] << 8) | p[3];
        if (hlen <= n - 4) {
            if (stype == 0)
                rc = parse_json_header(p + 4, hlen, fields);
            else if (stype == 1)
                rc = parse_rocketmq_header(p + 4, hlen, fields);
            if (rc == OK) {
                fields[5] = PyBytes_FromStringAndSize((const char *)p + 4 + hlen, n - 4 - hlen);
                fields[8] = Py_NewRef(stype == 0 ? stype_json : stype_rocketmq);
                cmd = make_command(fields);
                rc = cmd == NULL ? FAIL : OK;
            }
        }
    }
    PyBuffer_Release(&view);
    if (rc == DEFER)
        Py_RETURN_NONE;
    return cmd;
}

/* -- JSON encoding ---------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Out;

static int out_reserve(Out *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap * 2 > o->len + more ? o->cap * 2 : o->len + more;
    char *buf = PyMem_Realloc(o->buf, (size_t)cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->buf = buf;
    o->cap = cap;
    return 0;
}

static int out_write(Out *o, const char *s, Py_ssize_t n)
{
    if (out_reserve(o, n) < 0)
        return -1;
    memcpy(o->buf + o->len, s, (size_t)n);
    o->len += n;
    return 0;
}

#define OUT_LIT(o, lit) out_write(o, lit, (Py_ssize_t)sizeof(lit) - 1)

/* One character as json.encoder.encode_basestring renders it ('"' and '\' escaped, \b \f \n \r \t
 * and the other control characters as \u00xx), in UTF-8 with a lone surrogate as '?' (what
 * encoding with "replace" makes of it). At most 6 bytes. */
static inline char *put_char(char *w, Py_UCS4 ch)
{
    if (ch >= 0x20 && ch < 0x80 && ch != '"' && ch != '\\') {
        *w++ = (char)ch;
    } else if (ch < 0x80) {
        *w++ = '\\';
        switch (ch) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\b': *w++ = 'b'; break;
        case '\f': *w++ = 'f'; break;
        case '\n': *w++ = 'n'; break;
        case '\r': *w++ = 'r'; break;
        case '\t': *w++ = 't'; break;
        default:
            *w++ = 'u';
            *w++ = '0';
            *w++ = '0';
            *w++ = "0123456789abcdef"[ch >> 4];
            *w++ = "0123456789abcdef"[ch & 0xF];
        }
    } else if (ch < 0x800) {
        *w++ = (char)(0xC0 | (ch >> 6));
        *w++ = (char)(0x80 | (ch & 0x3F));
    } else if (ch >= 0xD800 && ch <= 0xDFFF) {
        *w++ = '?';
    } else if (ch < 0x10000) {
        *w++ = (char)(0xE0 | (ch >> 12));
        *w++ = (char)(0x80 | ((ch >> 6) & 0x3F));
        *w++ = (char)(0x80 | (ch & 0x3F));
    } else {
        *w++ = (char)(0xF0 | (ch >> 18));
        *w++ = (char)(0x80 | ((ch >> 12) & 0x3F));
        *w++ = (char)(0x80 | ((ch >> 6) & 0x3F));
        *w++ = (char)(0x80 | (ch & 0x3F));
    }
    return w;
}

/* A str in double quotes, each character as put_char renders it. */
static int out_json_str(Out *o, PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (out_reserve(o, 2 + 6 * n) < 0)
        return -1;
    char *w = o->buf + o->len;
    *w++ = '"';
    switch (PyUnicode_KIND(s)) { /* a loop per width: the usual string is one byte a character */
    case PyUnicode_1BYTE_KIND: {
        const Py_UCS1 *d = PyUnicode_1BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++)
            w = put_char(w, d[i]);
        break;
    }
    case PyUnicode_2BYTE_KIND: {
        const Py_UCS2 *d = PyUnicode_2BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++)
            w = put_char(w, d[i]);
        break;
    }
    default: {
        const Py_UCS4 *d = PyUnicode_4BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++)
            w = put_char(w, d[i]);
    }
    }
    *w++ = '"';
    o->len = w - o->buf;
    return 0;
}

/* An exact int, or code's IntEnum, that fits a long long, as its decimal; 0 for anything else. */
static int out_int(Out *o, PyObject *v, int enum_ok)
{
    if (!PyLong_CheckExact(v) && !(enum_ok && PyObject_TypeCheck(v, (PyTypeObject *)int_enum)))
        return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    char digits[24];
    char *end = digits + sizeof(digits), *d = end;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        *--d = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        *--d = '-';
    return out_write(o, d, end - d) < 0 ? -1 : 1;
}

static PyObject *try_encode(PyObject *self, PyObject *cmd)
{
    if (command_class == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_framecodec.setup() was not called");
        return NULL;
    }
    PyObject *code = NULL, *opaque = NULL, *flag = NULL, *remark = NULL, *ext = NULL, *body = NULL,
             *language = NULL, *version = NULL, *stype = NULL, *result = NULL;
    Out o = {NULL, 0, 0};
    /* a RemotingCommand's slots are read directly; a missing attribute or a language that cannot be
     * looked up: Python raises its own error */
    int direct = Py_TYPE(cmd) == (PyTypeObject *)command_class && slot_offset[0];
#define GET(var, name, i)                                                                                 \
    if ((var = direct ? Py_XNewRef(*(PyObject **)((char *)cmd + slot_offset[i]))                          \
                      : PyObject_GetAttr(cmd, name)) == NULL)                                             \
        goto clear_defer
#define TRY(expr) do { if ((expr) < 0) goto error; } while (0)
#define INT(v, enum_ok) switch (out_int(&o, v, enum_ok)) { case -1: goto error; case 0: goto defer; }
    GET(stype, str_serialize_type, 8);
    if (stype != stype_json)
        goto defer;
    GET(code, str_code, 0);
    GET(opaque, str_opaque, 1);
    GET(flag, str_flag, 2);
    GET(remark, str_remark, 3);
    GET(ext, str_ext_fields, 4);
    GET(body, str_body, 5);
    GET(language, str_language, 6);
    GET(version, str_version, 7);
    PyObject *name = PyDict_GetItemWithError(language_names, language);
    if (name == NULL && PyErr_Occurred())
        goto clear_defer;
    if ((remark != Py_None && !PyUnicode_CheckExact(remark)) || !PyDict_CheckExact(ext)
        || (body != Py_None && !PyBytes_CheckExact(body))
        || (name != NULL && !(PyUnicode_CheckExact(name) && PyUnicode_IS_ASCII(name))))
        goto defer;
    TRY(out_reserve(&o, 8 + 160 + 24 * PyDict_GET_SIZE(ext)));
    o.len = 8; /* length and mark, written last */
    TRY(OUT_LIT(&o, "{\"code\":"));
    INT(code, 1);
    TRY(OUT_LIT(&o, ",\"extFields\":{"));
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    for (int first = 1; PyDict_Next(ext, &pos, &k, &v); first = 0) {
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v))
            goto defer;
        if (!first)
            TRY(OUT_LIT(&o, ","));
        TRY(out_json_str(&o, k));
        TRY(OUT_LIT(&o, ":"));
        TRY(out_json_str(&o, v));
    }
    TRY(OUT_LIT(&o, "},\"flag\":"));
    INT(flag, 0);
    TRY(OUT_LIT(&o, ",\"language\":\""));
    if (name != NULL)
        TRY(out_write(&o, PyUnicode_DATA(name), PyUnicode_GET_LENGTH(name)));
    else
        TRY(OUT_LIT(&o, "OTHER"));
    TRY(OUT_LIT(&o, "\",\"opaque\":"));
    INT(opaque, 0);
    TRY(OUT_LIT(&o, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":"));
    INT(version, 0);
    if (remark != Py_None) {
        TRY(OUT_LIT(&o, ",\"remark\":"));
        TRY(out_json_str(&o, remark));
    }
    TRY(OUT_LIT(&o, "}"));
#undef GET
#undef TRY
#undef INT
    Py_ssize_t hlen = o.len - 8, blen = body == Py_None ? 0 : PyBytes_GET_SIZE(body);
    if (hlen > 0xFFFFFF || 4 + hlen + blen > INT32_MAX)
        goto defer; /* more than the length and mark can say: Python's encode has its own answer */
    result = PyBytes_FromStringAndSize(NULL, o.len + blen);
    if (result == NULL)
        goto error;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(result);
    uint32_t total = (uint32_t)(4 + hlen + blen);
    w[0] = (unsigned char)(total >> 24);
    w[1] = (unsigned char)(total >> 16);
    w[2] = (unsigned char)(total >> 8);
    w[3] = (unsigned char)total;
    w[4] = 0; /* SerializeType.JSON */
    w[5] = (unsigned char)(hlen >> 16);
    w[6] = (unsigned char)(hlen >> 8);
    w[7] = (unsigned char)hlen;
    memcpy(w + 8, o.buf + 8, (size_t)hlen);
    if (blen)
        memcpy(w + o.len, PyBytes_AS_STRING(body), (size_t)blen);
    goto done;
clear_defer:
    PyErr_Clear();
defer:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    PyMem_Free(o.buf);
    Py_XDECREF(code);
    Py_XDECREF(opaque);
    Py_XDECREF(flag);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    Py_XDECREF(body);
    Py_XDECREF(language);
    Py_XDECREF(version);
    Py_XDECREF(stype);
    return result;
}

/* -- with the Python codec behind ------------------------------------------------------------- */

/* The entry points command.py binds as decode_frame and encode: no Python frame of their own. */
static PyObject *decode_frame(PyObject *self, PyObject *frame)
{
    PyObject *cmd = try_decode_frame(self, frame);
    if (cmd != Py_None)
        return cmd;
    Py_DECREF(cmd);
    return PyObject_CallOneArg(decode_fallback, frame);
}

static PyObject *encode(PyObject *self, PyObject *cmd)
{
    PyObject *frame = try_encode(self, cmd);
    if (frame != Py_None)
        return frame;
    Py_DECREF(frame);
    return PyObject_CallOneArg(encode_fallback, cmd);
}

/* -- setup ------------------------------------------------------------------------------------ */

static PyObject *setup(PyObject *self, PyObject *args)
{
    PyObject *cls, *slots, *langs, *java, *other, *names, *js, *rq, *ie, *dec, *enc;
    if (!PyArg_ParseTuple(args, "O!OO!OOO!OOO!OO:setup", &PyType_Type, &cls, &slots, &PyDict_Type, &langs, &java,
                          &other, &PyDict_Type, &names, &js, &rq, &PyType_Type, &ie, &dec, &enc))
        return NULL;
    Py_ssize_t offsets[NFIELDS] = {0};
    if (slots != Py_None) { /* the class's member descriptors in field order, when it may be filled directly */
        if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != NFIELDS) {
            PyErr_SetString(PyExc_ValueError, "setup() needs the command class's 9 slots");
            return NULL;
        }
        for (int i = 0; i < NFIELDS; i++) {
            PyObject *d = PyTuple_GET_ITEM(slots, i);
            if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || PyDescr_TYPE(d) != (PyTypeObject *)cls
                || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX
                || ((PyMemberDescrObject *)d)->d_member->flags & READONLY) {
                PyErr_SetString(PyExc_ValueError, "setup() slots must be the command class's object slots");
                return NULL;
            }
            offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        }
    }
    Py_XSETREF(command_class, Py_NewRef(cls));
    memcpy(slot_offset, offsets, sizeof(offsets));
    Py_XSETREF(languages, Py_NewRef(langs));
    Py_XSETREF(language_java, Py_NewRef(java));
    Py_XSETREF(language_other, Py_NewRef(other));
    Py_XSETREF(language_names, Py_NewRef(names));
    Py_XSETREF(stype_json, Py_NewRef(js));
    Py_XSETREF(stype_rocketmq, Py_NewRef(rq));
    Py_XSETREF(int_enum, Py_NewRef(ie));
    Py_XSETREF(decode_fallback, Py_NewRef(dec));
    Py_XSETREF(encode_fallback, Py_NewRef(enc));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", setup, METH_VARARGS,
     "setup(command_class, slots, languages, java, other, language_names, json_type, rocketmq_type, int_enum, "
     "decode_fallback, encode_fallback)"},
    {"try_decode_frame", try_decode_frame, METH_O, "try_decode_frame(frame) -> RemotingCommand, or None: not handled"},
    {"try_encode", try_encode, METH_O, "try_encode(cmd) -> the whole frame, or None: not handled"},
    {"decode_frame", decode_frame, METH_O, "decode_frame(frame) -> RemotingCommand (from Python when not handled)"},
    {"encode", encode, METH_O, "encode(cmd) -> the whole frame (from Python when not handled)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "gateway_native.remoting._framecodec",
                                    "Remoting frame codec, common case (fast path of gateway_native.remoting.command)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__framecodec(void)
{
    static const char *names[NFIELDS] = {"code", "opaque", "flag", "remark", "ext_fields", "body", "language",
                                         "version", "serialize_type"};
    PyObject **strs[NFIELDS] = {&str_code, &str_opaque, &str_flag, &str_remark, &str_ext_fields, &str_body,
                                &str_language, &str_version, &str_serialize_type};
    for (int i = 0; i < NFIELDS; i++)
        if (*strs[i] == NULL && (*strs[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return NULL;
    return PyModule_Create(&module);
}
