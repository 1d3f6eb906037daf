"""Reading contexts and an epoch's per-sample arrays: a :class:`Lane` (the training loop, or one reader thread)
with its open files and buffer, the hot read loop, and :class:`EpochArrays` (latencies in ns); the busy time of
overlapping reads; one rank's access log."""

from __future__ import annotations

import array
import csv
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments.dataset import DatasetPlan
from lustre.io import PosixIO, StorageIO
from lustre.registry import io_for


def native_read_run() -> Any:
    """The kernel's per-read loop in C (``experiments/kernel/_readrun.c``, built at install when a C compiler is
    there), or None: not built, or ``DDLIO_READ_LOOP=python`` (internal: the benches' reference)."""
    if os.environ.get("DDLIO_READ_LOOP", "native") == "python":
        return None
    try:
        from experiments.kernel._readrun import read_run  # lazy: optional, built only where a C compiler was
    except ImportError:
        return None
    return read_run


class Lane:
    """One reading context — the training loop itself, or one reader thread: its own open files and its own
    preallocated buffer, reused for every read. With the file-system layer on, the lane reads its thread's I/O
    counters (/proc/thread-self/io) around every file it opens and at the end of a batch once the batches read
    back to back since the last reading hold :attr:`span_samples` samples (or when the next batch does not follow
    on, and when the files are closed), never per sample (see :mod:`experiments.kernel.posix`). A reader that
    reads a record with one positioned read into the buffer (its ``native_loop``: its file descriptor and record
    offsets) is read by the C loop of :func:`native_read_run` when it is built: the same ``preadv`` calls, each
    timed around the call alone; :attr:`reads` counts the reads of each loop."""

    #: samples a span of back-to-back batches holds before the lane reads its thread's counters (a reading costs
    #: about 2 µs: under 1% of 256 page-cache reads of 4 KiB)
    span_samples = 256

    def __init__(self, fmt: Any, paths: list[str], buf_bytes: int, trace: bool, fs_layer: bool = False,
                 io: StorageIO | None = None) -> None:
        self.fmt, self.paths = fmt, paths
        #: the I/O seam of the dataset's storage (found for its first file unless given): the lane acquires its
        #: counters' handle through it (a file descriptor, read by ``os.pread`` at each span's end)
        self.io = io if io is not None else (io_for(paths[0]) if paths else PosixIO())
        self.buf = np.empty(max(1, buf_bytes), dtype=np.uint8)
        self.readers: dict[int, Any] = {}
        # load=whole: a lane holds one file in memory; moving on to another file releases the one before
        self.whole = bool(getattr(fmt, "loads_whole", False))
        self._held: Any = None
        self.meta_ns = 0
        self.opens = 0
        self.trace = trace
        self.meta_events: list[tuple[int, int, int, str]] = []  # (start ns, duration ns, file, op)
        self.fs_layer = fs_layer
        self.io_fd = -1  # this lane's thread's /proc/thread-self/io, opened by the thread on its first read
        #: this epoch's :data:`~experiments.kernel.posix.LaneSnaps`: the thread's counter texts in order (one at each
        #: batch's end, doubling as the next batch's start, and around each open) and what each interval between
        #: two consecutive texts holds (samples ka..kb-1, or ``(-1, -1)``: a file's open)
        self.texts: list[bytes] = []
        self.spans: list[tuple[int, int]] = []
        self._ka = -1  # in a span with the counters on: the first sample since the last counter text; else -1
        self._kb = -1  # the end of the span's last batch
        self.read_run = native_read_run()
        self.reads = {"native": 0, "python": 0}  # reads by loop: the C one, the Python one

    def reader_of(self, f: int, k: int = -1) -> Any:
        """The open reader of file ``f``, opening it (a timed metadata op) on first use; ``k``: the epoch's sample
        the lane reads next (where the open falls among the batch's counter texts)."""
        r = self.readers.get(f)
        if r is None:
            ka = self._ka
            if ka >= 0 and ka != k:  # the open's own reads (headers, indexes) apart from the samples'
                self.texts.append(os.pread(self.io_fd, 512, 0))
                self.spans.append((ka, k))
            t = time.perf_counter_ns()
            r = self.readers[f] = self.fmt.open(self.paths[f])
            dt = time.perf_counter_ns() - t
            self.meta_ns += dt
            self.opens += 1
            if self.trace:
                self.meta_events.append((t, dt, f, "open"))
            if ka >= 0:
                self.texts.append(os.pread(self.io_fd, 512, 0))
                self.spans.append((-1, -1))
                self._ka = k
        return r

    def switch_to(self, f: int, k: int = -1) -> Any:
        """File ``f``'s reader, for a lane moving on to ``f`` before sample ``k`` (with ``load=whole``, the file
        held before is released)."""
        r = self.reader_of(f, k)
        if self.whole:
            if self._held is not None and self._held is not r:
                self._held.release()
            self._held = r
        return r

    def whole_loads(self) -> list[tuple[int, int]]:
        """``[(file, times loaded whole)]`` of the files this lane has open (``load=whole``)."""
        return [(f, r.loads) for f, r in self.readers.items()]

    def read_range(self, k0: int, k1: int, ep: EpochArrays) -> int:
        """Read samples k0..k1-1 of the epoch's order; returns the bytes the reads returned. With the counters on,
        the batch joins the lane's open span of samples (see :attr:`span_samples`), never read per sample."""
        if self.fs_layer:
            if self.io_fd < 0:
                self.io_fd = self.io.open_counter("/proc/thread-self/io")
            if not self.texts:  # the lane's first batch of the epoch; after it, the last span's end text
                self.texts.append(os.pread(self.io_fd, 512, 0))
            elif self._ka >= 0 and self._kb != k0:  # this batch does not follow on the open span's last one
                self._close_span()
            if self._ka < 0:
                self._ka = k0
        if k0 < k1 and self.read_run is not None and \
                getattr(self.switch_to(ep.fo[k0], k0), "native_loop", None) is not None:
            nbytes = self._read_native(k0, k1, ep)
        else:
            self.reads["python"] += k1 - k0
            nbytes = self._read_python(k0, k1, ep)
        if self._ka >= 0:
            self._kb = k1
            if k1 - self._ka >= self.span_samples:
                self._close_span()
        return nbytes

    def _close_span(self) -> None:
        """Read the thread's counters: the end of the open span of samples ``_ka.._kb-1``."""
        self.texts.append(os.pread(self.io_fd, 512, 0))
        self.spans.append((self._ka, self._kb))
        self._ka = -1

    def _read_python(self, k0: int, k1: int, ep: EpochArrays) -> int:
        """:meth:`read_range` by the Python loop: each reader's ``read``, two clock reads around it."""
        # the hot loops: locals only, bound methods, Python lists (no numpy scalars), one read call per sample
        perf = time.perf_counter_ns
        buf, fo, lo, lat, start, size = self.buf, ep.fo, ep.lo, ep.lat, ep.start, ep.size
        nbytes = 0
        last_f, read = -1, None
        if not start and not size:  # the lean one: nothing but latency kept
            for k in range(k0, k1):
                f = fo[k]
                if f != last_f:
                    last_f, read = f, self.switch_to(f, k).read
                t = perf()
                nbytes += read(lo[k], buf)
                lat[k] = perf() - t
        elif not start:  # and each read's size (the file-system layer's size bins come from it)
            for k in range(k0, k1):
                f = fo[k]
                if f != last_f:
                    last_f, read = f, self.switch_to(f, k).read
                t = perf()
                n = read(lo[k], buf)
                lat[k] = perf() - t
                size[k] = n
                nbytes += n
        else:
            for k in range(k0, k1):
                f = fo[k]
                if f != last_f:
                    last_f, read = f, self.switch_to(f, k).read
                t = perf()
                n = read(lo[k], buf)
                lat[k] = perf() - t
                start[k] = t
                nbytes += n
                if size:
                    size[k] = n
        return nbytes

    def _read_native(self, k0: int, k1: int, ep: EpochArrays) -> int:
        """:meth:`read_range` by the C loop, one call per run of samples in one file; a reader without a
        ``native_loop`` met in the batch reads its samples by the Python loop."""
        run, buf, fo, lat, start, size = self.read_run, self.buf, ep.fo, ep.lat, ep.start, ep.size
        fo_arr, lo_arr, lo = ep.fo_arr, ep.lo_arr, ep.lo
        k, nbytes, reads = k0, 0, self.reads
        while k < k1:
            f = fo[k]
            r = self.switch_to(f, k)
            loop = getattr(r, "native_loop", None)
            if loop is None:
                nbytes += self._read_python(k, k + 1, ep)
                reads["python"] += 1
                k += 1
                continue
            end, n, short = run(loop[0], buf, loop[1], fo_arr, lo_arr, f, k, k1, lat, start, size)
            nbytes += n
            reads["native"] += end - k
            if short >= 0:
                raise r.short_read(lo[end], short)
            k = end
        return nbytes

    def take_snaps(self) -> tuple[list[bytes], list[tuple[int, int]]]:
        """The counter texts of the epoch so far and their intervals, handed over and forgotten."""
        out = (self.texts, self.spans)
        self.texts, self.spans, self._ka = [], [], -1
        return out

    def record_offsets(self, ep: EpochArrays) -> None:
        """For the access log: the file offset of every read, asked of the readers after the epoch (not in
        the timed loop), before they are closed."""
        for k, (f, i) in enumerate(zip(ep.fo, ep.lo, strict=True)):
            r = self.readers.get(f)
            if r is not None and ep.offset[k] == -2:
                ep.offset[k] = r.record_offset(i)

    def close_all(self) -> None:
        """Close every file the lane opened (timed metadata ops), ending its open span of samples first."""
        if self._ka >= 0:  # the epoch's last span ends here
            self._close_span()
        perf = time.perf_counter_ns
        for f, r in self.readers.items():
            t = perf()
            r.close()
            dt = perf() - t
            self.meta_ns += dt
            if self.trace:
                self.meta_events.append((t, dt, f, "close"))
        self.readers.clear()
        self._held = None


