"""The format abstraction: write a file of samples, open it, read sample ``i`` into a caller's buffer.

Every format module defines one :class:`Format` subclass and registers it (see ``__init__``). Readers count the
bytes that their read calls returned; the kernel compares that count with the plan.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ddlio.errors import ConfigError
from ddlio.lazy import lazy_import
from experiments.formats.pcg64 import random_bytes

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

#: Samples are generated in groups of at most this many bytes, each from its own seeded stream, so a sample's
#: payload can be regenerated on its own (tests) and generation never holds a whole file in memory.
GROUP_BYTES = 8 * 1024 * 1024
#: Threads that generate a file's payload ahead of its writer (see :meth:`FilePayload.iter_groups`): PCG64
#: makes about 1.5 GB/s per core here, about what one writer copies into the page cache, so two keep it busy.
GENERATOR_THREADS = 2
#: Payload kinds besides a compressibility ratio (``workload.payload``).
PAYLOAD_KINDS = ("random", "zeros")
#: A compressible payload is made of blocks of this many bytes, each random for its first ``1/ratio`` and zero
#: after: deflate (gzip), lzf and PNG then store the random part as is and the zeros almost for free.
COMPRESS_BLOCK = 4096
#: Labels that layouts with a label array (HDF5 ``labels``, NPZ ``y``, TFRecord ``label``) store: sample i of a file
#: is labelled ``i % NUM_CLASSES`` (small enough that every label is one protobuf varint byte)
NUM_CLASSES = 10


def sample_labels(n: int) -> np.ndarray:
    """The int64 labels of a file's ``n`` samples (see :data:`NUM_CLASSES`)."""
    return np.arange(n, dtype=np.int64) % NUM_CLASSES


def parse_payload(value: object) -> str:
    """Normalise a ``workload.payload`` value: ``random``, ``zeros``, or a compressibility ratio > 1 as a float
    string (``2`` -> ``"2.0"``), so that equal payloads share one dataset key. ``ValueError`` names the choices."""
    text = str(value).strip().lower()
    if text in PAYLOAD_KINDS:
        return text
    try:
        ratio = float(text)
    except ValueError:
        ratio = float("nan")
    if not (ratio > 1 and ratio < float("inf")):
        raise ValueError(
            f"workload.payload={value!r} is unknown: choose random (incompressible), zeros, or a compressibility "
            "ratio > 1 (e.g. 2.0: compresses about 2:1 with gzip)"
        )
    return repr(ratio)


