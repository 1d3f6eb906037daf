"""The file-system layer: the read calls a rank issued, counted by the Linux kernel's own I/O accounting.

``/proc/<pid>/io`` (and ``/proc/thread-self/io`` per thread) count every read system call a process makes
(``syscr``: read, pread64, readv, preadv) and the bytes those calls returned (``rchar``), whoever issued them: ddlio's
own ``os.preadv``, zipfile's buffered reads, HDF5's C library (its sec2 driver's ``pread``) or TensorFlow's C++
readers. Nothing is routed through Python, so each format keeps its normal I/O path.

- Per rank and epoch, :class:`IOCounter` on ``/proc/self/io`` read just before the first sample and just after
  the last file is closed gives the epoch's read calls and bytes. Reading the counter is itself one read call that
  returns ``len(text)`` bytes; those are subtracted exactly (the text read is kept).
- Per span of batches, a counter on ``/proc/thread-self/io`` of the reading thread gives the calls and bytes of
  the span's samples (apart from its opens'; what the thread read between two batches counts with the span: nothing,
  in the kernel). A span is the batches a lane reads back to back until they hold ``Lane.span_samples`` (256)
  samples; it also ends where the lane's next batch does not follow on (reader threads) and when the lane closes
  its files; each file the lane opens is bracketed apart. The text taken at a span's end starts the next span;
  the lane's first batch of an epoch reads it before its first sample too. Reading it costs about 2 µs, more than
  a page-cache read of 4 KiB, so it is never read per sample, nor per small batch. Where the span's samples made
  exactly one read call each (the calls equal the samples and the bytes equal what the reads
  returned, as the application layer counted them), each call goes into the Darshan ``POSIX_SIZE_READ_*`` bin of
  its sample's size, from the application layer (:attr:`SizeHistogram.from_app` counts them). Where the two
  layers disagree (a library reading more or less than it returns: HDF5's sieve buffer, a whole-file load, zip
  headers), the span's ``c`` calls all go into the bin of their mean size, and :attr:`SizeHistogram.approx`
  counts them when ``c > 1`` (one call's size is its bytes). An open's own reads are binned the same way. The
  time is that of the spans whose reads reached the file system (an upper bound of Darshan's
  ``POSIX_F_READ_TIME``: it includes the library's work around the calls and, in a span where the layers
  disagree, the samples served from the library's buffers). With ``reader=tf`` there is no per-sample view:
  counts and bytes only. (Results before this change read the counter around every sample:
  ``posix_size_from_app`` absent.)

What it cannot see: reads through a memory mapping (page faults), io_uring and AIO, reads done by another process
(a helper daemon, a FUSE server), and which file a call read (every read call of the process in the epoch counts; the
strace test checks that there are none but those on the dataset's files).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ddlio.metrics import SIZE_BINS, RankEpoch, size_bin
from lustre.io import PosixIO, StorageIO

#: one lane's epoch (:meth:`experiments.kernel.lanes.Lane.take_snaps`): its thread's counter texts in order, and
#: per interval ``j`` (between text ``j`` and ``j + 1``) the samples ``(ka, kb)`` it read, ka..kb-1, or ``(-1, -1)``
#: where the interval is a file's open
LaneSnaps = tuple[list[bytes], list[tuple[int, int]]]
_TOPS = np.array([top for _, top in SIZE_BINS])

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
    """Reads of one /proc io file kept open, through the I/O seam's counters (``io``: the dataset's storage's
    :class:`lustre.io.StorageIO`, POSIX's by default): :meth:`snap` is one ``pread`` of it, returning its raw text,
    which states the counters as they were before that call. The call itself adds 1 to ``syscr`` and ``len(text)``
    to ``rchar`` (bytes); :attr:`calls` and :attr:`bytes` say how much all snaps so far added, for subtraction."""

    def __init__(self, path: str = "/proc/self/io", io: StorageIO | None = None) -> None:
        self.path = path
        self.io = io if io is not None else PosixIO()
        self.fd = self.io.open_counter(path)
        self.calls = 0
        self.bytes = 0

    def snap(self) -> bytes:
        text = self.io.read_counter(self.fd)
        self.calls += 1
        self.bytes += len(text)
        return text

    def close(self) -> None:
        self.io.close(self.fd)


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
    """Read calls per Darshan size bin; ``approx``: how many were binned by the mean size of several calls;
    ``from_app``: how many were binned by their sample's size from the application layer (the layers agreed)."""

    counts: list[int]
    approx: int = 0
    calls: int = 0
    bytes: int = 0
    time_ns: int = 0
    from_app: int = 0

    @classmethod
    def empty(cls) -> SizeHistogram:
        return cls([0] * len(SIZE_BINS))

    def add_sample(self, calls: int, nbytes: int, lat_ns: int) -> None:
        """``calls`` read calls returning ``nbytes`` in all, of unknown sizes each (binned by their mean), and the
        time (ns) they took."""
        if calls <= 0:
            return
        self.counts[size_bin(nbytes / calls)] += calls
        if calls > 1:
            self.approx += calls
        self.calls += calls
        self.bytes += nbytes
        self.time_ns += lat_ns

    def add_batch(self, calls: int, nbytes: int, sizes: list[int], lats: list[int]) -> None:
        """A batch's samples (or the part of it between two opens): ``calls`` read calls returning ``nbytes``,
        for samples whose reads returned ``sizes`` (bytes) in ``lats`` (ns). One call per sample of its size when
        the layers agree (the calls are the samples, the bytes what they returned); else by the mean."""
        if calls > 0 and calls == len(sizes) and nbytes == sum(sizes):
            for k in np.searchsorted(_TOPS, np.asarray(sizes, dtype=np.float64), side="left").tolist():
                self.counts[k] += 1
            self.from_app += calls
            self.calls += calls
            self.bytes += nbytes
            self.time_ns += sum(lats)
        else:
            self.add_sample(calls, nbytes, sum(lats) if calls > 0 else 0)