def int64_zeros(n: int) -> array.array:
    """``n`` zeros as an ``array.array('q')`` (int64, C-contiguous)."""
    return array.array("q", bytes(8 * n))


class EpochArrays:
    """Per-sample arrays of one epoch on one rank: file and local index of each read (lists for the Python loop,
    int64 arrays ``fo_arr``, ``lo_arr`` for the C one), latency (ns); start time (perf_counter ns) when reads
    overlap (reader threads) or are logged; the bytes each read returned when logged or when the file-system
    layer bins them (these three int64 ``array.array``, empty when not kept); file offset when logged."""

    def __init__(self, plan: DatasetPlan, ids: np.ndarray, trace: bool, starts_needed: bool = False,
                 sizes_needed: bool = False) -> None:
        starts = plan.file_starts
        file_of = np.searchsorted(starts, ids, side="right") - 1
        self.ids = ids
        self.fo_arr = np.ascontiguousarray(file_of, dtype=np.int64)
        self.lo_arr = np.ascontiguousarray(ids - starts[file_of], dtype=np.int64)
        self.fo, self.lo = self.fo_arr.tolist(), self.lo_arr.tolist()
        n = len(ids)
        # int64 arrays (array.array: filled from the C loop without the GIL, and from the Python loop as cheaply
        # as a list, keeping no int object per sample): read latencies (ns), starts, sizes (bytes)
        self.lat = int64_zeros(n)
        self.start = int64_zeros(n if (trace or starts_needed) else 0)
        self.size = int64_zeros(n if (trace or sizes_needed) else 0)
        self.offset = [-2] * n if trace else []  # -2: not asked yet


