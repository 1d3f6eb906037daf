"""NPY: one ``.npy`` file per data file, a 1-D ``uint8`` array of the samples back to back (``np.load(path)`` reads
it as usual), and the samples' offsets in a sidecar index ``<file>.npy.idx`` (int64, n+1, itself a ``.npy``).

Writing streams the array (no whole file in memory). Reading parses the ``.npy`` header once per open to find
where the array starts, then reads each sample with one positioned read; DLIO's NPY reader instead ``np.load``s
the whole file on every open. With ``workload.samples_per_file=1`` this is DLIO's one-sample-per-file layout.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from experiments.errors import FormatError
from experiments.formats.base import FilePayload, Format, Reader, fsync_path
from experiments.formats.indexed import IndexedReader, index_path, offsets_of, read_index, write_index

_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def data_start(path: str | os.PathLike, nbytes: int) -> int:
    """Byte offset where the array of the ``.npy`` file ``path`` starts; checks it is 1-D uint8 of ``nbytes``."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = _HEADER_READERS.get(version)
            if read_header is None:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = read_header(f)
            start = f.tell()
    except OSError as e:
        raise FormatError(f"{path}: not a readable .npy file ({e})") from e
    except ValueError as e:
        raise FormatError(f"{path}: corrupt .npy header ({e})") from e
    if dtype != np.uint8 or len(shape) != 1 or shape[0] != nbytes:
        raise FormatError(f"{path}: corrupt: the array is {dtype} {shape}, the index expects uint8 ({nbytes},)")
    return start


class NPY(Format):
    name = "npy"
    suffix = ".npy"

    def write(self, path: str | os.PathLike, payload: FilePayload) -> None:
        offsets = offsets_of(payload.sizes.tolist())
        header = {"descr": "|u1", "fortran_order": False, "shape": (int(offsets[-1]),)}
        with open(path, "wb") as f:
            np.lib.format.write_array_header_1_0(f, header)
            for _, _, buf in payload.iter_groups():
                f.write(memoryview(buf))
        fsync_path(path)
        write_index(path, offsets)

    def open(self, path: str | os.PathLike) -> Reader:
        offsets = read_index(path)
        return IndexedReader(path, offsets, base=data_start(path, int(offsets[-1])))

    def sidecars(self, path: str | os.PathLike) -> list[Path]:
        return [index_path(path)]
