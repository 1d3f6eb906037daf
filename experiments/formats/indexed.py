"""What the formats that keep their records back to back in one data file share (``bin``, ``npy``, ``jpeg``,
``png``): a sidecar index ``<file>.idx`` — an int64 ``.npy`` array of n+1 offsets (bytes, relative to where the
records start), record i spanning ``offsets[i]:offsets[i+1]`` — and a reader that loads the index once at open and
reads each record with one positioned read into the caller's buffer.

TFRecord's ``.idx`` has the same layout but keeps its own code (its frames are checked on read).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ddlio.errors import FormatError
from ddlio.lazy import lazy_import
from experiments.formats.base import Reader, fsync_path

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py


def index_path(path: str | os.PathLike) -> Path:
    """The sidecar index of data file ``path``."""
    return Path(str(path) + ".idx")


def offsets_of(lengths: Iterable[int]) -> np.ndarray:
    """int64 offsets (n+1 entries, from 0) of records of the given lengths (bytes) laid back to back."""
    lengths = (np.asarray(lengths, dtype=np.int64) if isinstance(lengths, np.ndarray)
               else np.fromiter(lengths, dtype=np.int64))
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def write_index(path: str | os.PathLike, offsets: np.ndarray) -> None:
    """Write and fsync the sidecar index of data file ``path``."""
    with open(index_path(path), "wb") as f:
        np.save(f, np.asarray(offsets, dtype=np.int64))
    fsync_path(index_path(path))


def read_index(path: str | os.PathLike) -> np.ndarray:
    """The offsets in data file ``path``'s index, checked (1-D int64, from 0, non-decreasing); else FormatError."""
    idx = index_path(path)
    try:
        offsets = np.load(idx, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise FormatError(f"{path}: its index {idx.name} is missing or corrupt ({e})") from e
    if offsets.dtype != np.int64 or offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or np.any(
        np.diff(offsets) < 0
    ):
        raise FormatError(f"{path}: its index {idx.name} is corrupt (not n+1 increasing int64 offsets from 0)")
    return offsets


class IndexedReader(Reader):
    """A data file whose records start at byte ``base`` and whose offsets are in the sidecar index.

    ``read`` is one ``os.preadv`` of the whole record into the caller's buffer, then :meth:`check` (a hook that
    formats with a signature or decoding override); it returns the bytes the read returned.
    """

    def __init__(self, path: str | os.PathLike, offsets: np.ndarray | None = None, base: int = 0) -> None:
        self.path = str(path)
        self.offsets = read_index(path) if offsets is None else offsets
        self.num_samples = len(self.offsets) - 1
        self._base = base
        # the per-read path does no numpy scalar conversions and calls the check hook only if a format has one;
        # its list of record starts (``_starts``) is made on first use (__getattr__): the C loop reads the array
        self._check = None if type(self).check is IndexedReader.check else self.check
        self._out: np.ndarray | None = None
        self._view = memoryview(b"")
        self._span, self._iov = -1, [self._view]
        #: for the kernel's C loop (experiments/kernel/_readrun.c), which makes this very read: (fd, record starts
        #: as an int64 array); None for a format whose records are checked on read
        self.native_loop: tuple[int, np.ndarray] | None = None
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except OSError as e:
            raise FormatError(f"{path}: not a readable data file ({e})") from e
        size = os.fstat(self._fd).st_size
        if size < base + self.offsets[-1]:
            os.close(self._fd)
            raise FormatError(f"{path}: truncated: {size} bytes, the index expects {base + int(self.offsets[-1])}")
        if self._check is None:
            self.native_loop = (self._fd, np.ascontiguousarray(self.offsets + base, dtype=np.int64))

    def __getattr__(self, name: str) -> Any:
        """``_starts``, the record starts (bytes) as a list for the Python read path, made on first use: a file
        read by the C loop never builds it (65,537 ints of a 4 GiB file of 64 KiB records cost 1-5 ms per open,
        inside the timed epoch); called only when an attribute is missing, so the read path pays nothing."""
        if name == "_starts":
            self._starts = (self.offsets + self._base).tolist()
            return self._starts
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def record_bytes(self, i: int) -> int:
        return int(self.offsets[i + 1] - self.offsets[i])

    def record_offset(self, i: int) -> int:
        return self._starts[i]

    def read(self, i: int, out: np.ndarray) -> int:
        off = self._starts[i]
        span = self._starts[i + 1] - off
        if out is not self._out or span != self._span:  # the kernel reuses one buffer: build its iovec once
            if out is not self._out:
                self._out, self._view = out, memoryview(out)
            self._span, self._iov = span, [self._view[:span]]
        n = os.preadv(self._fd, self._iov, off)
        if n != span:
            raise self.short_read(i, n)
        if self._check is not None:
            self._check(i, out[:n])
        return n

    def short_read(self, i: int, n: int) -> FormatError:
        """The error of a read of record ``i`` that returned ``n`` bytes, fewer than the record spans."""
        off = self._starts[i]
        return FormatError(f"{self.path}: record {i} truncated: read {n} of {self._starts[i + 1] - off} bytes at {off}")

    def check(self, i: int, record: np.ndarray) -> None:
        """Validate (or decode) record ``i`` just read; raise FormatError if it is not what the format writes."""

    def close(self) -> None:
        os.close(self._fd)
