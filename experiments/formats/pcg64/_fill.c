/* The payload's PCG64 stream, filled in place: the very bytes numpy's PCG64(key).random_raw(n) gives (its 64-bit
 * outputs, little-endian, the last one cut at the buffer's end), written into a caller's buffer without the GIL.
 *
 * numpy's PCG64 is PCG-XSL-RR 128/64: state = state * MULT + inc, then output rotr64(hi ^ lo, state >> 122). Its
 * loop calls the step through a function pointer, one output at a time: each waits for the previous 128-bit
 * multiply (~3.2 GB/s here). This one runs LANES copies of the stream at once, lane j producing outputs j,
 * j + LANES, ... (stepping by MULT^LANES and the matching increment), which the CPU overlaps (~5.5 GB/s here).
 * Optional: built at install where a C compiler is (setup.py); without it ddlio fills from numpy (same bytes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

#define MULT ((((u128)2549297995355413924ULL) << 64) | 4865540595714422341ULL)
#define LANES 8

static inline uint64_t output(u128 s) {
    uint64_t v = (uint64_t)(s >> 64) ^ (uint64_t)s;
    unsigned r = (unsigned)(s >> 122);
    return (v >> r) | (v << ((-r) & 63));
}

static inline void put(unsigned char *dst, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(dst, &v, 8);
}

/* Fill n bytes at dst from the stream whose state is *state (advanced past the outputs used). */
static void fill(unsigned char *dst, size_t n, u128 *state, u128 inc) {
    u128 s = *state;
    size_t words = n / 8, i = 0;
    if (words >= 2 * LANES) {
        u128 lane[LANES], mk = 1, ck = 0;
        for (int j = 0; j < LANES; j++) {
            s = s * MULT + inc;
            lane[j] = s;          /* the state that gives output i + j */
            ck = ck * MULT + inc; /* after the loop: inc * (MULT^(LANES-1) + ... + 1) */
            mk *= MULT;           /* MULT^LANES */
        }
        for (; i + LANES <= words; i += LANES) {
            for (int j = 0; j < LANES; j++) {
                put(dst + 8 * (i + j), output(lane[j]));
            }
            s = lane[LANES - 1]; /* the state of the last output written */
            for (int j = 0; j < LANES; j++) {
                lane[j] = lane[j] * mk + ck;
            }
        }
    }
    for (; i < words; i++) {
        s = s * MULT + inc;
        put(dst + 8 * i, output(s));
    }
    if (n % 8) {
        unsigned char last[8];
        s = s * MULT + inc;
        put(last, output(s));
        memcpy(dst + 8 * words, last, n % 8);
    }
    *state = s;
}

static PyObject *py_fill(PyObject *self, PyObject *args) {
    Py_buffer view;
    unsigned long long s_hi, s_lo, i_hi, i_lo;
    (void)self;
    if (!PyArg_ParseTuple(args, "w*KKKK", &view, &s_hi, &s_lo, &i_hi, &i_lo)) {
        return NULL;
    }
    u128 state = ((u128)s_hi << 64) | s_lo, inc = ((u128)i_hi << 64) | i_lo;
    Py_BEGIN_ALLOW_THREADS
    fill((unsigned char *)view.buf, (size_t)view.len, &state, inc);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("KK", (unsigned long long)(state >> 64), (unsigned long long)state);
}

static PyMethodDef methods[] = {
    {"fill", py_fill, METH_VARARGS,
     "fill(buffer, state_hi, state_lo, inc_hi, inc_lo) -> (state_hi, state_lo): fill the writable buffer with "
     "PCG64's output stream from that 128-bit state and increment (numpy's PCG64 bytes), without the GIL; returns "
     "the state after the last output used."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fill", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fill(void) { return PyModule_Create(&module); }