@dataclass(frozen=True)
class FilePayload:
    """The deterministic payload of one data file: ``sizes[i]`` bytes for its sample ``i``.

    ``kind`` (see :func:`parse_payload`): ``random`` bytes are pseudo-random (incompressible), drawn from PCG64
    streams keyed by (seed, file index, group); ``zeros`` are all zero; a ratio r keeps the first
    ``round(COMPRESS_BLOCK / r)`` bytes of every COMPRESS_BLOCK-byte block of the random stream and zeroes the rest,
    so gzip compresses it about r:1 (blocks count from the start of each generation group).

    ``shape`` (``workload.sample_shape``): when given, every sample is a uint8 array of that shape, so every size
    is its product; layouts that store N-d arrays need it (``()``: samples are byte strings).
    """

    seed: int
    file_index: int
    sizes: np.ndarray  # int64, bytes per sample
    kind: str = "random"
    shape: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        parse_payload(self.kind)  # ValueError naming the valid kinds, before any byte is generated
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.shape and np.any(self.sizes != math.prod(self.shape)):
            raise ValueError(f"samples of shape {list(self.shape)} hold {math.prod(self.shape)} bytes each, "
                             "not the sizes given")

    @property
    def labels(self) -> np.ndarray:
        """Each sample's label (int64; see :func:`sample_labels`)."""
        return sample_labels(len(self.sizes))

    def groups(self) -> list[tuple[int, int]]:
        """``[(lo, hi), ...]`` sample ranges generated together (each under GROUP_BYTES, at least one sample)."""
        out, lo, acc = [], 0, 0
        for i, s in enumerate(self.sizes.tolist()):
            if i > lo and acc + s > GROUP_BYTES:
                out.append((lo, i))
                lo, acc = i, 0
            acc += s
        if len(self.sizes):
            out.append((lo, len(self.sizes)))
        return out

    def _group_bytes(self, lo: int, hi: int, out: np.ndarray | None = None) -> np.ndarray:
        """The bytes of samples lo..hi-1 back to back: a new array, or the start of ``out`` filled in place."""
        n = int(self.sizes[lo:hi].sum())
        if self.kind == "zeros":
            if out is None:
                return np.zeros(n, dtype=np.uint8)
            out[:n] = 0
            return out[:n]
        buf = random_bytes((self.seed, self.file_index, lo), n, out)
        if self.kind == "random":
            return buf
        keep = max(1, round(COMPRESS_BLOCK / float(self.kind)))
        whole = n - n % COMPRESS_BLOCK
        buf[:whole].reshape(-1, COMPRESS_BLOCK)[:, keep:] = 0
        buf[whole + keep :] = 0
        return buf

    def iter_groups(
        self, threads: int | None = None, prepare: Callable[[int, int, np.ndarray], Any] | None = None,
        reuse: bool = False, part: slice | None = None,
    ) -> Iterator[tuple[int, int, Any]]:
        """Yield ``(lo, hi, bytes of samples lo..hi-1 back to back)`` in order, each a writable uint8 array
        (or, with ``prepare``, what ``prepare(lo, hi, array)`` returns: a format's framing of the group).

        With ``threads`` >= 1 the groups are generated (and prepared) ahead, at most ``threads + 1`` of them (8 MiB
        each), by that many background threads while the caller writes the current one: the generator and file
        writes release the GIL, so they run at once. ``threads=0`` generates each group in the caller's thread
        when asked for; None: :data:`GENERATOR_THREADS`.

        ``reuse``: the arrays are ``threads + 2`` buffers filled again and again, as fio writes from the same
        buffers: each array (and what ``prepare`` made of it) is valid until the caller asks for the next group.
        Fresh arrays for every group cost a page fault per 4 KiB (in a VM whose host takes freed memory back, more
        than the write); without ``reuse`` every array is the caller's to keep.

        ``part``: only these of :meth:`groups` (one writer's share of a file several processes write: each group's
        bytes depend on the group alone, so any share of them is the bytes the whole file holds there).
        """
        threads = GENERATOR_THREADS if threads is None else threads
        groups = self.groups() if part is None else self.groups()[part]
        free: deque[np.ndarray] = deque()

        def buffer(lo: int, hi: int) -> np.ndarray | None:
            """A free buffer for the group (None without ``reuse``), taken in the caller's thread."""
            if not reuse:
                return None
            n = int(self.sizes[lo:hi].sum())
            while free and len(free[0]) < n:
                free.popleft()  # too small for this group: let it go
            return free.popleft() if free else np.empty(max(n, GROUP_BYTES), dtype=np.uint8)

        def make(lo: int, hi: int, out: np.ndarray | None) -> Any:
            buf = self._group_bytes(lo, hi, out)
            return buf if prepare is None else prepare(lo, hi, buf)

        if threads <= 0 or len(groups) <= 1:
            for lo, hi in groups:
                out = buffer(lo, hi)
                yield lo, hi, make(lo, hi, out)
                if out is not None:
                    free.append(out)
            return
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="ddlio-payload")
        pending: deque[tuple[int, int, np.ndarray | None, Future[Any]]] = deque()
        try:
            nxt = 0
            while pending or nxt < len(groups):
                while nxt < len(groups) and len(pending) <= threads:
                    lo, hi = groups[nxt]
                    out = buffer(lo, hi)
                    pending.append((lo, hi, out, pool.submit(make, lo, hi, out)))
                    nxt += 1
                lo, hi, out, fut = pending.popleft()
                yield lo, hi, fut.result()
                if out is not None:  # the caller is done with it: the next group may fill it
                    free.append(out)
        finally:  # also when the caller stops early (an error while writing): no thread is left behind
            for *_, fut in pending:
                fut.cancel()
            pool.shutdown(wait=True)

    def sample(self, i: int) -> bytes:
        """Sample ``i``'s payload, regenerated (for tests and verification)."""
        for lo, hi in self.groups():
            if lo <= i < hi:
                buf = self._group_bytes(lo, hi)
                start = int(self.sizes[lo:i].sum())
                return buf[start : start + int(self.sizes[i])].tobytes()
        raise IndexError(i)

    @property
    def total_bytes(self) -> int:
        return int(self.sizes.sum())


