"""TFRecord, written and checked by our own code (no TensorFlow needed).

Each record is framed as TensorFlow frames it: ``uint64 length``, ``uint32 masked_crc32c(length)``, the payload,
``uint32 masked_crc32c(payload)`` (little-endian; crc32c is hardware-accelerated by the ``crc32c`` package).
A sidecar ``.idx`` file (int64 offsets, n+1 entries, as .npy) gives random access to record i, as DALI's index
does; reading a record is one positioned read of its whole frame, whose length and checksums are then checked.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import crc32c
import numpy as np

from experiments.errors import FormatError
from experiments.formats.base import FilePayload, Format, Reader, fsync_path, pread_into

HEADER = 12  # uint64 length + uint32 masked crc
FOOTER = 4  # uint32 masked crc of the payload
_MASK_DELTA = 0xA282EAD8
_LEN = struct.Struct("<QI")
_CRC = struct.Struct("<I")


def masked_crc(data: bytes | memoryview | np.ndarray) -> int:
    """TFRecord's masked crc32c: rotate right by 15 bits and add 0xa282ead8 (mod 2**32)."""
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(payload: bytes | memoryview | np.ndarray) -> bytes:
    """One framed TFRecord for ``payload``."""
    n = len(payload)
    length = struct.pack("<Q", n)
    return length + _CRC.pack(masked_crc(length)) + bytes(payload) + _CRC.pack(masked_crc(payload))


def index_path(path: str | os.PathLike) -> Path:
    return Path(str(path) + ".idx")


class TFRecordReader(Reader):
    def __init__(self, path: str | os.PathLike, verify_crc: bool = True) -> None:
        self.path = str(path)
        self.verify_crc = verify_crc
        try:
            self.offsets = np.load(index_path(path))
        except (OSError, ValueError) as e:
            raise FormatError(f"{path}: its record index {index_path(path).name} is missing or unreadable ({e})") from e
        self.num_samples = len(self.offsets) - 1
        self._fd = os.open(self.path, os.O_RDONLY)
        size = os.fstat(self._fd).st_size
        if size < self.offsets[-1]:
            os.close(self._fd)
            raise FormatError(f"{path}: truncated: {size} bytes, the index expects {int(self.offsets[-1])}")

    def record_bytes(self, i: int) -> int:
        return int(self.offsets[i + 1] - self.offsets[i])

    def record_offset(self, i: int) -> int:
        return int(self.offsets[i])

    def read(self, i: int, out: np.ndarray) -> int:
        off, span = int(self.offsets[i]), int(self.offsets[i + 1] - self.offsets[i])
        n = pread_into(self._fd, out, span, off)
        if n != span:
            raise FormatError(f"{self.path}: record {i} truncated: read {n} of {span} bytes at offset {off}")
        length, lcrc = _LEN.unpack_from(out, 0)
        if length != span - HEADER - FOOTER:
            raise FormatError(
                f"{self.path}: record {i} is corrupt: length field {length}, frame holds {span - HEADER - FOOTER}"
            )
        if self.verify_crc:
            if masked_crc(out[:8]) != lcrc:
                raise FormatError(f"{self.path}: record {i} is corrupt: length checksum mismatch")
            (dcrc,) = _CRC.unpack_from(out, HEADER + length)
            if masked_crc(out[HEADER : HEADER + length]) != dcrc:
                raise FormatError(f"{self.path}: record {i} is corrupt: payload checksum mismatch")
        return n

    def payload(self, i: int, out: np.ndarray) -> np.ndarray:
        n = self.read(i, out)
        return out[HEADER : n - FOOTER]

    def close(self) -> None:
        os.close(self._fd)


class TFRecord(Format):
    name = "tfrecord"
    suffix = ".tfrecord"
    record_overhead = HEADER + FOOTER
    read_options = frozenset({"verify_crc"})

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        v = options.get("verify_crc", True)
        return [] if isinstance(v, bool) else [f"format.verify_crc={v!r} must be true or false"]

    def write(self, path: str | os.PathLike, payload: FilePayload) -> None:
        offsets = np.zeros(len(payload.sizes) + 1, dtype=np.int64)
        np.cumsum(payload.sizes + HEADER + FOOTER, out=offsets[1:])
        with open(path, "wb") as f:
            for lo, hi, buf in payload.iter_groups():
                pos = 0
                for s in payload.sizes[lo:hi].tolist():
                    f.write(frame(buf[pos : pos + s]))
                    pos += s
        with open(index_path(path), "wb") as f:
            np.save(f, offsets)
        fsync_path(path)
        fsync_path(index_path(path))

    def open(self, path: str | os.PathLike) -> Reader:
        return TFRecordReader(path, verify_crc=self.options.get("verify_crc", True))

    def sidecars(self, path: str | os.PathLike) -> list[Path]:
        return [index_path(path)]
