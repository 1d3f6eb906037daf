/* The kernel's per-read loop in C, for readers that read a record with one positioned read into one buffer
 * (experiments.formats.indexed.IndexedReader: bin, npy, ...).
 *
 * read_run(fd, buf, starts, fo, lo, f, k, k1, lat, start, size) reads samples k.. of an epoch while they are in
 * file f (fo[k] == f) and k < k1: sample k is record lo[k], spanning starts[lo[k]]:starts[lo[k] + 1] of the file
 * (bytes), read with one preadv(2) of one iovec into buf -- the very call the Python reader makes. Around each call
 * it reads CLOCK_MONOTONIC (the clock of Python's time.perf_counter_ns, so the times mix with the kernel's other
 * ones) and stores the read's latency in lat[k] (ns), its start in start[k] and the bytes it returned in size[k]
 * (when those lists are not empty), as Darshan's wrappers time the call itself. The GIL is released around each
 * call alone, as os.preadv does: the hang guard's thread sees every read return.
 *
 * Returns (k_end, nbytes, short): the first sample not read, the bytes the reads returned, and -1 or, if the read
 * of sample k_end returned fewer bytes than its record spans, what it returned (the caller raises). An OSError
 * from preadv is raised with errno, as os.preadv raises it. fo, lo, starts, lat, start and size are lists of ints.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <sys/uio.h>
#include <time.h>

static inline long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int item_ll(PyObject *list, Py_ssize_t i, long long *out)
{
    long long v = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

/* list[i] = obj (a new reference), releasing the item it replaces */
static void put(PyObject *list, Py_ssize_t i, PyObject *obj)
{
    PyObject *old = PyList_GET_ITEM(list, i);
    PyList_SET_ITEM(list, i, obj);
    Py_DECREF(old);
}

static int set_ll(PyObject *list, Py_ssize_t i, long long v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return -1;
    put(list, i, o);
    return 0;
}

static PyObject *read_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "read_run takes 11 arguments");
        return NULL;
    }
    int fd = (int)PyLong_AsLong(args[0]);
    long long f = PyLong_AsLongLong(args[5]);
    Py_ssize_t k = PyLong_AsSsize_t(args[6]), k1 = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *starts = args[2], *fo = args[3], *lo = args[4], *lat = args[8], *start = args[9], *size = args[10];
    if (!PyList_Check(starts) || !PyList_Check(fo) || !PyList_Check(lo) || !PyList_Check(lat) ||
        !PyList_Check(start) || !PyList_Check(size)) {
        PyErr_SetString(PyExc_TypeError, "read_run: starts, fo, lo, lat, start and size must be lists");
        return NULL;
    }
    int keep_start = PyList_GET_SIZE(start) > 0, keep_size = PyList_GET_SIZE(size) > 0;
    Py_ssize_t n = PyList_GET_SIZE(fo), nstarts = PyList_GET_SIZE(starts);
    if (k < 0 || k1 > n || PyList_GET_SIZE(lo) < k1 || PyList_GET_SIZE(lat) < k1 ||
        (keep_start && PyList_GET_SIZE(start) < k1) || (keep_size && PyList_GET_SIZE(size) < k1)) {
        PyErr_SetString(PyExc_IndexError, "read_run: samples out of the epoch's lists");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    long long nbytes = 0, short_n = -1;
    PyObject *last_size = NULL;
    ssize_t last_r = -1;
    for (; k < k1; k++) {
        long long fk, i, off, end;
        if (item_ll(fo, k, &fk) < 0 || item_ll(lo, k, &i) < 0)
            goto fail;
        if (fk != f)
            break;
        if (i < 0 || i + 1 >= nstarts) {
            PyErr_Format(PyExc_IndexError, "read_run: record %lld out of the file's index", i);
            goto fail;
        }
        if (item_ll(starts, (Py_ssize_t)i, &off) < 0 || item_ll(starts, (Py_ssize_t)i + 1, &end) < 0)
            goto fail;
        long long span = end - off;
        /* as the Python reader's memoryview slice: never past the buffer's end */
        struct iovec iov = {view.buf, (size_t)(span < 0 ? 0 : (span > view.len ? view.len : span))};
        long long t0, t1;
        ssize_t r;
        Py_BEGIN_ALLOW_THREADS
        t0 = now_ns();
        r = preadv(fd, &iov, 1, (off_t)off);
        t1 = now_ns();
        Py_END_ALLOW_THREADS
        if (r < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
        if ((long long)r != span) {
            short_n = r;
            break;
        }
        if (set_ll(lat, k, t1 - t0) < 0 || (keep_start && set_ll(start, k, t0) < 0))
            goto fail;
        if (keep_size) { /* records of one size are the common case: one int object for a run of them */
            if (last_size == NULL || r != last_r) {
                Py_XDECREF(last_size);
                if ((last_size = PyLong_FromSsize_t(r)) == NULL)
                    goto fail;
                last_r = r;
            }
            Py_INCREF(last_size);
            put(size, k, last_size);
        }
        nbytes += r;
    }
    Py_XDECREF(last_size);
    PyBuffer_Release(&view);
    return Py_BuildValue("(nLL)", k, nbytes, short_n);
fail:
    Py_XDECREF(last_size);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"read_run", (PyCFunction)(void (*)(void))read_run, METH_FASTCALL,
     "read_run(fd, buf, starts, fo, lo, f, k, k1, lat, start, size) -> (k_end, nbytes, short): read samples k.. "
     "of file f with one preadv each, timing each call (ns)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_readrun",
    "The kernel's per-read loop in C (see experiments/kernel/lanes.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__readrun(void)
{
    return PyModule_Create(&module);
}
