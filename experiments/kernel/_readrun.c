/* The kernel's per-read loop in C, for readers that read a record with one positioned read into one buffer
 * (experiments.formats.indexed.IndexedReader: bin, npy, ...).
 *
 * read_run(fd, buf, starts, fo, lo, f, k, k1, lat, start, size) reads samples k.. of an epoch while they are in
 * file f (fo[k] == f) and k < k1: sample k is record lo[k], spanning starts[lo[k]]:starts[lo[k] + 1] of the file
 * (bytes), read with one preadv(2) of one iovec into buf -- the very call the Python reader makes. Around each call
 * it reads CLOCK_MONOTONIC (the clock of Python's time.perf_counter_ns, so the times mix with the kernel's other
 * ones) and stores the read's latency in lat[k] (ns), its start in start[k] and the bytes it returned in size[k]
 * (when those arrays are not empty), as Darshan's wrappers time the call itself.
 *
 * Every argument but fd, f, k and k1 is a C-contiguous array of int64 (buf: any writable buffer): the reader's
 * record starts, the epoch's files and records (a shuffled epoch looks up offsets all over the index: in a list
 * of ints each lookup is two dependent pointer chases that miss the cache the copies just flushed, about 0.4 us a
 * read here, 6% of a page-cache read of 64 KiB; in an array it is one load) and the per-sample figures
 * (array.array('q') in experiments.kernel.lanes.EpochArrays). Touching no Python object, the loop lets go of the
 * GIL for the whole run of reads, not around each call: the hang guard's thread still sees every read return (a
 * latency is stored as its read returns), and a read stuck in the kernel holds no lock the guard needs.
 *
 * Returns (k_end, nbytes, short): the first sample not read, the bytes the reads returned, and -1 or, if the read
 * of sample k_end returned fewer bytes than its record spans, what it returned (the caller raises). An OSError
 * from preadv is raised with errno, as os.preadv raises it.
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

/* a view of an int64 array argument (a C-contiguous buffer of 8-byte integers), or -1 with TypeError */
static int int64_view(PyObject *obj, const char *name, int writable, Py_buffer *view)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) { /* not a buffer, not contiguous, read-only */
        PyErr_Format(PyExc_TypeError, "read_run: %s must be a contiguous%s array of int64", name,
                     writable ? " writable" : "");
        return -1;
    }
    const char *fmt = view->format ? view->format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    if (view->itemsize != 8 || view->ndim > 1 || !(fmt[0] == 'q' || fmt[0] == 'l') || fmt[1] != 0) {
        PyErr_Format(PyExc_TypeError, "read_run: %s must be a contiguous%s array of int64", name,
                     writable ? " writable" : "");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

enum { STARTS, FO, LO, LAT, START, SIZE, NARRAYS };
static const char *const names[NARRAYS] = {"starts", "fo", "lo", "lat", "start", "size"};

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
    PyObject *objs[NARRAYS] = {args[2], args[3], args[4], args[8], args[9], args[10]};
    Py_buffer v[NARRAYS], view;
    int got = 0, got_buf = 0;
    PyObject *out = NULL;
    for (; got < NARRAYS; got++)
        if (int64_view(objs[got], names[got], got >= LAT, &v[got]) < 0)
            goto done;
    const long long *starts = v[STARTS].buf, *fo = v[FO].buf, *lo = v[LO].buf;
    long long *lat = v[LAT].buf, *start = v[START].buf, *size = v[SIZE].buf;
    int keep_start = v[START].len > 0, keep_size = v[SIZE].len > 0;
    Py_ssize_t nstarts = v[STARTS].len / 8;
    if (k < 0 || k1 > v[FO].len / 8 || v[LO].len / 8 < k1 || v[LAT].len / 8 < k1 ||
        (keep_start && v[START].len / 8 < k1) || (keep_size && v[SIZE].len / 8 < k1)) {
        PyErr_SetString(PyExc_IndexError, "read_run: samples out of the epoch's arrays");
        goto done;
    }
    if (PyObject_GetBuffer(args[1], &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    got_buf = 1;
    long long nbytes = 0, short_n = -1, bad_record = 0;
    int err = 0, bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; k < k1; k++) {
        long long i = lo[k];
        if (fo[k] != f)
            break;
        if (i < 0 || i + 1 >= nstarts) {
            bad_record = i;
            bad = 1;
            break;
        }
        long long off = starts[i], span = starts[i + 1] - off;
        /* the next sample's offsets, fetched while this read copies: a shuffled epoch's next record lies anywhere
         * in the index, and the copy just flushed it from the cache (a miss of ~0.2 us a read at 64 KiB here) */
        if (k + 1 < k1) {
            long long j = lo[k + 1];
            if (j >= 0 && j + 1 < nstarts)
                __builtin_prefetch(&starts[j + 1]);
            if (j >= 0 && j < nstarts)
                __builtin_prefetch(&starts[j]);
        }
        /* as the Python reader's memoryview slice: never past the buffer's end */
        struct iovec iov = {view.buf, (size_t)(span < 0 ? 0 : (span > view.len ? view.len : span))};
        long long t0 = now_ns();
        ssize_t r = preadv(fd, &iov, 1, (off_t)off);
        long long t1 = now_ns();
        if (r < 0) {
            err = errno;
            break;
        }
        if ((long long)r != span) {
            short_n = r;
            break;
        }
        lat[k] = t1 - t0;
        if (keep_start)
            start[k] = t0;
        if (keep_size)
            size[k] = r;
        nbytes += r;
    }
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
    } else if (bad) {
        PyErr_Format(PyExc_IndexError, "read_run: record %lld out of the file's index", bad_record);
    } else {
        out = Py_BuildValue("(nLL)", k, nbytes, short_n);
    }
done:
    if (got_buf)
        PyBuffer_Release(&view);
    while (got-- > 0)
        PyBuffer_Release(&v[got]);
    return out;
}

static PyMethodDef methods[] = {
    {"read_run", (PyCFunction)(void (*)(void))read_run, METH_FASTCALL,
     "read_run(fd, buf, starts, fo, lo, f, k, k1, lat, start, size) -> (k_end, nbytes, short): read samples k.. "
     "of file f with one preadv each, timing each call (ns); every array int64."},
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
