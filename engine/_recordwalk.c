/* The dispatcher's walk over a Kafka RecordBatch's records for their keys, compiled.
 *
 * engine.record_batch.record_keys does the same walk in Python; this is its fast path when the
 * extension could be built at install time (setup.py marks it optional: without a C compiler
 * the install still succeeds and the Python walk is used). Both must agree on every input:
 * the same keys for a valid batch, an error (ValueError here, CorruptRecordError there, with
 * the same message) for a malformed one. tests/engine/test_record_batch.py checks both walks
 * against each other on valid and on randomly damaged batches.
 *
 * walk_keys(buffer, pos, end, count) -> list[bytes]; raises WalkError (a ValueError) for a malformed
 * batch, and whatever the buffer raises when it cannot be read (a closed mmap: ValueError).
 *   buffer: the records (the batch itself, or its decompressed records block), any bytes-like
 *   pos:    where the first record starts;  end: where the last one must end
 *   count:  the batch header's recordsCount
 * Each record is read up to its key (length, attributes, timestamp delta, offset delta, key)
 * and then skipped by its length. Varints are read up to the buffer's end, record fields up to
 * the record's end, exactly as the Python walk does.
 *
 * contains(buffer, needle) -> bool: the put path's delay-header scan (engine.batch_delay), on
 * any bytes-like buffer without copying it; engine.batch_delay falls back to Python's search.
 *
 * java_hash(str) -> int: the index's key hash (engine.index_file), Java's String.hashCode.
 */
#define _GNU_SOURCE /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *WalkError; /* a malformed batch, as opposed to a buffer that cannot be read */

/* A zigzag varint at *pos, bounded by buflen. 0 ok, -1 truncated, -2 longer than 10 bytes.
 * A value wider than 64 bits (only a 10th byte above 1 makes one) saturates with its sign,
 * which every caller then refuses as Python's unbounded integer would be refused. */
static int read_varint(const unsigned char *p, Py_ssize_t buflen, Py_ssize_t *pos, int64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    int wide = 0;
    for (;;) {
        if (*pos >= buflen)
            return -1;
        unsigned char b = p[(*pos)++];
        uint64_t payload = (uint64_t)(b & 0x7F);
        if (shift == 63 && payload > 1)
            wide = 1;
        if (shift < 64)
            raw |= payload << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 63)
            return -2;
    }
    if (wide)
        *out = (raw & 1) ? INT64_MIN : INT64_MAX;
    else
        *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    return 0;
}

static PyObject *varint_error(int rc)
{
    PyErr_SetString(WalkError, rc == -1 ? "record truncated inside a varint"
                                               : "varint longer than 10 bytes in record");
    return NULL;
}

static PyObject *walk_keys(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end;
    long long count;
    if (!PyArg_ParseTuple(args, "y*nnL", &view, &pos, &end, &count))
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    Py_ssize_t buflen = view.len;
    PyObject *keys = PyList_New(0);
    if (keys == NULL)
        goto fail;
    if (end > buflen)
        end = buflen; /* the callers never pass more; reading stays inside the buffer regardless */
    for (long long i = 0; i < count; i++) {
        int64_t length, klen;
        int rc;
        if (pos < end && p[pos] < 0x80) {
            unsigned b = p[pos++];
            length = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        } else if ((rc = read_varint(p, buflen, &pos, &length)) != 0) {
            varint_error(rc);
            goto fail;
        }
        if (length < 0 || length > (int64_t)(end - pos)) {
            PyErr_Format(WalkError, "record length %lld runs past the batch end", (long long)length);
            goto fail;
        }
        Py_ssize_t rec_end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes */
        for (int field = 0; field < 2; field++) { /* timestamp delta, offset delta: skipped */
            for (;;) {
                if (pos >= rec_end) {
                    PyErr_SetString(WalkError, "record truncated inside a varint");
                    goto fail;
                }
                if (p[pos++] < 0x80)
                    break;
            }
        }
        if (pos < rec_end && p[pos] < 0x80) {
            unsigned b = p[pos++];
            klen = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        } else if ((rc = read_varint(p, buflen, &pos, &klen)) != 0) {
            varint_error(rc);
            goto fail;
        }
        if (klen >= 0) {
            if (klen > (int64_t)(rec_end - pos)) {
                PyErr_SetString(WalkError, "record key runs past the record");
                goto fail;
            }
            PyObject *key = PyBytes_FromStringAndSize((const char *)p + pos, (Py_ssize_t)klen);
            if (key == NULL)
                goto fail;
            int err = PyList_Append(keys, key);
            Py_DECREF(key);
            if (err < 0)
                goto fail;
        } else if (klen != -1) {
            PyErr_Format(WalkError, "record key length %lld is invalid", (long long)klen);
            goto fail;
        }
        pos = rec_end;
    }
    if (pos != end) {
        PyErr_Format(WalkError, "%zd bytes left after the last of %lld records", end - pos, count);
        goto fail;
    }
    PyBuffer_Release(&view);
    return keys;
fail:
    Py_XDECREF(keys);
    PyBuffer_Release(&view);
    return NULL;
}

/* contains(buffer, needle) -> bool: whether needle occurs in buffer (memmem). Any bytes-like
 * buffer, read-only views included (a produce request's batch is a view of the request), so the
 * put path's delay-header scan copies nothing; the search runs without the GIL. */
static PyObject *contains(PyObject *self, PyObject *args)
{
    Py_buffer hay, needle;
    void *found;
    if (!PyArg_ParseTuple(args, "y*y*", &hay, &needle))
        return NULL;
    if (hay.len >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        found = memmem(hay.buf, (size_t)hay.len, needle.buf, (size_t)needle.len);
        Py_END_ALLOW_THREADS
    } else {
        found = memmem(hay.buf, (size_t)hay.len, needle.buf, (size_t)needle.len);
    }
    PyBuffer_Release(&hay);
    PyBuffer_Release(&needle);
    return PyBool_FromLong(found != NULL);
}

/* java_hash(str) -> int: Java's String.hashCode (over UTF-16 code units, signed 32-bit) of the
 * index's "topic#key" strings; engine.index_file.key_hash falls back to the same in Python.
 * A code point above U+FFFF counts as its surrogate pair, as Java sees it; a lone surrogate
 * (Python's "surrogatepass") as itself. */
static PyObject *java_hash(PyObject *self, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "java_hash() takes a str, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0x10000) {
            c -= 0x10000;
            h = 31u * h + (uint32_t)(0xD800 + (c >> 10));
            h = 31u * h + (uint32_t)(0xDC00 + (c & 0x3FF));
        } else {
            h = 31u * h + (uint32_t)c;
        }
    }
    return PyLong_FromLong((long)(int32_t)h);
}

static PyMethodDef methods[] = {
    {"walk_keys", walk_keys, METH_VARARGS, "walk_keys(buffer, pos, end, count) -> list of the records' keys"},
    {"contains", contains, METH_VARARGS, "contains(buffer, needle) -> whether needle occurs in buffer"},
    {"java_hash", java_hash, METH_O, "java_hash(str) -> Java's String.hashCode of str"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "engine._recordwalk",
                                    "Kafka record key walk (fast path of engine.record_batch.record_keys)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__recordwalk(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    WalkError = PyErr_NewException("engine._recordwalk.WalkError", PyExc_ValueError, NULL);
    if (WalkError == NULL || PyModule_AddObjectRef(m, "WalkError", WalkError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
