"""HDF5 through h5py: one file holds a 1-D uint8 dataset ``data`` (samples back to back) and ``offsets``
(int64, n+1 entries: sample i is ``data[offsets[i]:offsets[i+1]]``), so fixed and variable sample sizes share one
layout. Storage is contiguous or chunked (chunk = ``chunk_samples`` mean-size samples), optionally compressed.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from experiments.errors import FormatError
from experiments.formats.base import FilePayload, Format, Reader, fsync_path

COMPRESSIONS = ("none", "gzip", "lzf")


class HDF5Reader(Reader):
    def __init__(self, path: str | os.PathLike) -> None:
        import h5py

        try:
            self._f = h5py.File(path, "r")
            self._ds = self._f["data"]
            self.offsets = self._f["offsets"][:]
        except (OSError, KeyError) as e:
            raise FormatError(f"{path}: not a readable ddlio HDF5 file ({e})") from e
        self.num_samples = len(self.offsets) - 1
        self._starts = self.offsets.tolist()
        self._last = np.empty(0, dtype=np.uint8)
        if self.offsets[-1] > self._ds.shape[0]:
            raise FormatError(
                f"{path}: offsets point past the end of the data ({self.offsets[-1]} > {self._ds.shape[0]})"
            )

    def record_bytes(self, i: int) -> int:
        return int(self.offsets[i + 1] - self.offsets[i])

    def record_offset(self, i: int) -> int:
        base = self._ds.id.get_offset()  # None for chunked storage: HDF5 decides where each chunk lives
        return -1 if base is None else base + int(self.offsets[i])

    def read(self, i: int, out: np.ndarray) -> int:
        """``ds[a:b]``, as a training script reads an HDF5 sample: h5py's fast path for simple slices, which
        returns a new array (``out`` is not used). ``read_direct`` into a preallocated buffer would avoid that
        allocation but costs ~7x more per call in h5py 3 (44 µs against 6 µs for 16 KiB, measured here)."""
        a, b = self._starts[i], self._starts[i + 1]
        try:
            self._last = self._ds[a:b]
        except (OSError, ValueError) as e:
            raise FormatError(f"{self._f.filename}: reading sample {i} failed ({e})") from e
        return self._last.nbytes

    def payload(self, i: int, out: np.ndarray) -> np.ndarray:
        self.read(i, out)
        return self._last

    def close(self) -> None:
        self._f.close()


class HDF5(Format):
    name = "hdf5"
    suffix = ".h5"

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        out = []
        chunk = options.get("chunk_samples", 0)
        comp = options.get("compression", "none")
        if not isinstance(chunk, int) or chunk < 0:
            out.append(f"format.chunk_samples={chunk!r} must be 0 (contiguous) or a number of samples >= 1")
        if comp not in COMPRESSIONS:
            out.append(f"format.compression={comp!r} is unknown: choose one of {', '.join(COMPRESSIONS)}")
        elif comp != "none" and chunk == 0:
            out.append(f"format.compression={comp} needs chunked storage: set format.chunk_samples >= 1")
        return out

    def write(self, path: str | os.PathLike, payload: FilePayload) -> None:
        import h5py

        sizes = payload.sizes
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        total = int(offsets[-1])
        kw: dict[str, Any] = {}
        chunk = self.options.get("chunk_samples", 0)
        if chunk and total:  # HDF5 cannot chunk an empty dataset
            mean = max(1, total // max(1, len(sizes)))
            kw["chunks"] = (max(1, min(total, chunk * mean)),)
            comp = self.options.get("compression", "none")
            if comp != "none":
                kw["compression"] = comp
        with h5py.File(path, "w") as f:
            ds = f.create_dataset("data", shape=(total,), dtype=np.uint8, **kw)
            for lo, hi, buf in payload.iter_groups():
                ds[offsets[lo] : offsets[hi]] = buf
            f.create_dataset("offsets", data=offsets)
        fsync_path(path)

    def open(self, path: str | os.PathLike) -> Reader:
        return HDF5Reader(path)
