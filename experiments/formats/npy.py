"""NPY: one ``.npy`` file per data file (``np.load(path)`` reads it as usual).

``layout=samples`` (the default): a 1-D ``uint8`` array of the samples back to back, and the samples' offsets in a
sidecar index ``<file>.npy.idx`` (int64, n+1, itself a ``.npy``). ``layout=array``: an N-d ``uint8`` array of shape
``(k, *workload.sample_shape)``, the file's k samples, as DLIO writes NPY datasets (no index: sample i is at
``i * sample_bytes`` past the header).

Writing streams the array (no whole file in memory). Reading (``load=sample``, the default) parses the ``.npy``
header once per open to find where the array starts, then reads each sample with one positioned read;
``load=whole`` ``np.load``s the whole file instead, as DLIO's NPY reader does on every open (see
:mod:`experiments.formats.whole`). With ``workload.samples_per_file=1`` this is DLIO's one-sample-per-file layout.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddlio.errors import FormatError
from ddlio.lazy import lazy_import
from experiments.formats.base import FilePayload, FormatConf, Reader, fsync_path
from experiments.formats.indexed import IndexedReader, index_path, read_index, write_index
from experiments.formats.ranges import RangedFormat
from experiments.formats.whole import ArrayFileFormat, WholeReader, npy_load_bytes

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py


def read_header(path: str | os.PathLike) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, byte offset where the array starts) of the ``.npy`` file ``path``; else FormatError."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            fmt = np.lib.format
            read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
            if read is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = read(f)
            return shape, dtype, f.tell()
    except OSError as e:
        raise FormatError(f"{path}: not a readable .npy file ({e})") from e
    except ValueError as e:
        raise FormatError(f"{path}: corrupt .npy header ({e})") from e


def data_start(path: str | os.PathLike, nbytes: int) -> int:
    """Byte offset where the array of the ``.npy`` file ``path`` starts; checks it is 1-D uint8 of ``nbytes``."""
    shape, dtype, start = read_header(path)
    if dtype != np.uint8 or len(shape) != 1 or shape[0] != nbytes:
        raise FormatError(f"{path}: corrupt: the array is {dtype} {shape}, the index expects uint8 ({nbytes},)")
    return start


@dataclass
class NPYConf(FormatConf):
    name: str = "npy"
    # samples: a 1-D uint8 array + a sidecar index | array: an N-d (k, *workload.sample_shape) uint8 array, as DLIO
    layout: str = "samples"
    # reading: sample (one positioned read per sample) | whole (np.load of the whole file on its first read)
    load: str = "sample"


class NPY(RangedFormat, ArrayFileFormat):
    name = "npy"
    suffix = ".npy"
    conf = NPYConf

    def whole_load_bytes(self, path: str | os.PathLike) -> int | None:
        return npy_load_bytes(path)

    def header(self, payload: FilePayload) -> bytes:
        if self.layout == "array":
            if not payload.shape:
                raise ValueError("format.layout=array needs workload.sample_shape")
            shape = (len(payload.sizes), *payload.shape)
        else:
            shape = (payload.total_bytes,)
        f = io.BytesIO()
        np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": shape})
        return f.getvalue()

    def finish(self, path: str | os.PathLike, payload: FilePayload, offsets: np.ndarray,
               parts: Sequence[Any] = ()) -> None:
        fsync_path(path)
        if self.layout != "array":
            write_index(path, offsets)

    def open(self, path: str | os.PathLike) -> Reader:
        if self.layout == "array":
            shape, dtype, start = read_header(path)
            if dtype != np.uint8 or len(shape) < 2:
                raise FormatError(f"{path}: corrupt: the array is {dtype} {shape}, expected uint8 (k, *sample_shape)")
            per = math.prod(shape[1:])
            if self.loads_whole:
                return WholeReader(str(path), shape[0], lambda i: per, np.load, lambda a, i: a[i])
            return IndexedReader(path, np.arange(shape[0] + 1, dtype=np.int64) * per, base=start)
        offsets = read_index(path)
        start = data_start(path, int(offsets[-1]))
        if self.loads_whole:
            starts = offsets.tolist()
            return WholeReader(str(path), len(offsets) - 1, lambda i: starts[i + 1] - starts[i], np.load,
                               lambda a, i: a[starts[i] : starts[i + 1]])
        return IndexedReader(path, offsets, base=start)

    def sidecars(self, path: str | os.PathLike) -> list[Path]:
        return [] if self.layout == "array" else [index_path(path)]
