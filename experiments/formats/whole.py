"""``load=whole`` for NPZ and NPY: a file is read by ``np.load`` whole, as DLIO's readers do on every file open,
and its samples are then taken from memory.

``np.load`` reads through :class:`CountingFile`, a raw file that counts the bytes its read calls return (numpy then
reads an array in 256 KiB pieces, as it reads an ``.npz`` member anyway; ``np.load(path)`` of an ``.npy`` would
``fread`` the array in one call: the same bytes, in larger requests). The bytes of one whole load are known from the
file's structure (:func:`npy_load_bytes`, :func:`npz_load_bytes`), so the kernel checks the reads against them.

A reader loads its file on its first read and keeps the array until :meth:`WholeReader.release` (the kernel
releases it when a lane moves on to another file, so a lane holds one file in memory); a read after that loads the
file again. The first read of each load returns the load's bytes, the others 0 (they read nothing).
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable
from typing import Any, ClassVar

from ddlio.errors import FormatError
from ddlio.lazy import lazy_import
from experiments.formats.base import ArrayReturningReader, Format

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

LOADS = ("sample", "whole")
#: the layouts of NPY and NPZ: samples back to back (with offsets), or an N-d array of samples per file
ARRAY_FILE_LAYOUTS = ("samples", "array")


class ArrayFileFormat(Format):
    """What NPY and NPZ share: the ``samples``/``array`` layouts and the ``load=sample|whole`` read option
    (whole: ``np.load`` of the whole file on every open, as DLIO's readers do)."""

    layouts = ARRAY_FILE_LAYOUTS
    shaped_layouts = frozenset({"array"})
    read_options = frozenset({"load"})
    keyless_defaults: ClassVar[dict[str, Any]] = {"layout": ARRAY_FILE_LAYOUTS[0], "load": LOADS[0]}

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        load = options.get("load", LOADS[0])
        return [] if load in LOADS else [f"format.load={load!r} is unknown: choose one of {', '.join(LOADS)} "
                                         "(sample: one positioned read per sample; whole: np.load of the whole "
                                         "file)"]

    @property
    def loads_whole(self) -> bool:
        return self.options.get("load", LOADS[0]) == "whole"
#: bytes ``np.load`` reads ahead to tell an archive from an array, then seeks back over (numpy's ``_ZIP_PREFIX``
#: test reads ``len(format.MAGIC_PREFIX)`` bytes)
NP_LOAD_PEEK = 6


class CountingFile(io.RawIOBase):
    """A read-only raw file that counts the bytes its reads return (``nbytes``). Not an ``io.FileIO``, so numpy
    reads it with ``read`` calls rather than handing its descriptor to ``fromfile``, and every byte is counted."""

    def __init__(self, path: str | os.PathLike) -> None:
        super().__init__()
        self._fd = os.open(path, os.O_RDONLY)
        self._pos = 0
        self.nbytes = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = os.preadv(self._fd, [b], self._pos)
        self._pos += n
        self.nbytes += n
        return n

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            self._pos = offset
        elif whence == 1:
            self._pos += offset
        else:
            self._pos = os.fstat(self._fd).st_size + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def npy_load_bytes(path: str | os.PathLike) -> int:
    """Bytes a whole ``np.load`` of the ``.npy`` file ``path`` reads through :class:`CountingFile`: numpy's peek,
    then the file, header and array."""
    return NP_LOAD_PEEK + os.path.getsize(path)


def npz_load_bytes(path: str | os.PathLike, member: str) -> int:
    """Bytes ``np.load(path)[member]`` reads through :class:`CountingFile`: numpy's peek, what zipfile reads to open
    the archive and the member (counted, by doing it: end of central directory, central directory, local header),
    then the member's stored bytes (a stored .npy: its header and array, read to the end by numpy)."""
    with CountingFile(path) as f:
        with zipfile.ZipFile(f) as zf:
            info = zf.getinfo(f"{member}.npy")
            with zf.open(info):
                pass
        return NP_LOAD_PEEK + f.nbytes + info.compress_size


class WholeReader(ArrayReturningReader):
    """Samples of a file loaded whole by ``load()`` (``np.load`` through a :class:`CountingFile`, returning the
    array of samples); ``sample(array, i)`` takes sample i out of it (a view)."""

    def __init__(self, path: str, num_samples: int, record_bytes: Callable[[int], int],
                 load: Callable[[CountingFile], np.ndarray], sample: Callable[[np.ndarray, int], np.ndarray]) -> None:
        self.path = path
        self.num_samples = num_samples
        self._record_bytes = record_bytes
        self._load, self._sample = load, sample
        self._array: np.ndarray | None = None
        self._last = np.empty(0, dtype=np.uint8)
        self.loads = 0

    def record_bytes(self, i: int) -> int:
        return self._record_bytes(i)

    def read(self, i: int, out: np.ndarray) -> int:
        n = 0
        if self._array is None:
            try:
                with CountingFile(self.path) as f:
                    try:
                        self._array = self._load(f)
                    finally:
                        n = f.nbytes
            except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
                raise FormatError(f"{self.path}: loading it whole failed: corrupt or truncated ({e})") from e
            self.loads += 1
        self._last = self._sample(self._array, i)
        return n

    def release(self) -> None:
        # the last sample is a view of the array: dropping the array alone would keep the whole file alive
        self._array = None
        self._last = np.empty(0, dtype=np.uint8)

    def close(self) -> None:
        self.release()
