"""The file-system layer: the read calls a rank issued, counted by the Linux kernel's own I/O accounting.

``/proc/<pid>/io`` (and ``/proc/thread-self/io`` per thread) count every read system call a process makes
(``syscr``: read, pread64, readv, preadv) and the bytes those calls returned (``rchar``), whoever issued them: ddlio's
own ``os.preadv``, zipfile's buffered reads, HDF5's C library (its sec2 driver's ``pread``) or TensorFlow's C++
readers. Nothing is routed through Python, so each format keeps its normal I/O path.

- Per rank and epoch, :class:`IOCounter` on ``/proc/self/io`` read just before the first sample and just after
  the last file is closed gives the epoch's read calls and bytes. Reading the counter is itself one read call that
  returns ``len(text)`` bytes; those are subtracted exactly (the text read is kept).
- Per sample, a counter on ``/proc/thread-self/io`` of the reading thread, read before and after the sample, gives
  the calls and bytes of that one sample (its file's open included). One call of ``b`` bytes goes into its Darshan
  ``POSIX_SIZE_READ_*`` bin exactly; a sample that issued ``c > 1`` calls puts them all into the bin of their mean
  size (:attr:`SizeHistogram.approx` counts them). The sample's latency is the read time of the samples that reached
  the file system (an upper bound of Darshan's ``POSIX_F_READ_TIME``: it includes the library's work around the
  calls). With ``reader=tf`` there is no per-sample view: counts and bytes only.

What it cannot see: reads through a memory mapping (page faults), io_uring and AIO, reads done by another process
(a helper daemon, a FUSE server), and which file a call read (every read call of the process in the epoch counts; the
strace test checks that there are none but those on the dataset's files).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ddlio.metrics import SIZE_BINS, RankEpoch, size_bin

_FIELD = re.compile(rb"(syscr|rchar|read_bytes): (\d+)")


def parse(text: bytes) -> tuple[int, int]:
    """``(syscr, rchar)`` from the text of a /proc io file: read calls, bytes they returned."""
    got = dict(_FIELD.findall(text))
    return int(got[b"syscr"]), int(got[b"rchar"])


def parse_all(text: bytes) -> tuple[int, int, int]:
    """``(syscr, rchar, read_bytes)`` from the text of a /proc io file (``read_bytes``: fetched from storage)."""
    got = dict(_FIELD.findall(text))
    return int(got[b"syscr"]), int(got[b"rchar"]), int(got[b"read_bytes"])


class IOCounter:
    """Reads of one /proc io file kept open: :meth:`snap` is one ``pread`` of it, returning its raw text, which
    states the counters as they were before that call. The call itself adds 1 to ``syscr`` and ``len(text)`` to
    ``rchar``; :meth:`own` says how much all snaps so far added, for subtraction."""

    def __init__(self, path: str = "/proc/self/io") -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        self.calls = 0
        self.bytes = 0

    def snap(self) -> bytes:
        text = os.pread(self.fd, 512, 0)
        self.calls += 1
        self.bytes += len(text)
        return text

    def close(self) -> None:
        os.close(self.fd)


def available() -> bool:
    """Whether this system exposes per-process and per-thread I/O accounting (Linux with task I/O accounting)."""
    try:
        for p in ("/proc/self/io", "/proc/thread-self/io"):
            with open(p, "rb") as f:
                parse(f.read())
    except (OSError, KeyError):
        return False
    return True


@dataclass
class SizeHistogram:
    """Read calls per Darshan size bin; ``approx``: how many were binned by their sample's mean call size."""

    counts: list[int]
    approx: int = 0
    calls: int = 0
    bytes: int = 0
    time_ns: int = 0

    @classmethod
    def empty(cls) -> SizeHistogram:
        return cls([0] * len(SIZE_BINS))

    def add_sample(self, calls: int, nbytes: int, lat_ns: int) -> None:
        """One sample's read calls (``calls``, returning ``nbytes`` in all) and its read latency (ns)."""
        if calls <= 0:
            return
        self.counts[size_bin(nbytes / calls)] += calls
        if calls > 1:
            self.approx += calls
        self.calls += calls
        self.bytes += nbytes
        self.time_ns += lat_ns


def sample_deltas(snaps: list[bytes]) -> list[tuple[int, int]]:
    """Per interval between consecutive snaps of one thread's counter: ``(read calls, bytes)`` of what the thread
    did in it, without the snap that opened the interval."""
    vals = [parse(s) for s in snaps]
    return [(c1 - c0 - 1, b1 - b0 - len(s0))
            for (c0, b0), (c1, b1), s0 in zip(vals, vals[1:], snaps, strict=False)]


def epoch_layer(m: RankEpoch, io0: bytes, io1: bytes, snaps: list[tuple[int, list[bytes], list[int]]],
                lat: list[int], per_sample: bool) -> None:
    """Fill ``m``'s file-system layer: the epoch's read calls (the process's counters ``io0``/``io1``, less every
    counter read of the epoch) and, where each sample was bracketed by its thread's counters (``snaps``, from the
    lanes), their size histogram and time (``lat``: each sample's latency, ns)."""
    if not io0:
        return
    c0, b0, r0 = parse_all(io0)
    c1, b1, r1 = parse_all(io1)
    m.os_read_bytes = r1 - r0
    own_calls = 1 + sum(len(texts) for _, texts, _ in snaps)
    own_bytes = len(io0) + sum(len(t) for _, texts, _ in snaps for t in texts)
    m.posix_reads = c1 - c0 - own_calls
    m.posix_bytes_read = b1 - b0 - own_bytes
    if not per_sample:
        return
    h = SizeHistogram.empty()
    for k0, texts, opens in snaps:
        k = k0
        for j, (calls, nbytes) in enumerate(sample_deltas(texts)):
            if j + 1 in opens:  # a file's open: its reads count, its time is metadata time
                h.add_sample(calls, nbytes, 0)
            else:
                h.add_sample(calls, nbytes, lat[k])
                k += 1
    m.posix_size_hist = h.counts
    m.posix_size_approx = h.approx
    m.posix_read_time_s = h.time_ns / 1e9