class Reader:
    """An open data file. ``read(i, out)`` reads sample ``i`` into ``out`` (a uint8 array at least
    ``record_bytes(i)`` long) and returns the number of bytes the read calls returned."""

    num_samples: int

    def read(self, i: int, out: np.ndarray) -> int:
        raise NotImplementedError

    def payload(self, i: int, out: np.ndarray) -> np.ndarray:
        """Read sample ``i`` and return a view of its payload in ``out`` (framing stripped)."""
        n = self.read(i, out)
        return out[:n]

    def fetch(self, i: int, out: np.ndarray) -> tuple[int, np.ndarray]:
        """Read sample ``i`` as a loader hands it on: (bytes the read calls returned, the sample as read — the
        record in ``out``, or the array the library returned). For ``reader=tf``'s generator."""
        n = self.read(i, out)
        return n, out[:n]

    #: whole-file loaders only (``load=whole``): how many times this reader loaded its file whole
    loads: int = 0

    def release(self) -> None:
        """Drop what the reader holds in memory beyond its open file (a file loaded whole); the next read loads
        it again. The kernel calls it when a lane moves on to another file."""

    def record_bytes(self, i: int) -> int:
        """Bytes one read of sample ``i`` returns (payload plus any inline framing)."""
        raise NotImplementedError

    def record_offset(self, i: int) -> int:
        """Byte offset in the file where sample ``i``'s read starts (for access logs); -1 where the format's
        library decides (chunked HDF5)."""
        return -1

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ArrayReturningReader(Reader):
    """A reader whose library hands each sample back as an array of its own (h5py's ``ds[i]``, ``np.load``)
    instead of filling the caller's buffer: :meth:`read` keeps it in ``_last``, and :meth:`payload` and
    :meth:`fetch` give it back as is."""

    _last: np.ndarray  # the last sample read (each subclass's __init__ sets an empty one)

    def payload(self, i: int, out: np.ndarray) -> np.ndarray:
        self.read(i, out)
        return self._last.reshape(-1)

    def fetch(self, i: int, out: np.ndarray) -> tuple[int, np.ndarray]:
        return self.read(i, out), self._last


#: omegaconf's MISSING ("???": a value the composition must give), spelled out so that reading a format (a kernel
#: rank) does not import omegaconf (tests/test_point_fields.py checks it is omegaconf's)
MISSING = "???"


@dataclass
class FormatConf:
    """The Hydra schema of a format's config group (``conf/format/<name>.yaml``); each format module subclasses it
    with its own options, and :attr:`Format.conf` names it."""

    # file format, one of experiments.formats.FORMATS (hdf5, tfrecord, npz, npy, bin, jpeg, png, parquet)
    name: str = MISSING