def busy_ns(start: np.ndarray, dur: np.ndarray) -> int:
    """Length of the union of the intervals [start, start + dur) in ns: the time at least one read was in
    flight, as Darshan counts a rank's I/O time when its reads overlap (threads)."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], start[order] + dur[order]
    reach = np.maximum.accumulate(e)  # the furthest end among reads started so far
    prev = np.concatenate(([s[0]], reach[:-1]))
    return int(np.maximum(0, e - np.maximum(s, prev)).sum())  # each read adds only what extends the union


def within_epoch(read_s: float, meta_s: float, wall_s: float) -> float:
    """``read_s`` (s) cut so that ``read_s + meta_s`` — the I/O time stored — is at most the epoch's ``wall_s``
    (s) as floats, not only as reals: ``(wall - meta) + meta`` can round one ulp above ``wall``."""
    read_s = max(0.0, min(read_s, wall_s - meta_s))
    while read_s > 0.0 and read_s + meta_s > wall_s:
        read_s = math.nextafter(read_s, 0.0)
    return read_s


TRACE_COLUMNS = ("rank", "epoch", "op", "file", "offset", "size", "start_s", "duration_s")


def write_trace(path: Path, rows: list[tuple]) -> None:
    """One rank's access log: every read, open and close with its start (seconds since rank 0's start, on a
    common wall-clock base), duration (s), file, offset and size (bytes; -1/0 for open and close)."""
    rows.sort(key=lambda r: r[6])
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(TRACE_COLUMNS)
        w.writerows((r[0], r[1], r[2], r[3], r[4], r[5], f"{r[6]:.9f}", f"{r[7]:.9f}") for r in rows)
    os.replace(tmp, path)