def sample_deltas(snaps: list[bytes]) -> list[tuple[int, int]]:
    """Per interval between consecutive snaps of one thread's counter: ``(read calls, bytes)`` of what the thread
    did in it, without the snap that opened the interval."""
    vals = [parse(s) for s in snaps]
    return [(c1 - c0 - 1, b1 - b0 - len(s0))
            for (c0, b0), (c1, b1), s0 in zip(vals, vals[1:], snaps, strict=False)]


def epoch_layer(m: RankEpoch, io0: bytes, io1: bytes, snaps: list[LaneSnaps], lat: list[int], size: list[int],
                per_sample: bool) -> None:
    """Fill ``m``'s file-system layer: the epoch's read calls (the process's counters ``io0``/``io1``, less every
    counter read of the epoch) and, where each batch was bracketed by its thread's counters (``snaps``, one per
    lane), their size histogram and time (``lat``: each sample's latency, ns; ``size``: the bytes each sample's
    read returned)."""
    if not io0:
        return
    c0, b0, r0 = parse_all(io0)
    c1, b1, r1 = parse_all(io1)
    m.os_read_bytes = r1 - r0
    own_calls = 1 + sum(len(texts) for texts, _ in snaps)
    own_bytes = len(io0) + sum(len(t) for texts, _ in snaps for t in texts)
    m.posix_reads = c1 - c0 - own_calls
    m.posix_bytes_read = b1 - b0 - own_bytes
    if not per_sample:
        return
    h = SizeHistogram.empty()
    for lane in snaps:
        bin_spans(h, lane, size, lat)
    fill_sizes(m, h)


def bin_spans(h: SizeHistogram, snaps: LaneSnaps, size: list[int], lat: list[int]) -> None:
    """Add one reading thread's spans to ``h``: ``snaps`` its counter texts and spans (a lane's, or a DataLoader
    worker's batch: :meth:`experiments.kernel.torchset.FileSamples.__getitems__`), ``size``/``lat`` the bytes and
    latency (ns) of the samples the spans index."""
    texts, spans = snaps
    for (calls, nbytes), (ka, kb) in zip(sample_deltas(texts), spans, strict=True):
        if ka < 0:  # a file's open: its reads count, its time is metadata time
            h.add_sample(calls, nbytes, 0)
        else:
            h.add_batch(calls, nbytes, size[ka:kb], lat[ka:kb])


def fill_sizes(m: RankEpoch, h: SizeHistogram) -> None:
    """``m``'s size bins and the time of the reads in them (s) from ``h``."""
    m.posix_size_hist = h.counts
    m.posix_size_approx = h.approx
    m.posix_size_from_app = h.from_app
    m.posix_read_time_s = h.time_ns / 1e9