class Format:
    """One file format. Subclasses set ``name``/``suffix``/``conf`` and implement ``write`` and ``open``."""

    name: ClassVar[str]
    suffix: ClassVar[str]
    #: the Hydra schema of the format's options (registered as ``schema/format/<name>``)
    conf: ClassVar[type[FormatConf]] = FormatConf
    #: bytes read per sample beyond its payload (inline framing), for the byte plan
    record_overhead: ClassVar[int] = 0
    #: options that change only how files are read, not their bytes: left out of the dataset key
    read_options: ClassVar[frozenset[str]] = frozenset()
    #: options added after points were measured: at these values they stay out of the dataset and point keys
    #: (so existing stores keep their keys); any other value is hashed like every option
    keyless_defaults: ClassVar[dict[str, Any]] = {}
    #: None: :meth:`decode_payload` gives back the source bytes exactly; a number: the format is lossy (JPEG) and
    #: the decoded payload is guaranteed within this PSNR (dB) of the source bytes, whatever the payload
    min_psnr_db: ClassVar[float | None] = None
    #: whether a reader notices damaged data bytes (a header, framing or checksum to check); raw ``bin`` cannot
    detects_corrupt_data: ClassVar[bool] = True
    #: the libraries its writer imports on first use (``h5py``): a writer started ahead loads them while it waits
    #: (:mod:`experiments.run.forked`)
    writer_libraries: ClassVar[tuple[str, ...]] = ()
    #: the format's ``layout`` choices, the first one the default (today's bytes; keyless); empty: one layout
    layouts: ClassVar[tuple[str, ...]] = ()
    #: the layouts that store N-d arrays of ``workload.sample_shape`` samples (and so need it)
    shaped_layouts: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, **options: Any) -> None:
        problems = self.problems(options)
        if problems:
            raise ConfigError(problems)
        self.options = options

    @property
    def layout(self) -> str:
        """The layout the files are written in (``""`` for a format with one layout)."""
        return self.options.get("layout", self.layouts[0]) if self.layouts else ""

    @property
    def loads_whole(self) -> bool:
        """Whether a reader loads its file whole on its first read (``load=whole``) instead of reading samples."""
        return False

    def whole_load_bytes(self, path: str | os.PathLike) -> int | None:
        """Bytes the read calls of one whole load of ``path`` return (the plan of ``load=whole``), worked out
        from the file's structure without reading its data; None for a format that cannot load files whole."""
        return None

    @classmethod
    def problems(cls, options: dict[str, Any], sample_shape: tuple[int, ...] | None = None) -> list[str]:
        """Every problem with ``options`` (the format's config group values, minus ``name``): the layout, the
        format's own options, and when ``sample_shape`` is given, whether the layout can use it."""
        out = []
        if cls.layouts:
            layout = options.get("layout", cls.layouts[0])
            if layout not in cls.layouts:
                out.append(f"format.layout={layout!r} is unknown for {cls.name}: choose one of "
                           f"{', '.join(cls.layouts)}")
            elif sample_shape is not None and layout in cls.shaped_layouts and not sample_shape:
                out.append(f"format.layout={layout} stores each sample as an N-d array: it needs "
                           "workload.sample_shape (e.g. workload.sample_shape=[512,512,3])")
        return out + cls.option_problems(options)

    def expected_record_bytes(self, sizes: np.ndarray) -> np.ndarray | None:
        """Bytes one read of each sample will return, given payload sizes; None where the format cannot know
        before writing (encoded images). Generation checks the files against it."""
        return sizes + self.record_overhead

    @classmethod
    def at_default(cls, option: str, value: Any) -> bool:
        """Whether ``option`` is at a default that stays out of the keys (see :attr:`keyless_defaults`)."""
        return option in cls.keyless_defaults and cls.keyless_defaults[option] == value

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        """Every problem with ``options`` (the format's config group values, minus ``name``)."""
        return []

    def decode_payload(self, data: bytes) -> bytes:
        """The source payload bytes that a record's payload (as :meth:`Reader.payload` returns it) stands for:
        the bytes themselves, or for an encoded image its decoded pixels. For checks; never on the measured path."""
        return data

    def write(self, path: str | os.PathLike, payload: FilePayload) -> None:
        """Write all of ``payload``'s samples to ``path``, durably (fsync'd before returning)."""
        raise NotImplementedError

    def open(self, path: str | os.PathLike) -> Reader:
        raise NotImplementedError

    def sidecars(self, path: str | os.PathLike) -> list[Path]:
        """Other files that belong to a data file (an index), for eviction and verification."""
        return []


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a written file to storage, so that page-cache eviction later really empties the cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pread_into(fd: int, out: np.ndarray, nbytes: int, offset: int) -> int:
    """One positioned read of ``nbytes`` at ``offset`` into ``out``; returns what the call returned (bytes)."""
    return os.preadv(fd, [memoryview(out)[:nbytes]], offset)
