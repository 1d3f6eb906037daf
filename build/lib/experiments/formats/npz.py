"""NPZ: a numpy archive per file (an uncompressed zip of .npy members, as ``np.savez`` writes), holding ``data``
(uint8, samples back to back) and ``offsets`` (int64, n+1). ``np.load(path)["data"]`` reads it as usual.

Writing streams the ``data`` member (no whole file in memory). Reading finds where the ``data`` array starts in
the archive once at open, then reads each sample with one positioned read, as a careful loader would; DLIO's NPZ
reader instead loads the whole array on every open.
"""

from __future__ import annotations

import os
import struct
import zipfile

import numpy as np

from experiments.errors import FormatError
from experiments.formats.base import FilePayload, Format, Reader, fsync_path, pread_into

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zip local file header, 30 bytes
_LOCAL_MAGIC = b"PK\x03\x04"


class NPZReader(Reader):
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        try:
            with zipfile.ZipFile(self.path) as zf:
                info = zf.getinfo("data.npy")
                if info.compress_type != zipfile.ZIP_STORED:
                    raise FormatError(
                        f"{path}: member data.npy is compressed; positioned reads need np.savez, not savez_compressed"
                    )
                with zf.open("offsets.npy") as f:
                    self.offsets = np.load(f)
            self._fd = os.open(self.path, os.O_RDONLY)
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
            raise FormatError(f"{path}: not a readable ddlio NPZ archive ({e})") from e
        try:
            self._base = self._data_start(info.header_offset)
        except FormatError:
            os.close(self._fd)
            raise
        self.num_samples = len(self.offsets) - 1

    def _data_start(self, header_offset: int) -> int:
        raw = os.pread(self._fd, _LOCAL_HEADER.size, header_offset)
        if len(raw) < _LOCAL_HEADER.size or raw[:4] != _LOCAL_MAGIC:
            raise FormatError(f"{self.path}: corrupt zip local header for data.npy")
        fields = _LOCAL_HEADER.unpack(raw)
        name_len, extra_len = fields[-2], fields[-1]
        npy_start = header_offset + _LOCAL_HEADER.size + name_len + extra_len
        with open(self.path, "rb") as f:
            f.seek(npy_start)
            try:
                version = np.lib.format.read_magic(f)
                read_header = {
                    (1, 0): np.lib.format.read_array_header_1_0,
                    (2, 0): np.lib.format.read_array_header_2_0,
                }.get(version)
                if read_header is None:
                    raise ValueError(f"unsupported .npy version {version}")
                shape, _, dtype = read_header(f)
            except ValueError as e:
                raise FormatError(f"{self.path}: corrupt .npy header in data.npy ({e})") from e
            start = f.tell()
        if dtype != np.uint8 or len(shape) != 1 or shape[0] < self.offsets[-1]:
            raise FormatError(
                f"{self.path}: data.npy is {dtype} {shape}, expected uint8 of {int(self.offsets[-1])} bytes"
            )
        return start

    def record_bytes(self, i: int) -> int:
        return int(self.offsets[i + 1] - self.offsets[i])

    def record_offset(self, i: int) -> int:
        return self._base + int(self.offsets[i])

    def read(self, i: int, out: np.ndarray) -> int:
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        n = pread_into(self._fd, out, b - a, self._base + a)
        if n != b - a:
            raise FormatError(f"{self.path}: sample {i} truncated: read {n} of {b - a} bytes")
        return n

    def close(self) -> None:
        os.close(self._fd)


class NPZ(Format):
    name = "npz"
    suffix = ".npz"

    def write(self, path: str | os.PathLike, payload: FilePayload) -> None:
        offsets = np.zeros(len(payload.sizes) + 1, dtype=np.int64)
        np.cumsum(payload.sizes, out=offsets[1:])
        total = int(offsets[-1])
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            with zf.open("data.npy", "w", force_zip64=True) as f:
                header = {"descr": "|u1", "fortran_order": False, "shape": (total,)}
                np.lib.format.write_array_header_2_0(f, header)
                for _, _, buf in payload.iter_groups():
                    f.write(buf.tobytes())
            with zf.open("offsets.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, offsets)
        fsync_path(path)

    def open(self, path: str | os.PathLike) -> Reader:
        return NPZReader(path)
