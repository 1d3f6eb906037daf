"""NPZ: a numpy archive per file (an uncompressed zip of .npy members, as ``np.savez`` writes).

``layout=samples`` (the default) holds ``data`` (uint8, samples back to back) and ``offsets`` (int64, n+1);
``np.load(path)["data"]`` reads it as usual. ``layout=array`` holds what DLIO's NPZ generator writes
(``np.savez(path, x=records, y=labels)``): ``x``, an N-d uint8 array of shape ``(k, *workload.sample_shape)`` (the
file's k samples), and ``y``, their int64 labels.

Writing streams the samples' member (no whole file in memory). Reading (``load=sample``, the default) finds where
that array starts in the archive once at open, then reads each sample with one positioned read, as a careful
loader would; ``load=whole`` loads the whole array with ``np.load`` instead, as DLIO's NPZ reader does on every
open (see :mod:`experiments.formats.whole`).
"""

from __future__ import annotations

import functools
import io
import os
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddlio.errors import FormatError
from ddlio.lazy import lazy_import
from experiments.formats.base import FilePayload, FormatConf, Reader, fsync_path, pread_into
from experiments.formats.indexed import offsets_of
from experiments.formats.ranges import RangedFormat, Written, write_at
from experiments.formats.whole import ArrayFileFormat, WholeReader, npz_load_bytes

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zip local file header, 30 bytes
_LOCAL_MAGIC = b"PK\x03\x04"
_LOCAL_CRC_AT = 14  # where a local header holds the member's CRC-32
_CENTRAL_MAGIC = b"PK\x01\x02"
_CENTRAL_HEADER_SIZE = 46  # a central directory entry before its name
_CENTRAL_CRC_AT = 16  # where a central directory entry holds the member's CRC-32
#: the member holding the samples, per layout
MEMBER = {"samples": "data", "array": "x"}

# ------------------------------------------------------------------ zip's CRC-32 of a member, computed off its writer
# The CRC-32 of a || b from crc(a), crc(b) and len(b), as zlib's crc32_combine (madler/zlib crc32.c) computes it:
# appending len(b) zero bytes to the register is a linear map over GF(2), a 32x32 bit matrix (a list of 32 column
# words), and the map of 2**k bytes is the map of one byte squared k times.
_CRC32_POLY = 0xEDB88320  # zip's (reflected) polynomial
_ZEROS: list[list[int]] = []  # _ZEROS[k]: the map of appending 2**k zero bytes, made when first needed


def _gf2_times(mat: list[int], vec: int) -> int:
    out, i = 0, 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def _gf2_square(mat: list[int]) -> list[int]:
    return [_gf2_times(mat, col) for col in mat]


def _zeros_map(k: int) -> list[int]:
    """The map of appending 2**k zero bytes to a CRC-32 register."""
    if not _ZEROS:
        one_bit = [_CRC32_POLY] + [1 << n for n in range(31)]
        _ZEROS.append(_gf2_square(_gf2_square(_gf2_square(one_bit))))  # 1 bit -> 2 -> 4 -> 8 bits
    while len(_ZEROS) <= k:
        _ZEROS.append(_gf2_square(_ZEROS[-1]))
    return _ZEROS[k]


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """``zlib.crc32(a + b)`` from ``crc1 = zlib.crc32(a)``, ``crc2 = zlib.crc32(b)`` and ``len2 = len(b)`` (bytes):
    ~0.1 ms of Python for an 8 MiB group, against ~2 ms for its CRC."""
    k = 0
    while len2:
        if len2 & 1:
            crc1 = _gf2_times(_zeros_map(k), crc1)
        len2 >>= 1
        k += 1
    return crc1 ^ crc2


@functools.cache
def _fast_crc32() -> Any:
    """zlib's ``crc32`` (the same function, the same values) from ISA-L (``isal``, a dependency where it has wheels:
    ~55 GB/s here, PCLMUL) or else from zlib (~6 GB/s here: 0.17 CPU-s per GiB, a tenth of writing it)."""
    try:
        from isal.isal_zlib import crc32  # lazy: only generation needs it
    except ImportError:
        return zlib.crc32
    return crc32


def _with_crc(lo: int, hi: int, buf: np.ndarray) -> tuple[np.ndarray, int]:
    """A group's payload and its CRC-32, computed by the thread that generated it (both release the GIL)."""
    return buf, _fast_crc32()(buf)


class NPZReader(Reader):
    """One positioned read per sample (``load=sample``); ``layout`` says which member holds the samples."""

    def __init__(self, path: str | os.PathLike, layout: str = "samples") -> None:
        self.path = str(path)
        self.member = f"{MEMBER[layout]}.npy"
        self.shape: tuple[int, ...] = ()
        try:
            with zipfile.ZipFile(self.path) as zf:
                info = zf.getinfo(self.member)
                if info.compress_type != zipfile.ZIP_STORED:
                    raise FormatError(f"{path}: member {self.member} is compressed; positioned reads need "
                                      "np.savez, not savez_compressed")
                if layout == "samples":
                    with zf.open("offsets.npy") as f:
                        self.offsets = np.load(f)
                else:
                    zf.getinfo("y.npy")
            self._fd = os.open(self.path, os.O_RDONLY)
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
            raise FormatError(f"{path}: not a readable ddlio NPZ archive ({e})") from e
        try:
            self._base = self._data_start(info.header_offset, layout)
        except FormatError:
            os.close(self._fd)
            raise
        self.num_samples = len(self.offsets) - 1

    def _data_start(self, header_offset: int, layout: str) -> int:
        try:
            raw = os.pread(self._fd, _LOCAL_HEADER.size, header_offset)
        except OSError as e:  # a negative offset: the archive's directory does not fit the file (damaged)
            raise FormatError(f"{self.path}: corrupt zip directory: {self.member} at offset {header_offset}") from e
        if len(raw) < _LOCAL_HEADER.size or raw[:4] != _LOCAL_MAGIC:
            raise FormatError(f"{self.path}: corrupt zip local header for {self.member}")
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
                raise FormatError(f"{self.path}: corrupt .npy header in {self.member} ({e})") from e
            start = f.tell()
        if layout == "array":
            if dtype != np.uint8 or len(shape) < 2:
                raise FormatError(f"{self.path}: x.npy is {dtype} {shape}, expected uint8 (k, *sample_shape)")
            self.shape = tuple(shape)
            self.offsets = np.arange(shape[0] + 1, dtype=np.int64) * int(np.prod(shape[1:]))
            if os.fstat(self._fd).st_size < start + int(self.offsets[-1]):
                raise FormatError(f"{self.path}: truncated: x.npy runs past the end of the file")
            return start
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


@dataclass
class NPZConf(FormatConf):
    name: str = "npz"
    # samples: `data` (1-D uint8) + `offsets` | array: `x` (k, *workload.sample_shape) uint8 + `y` labels, as DLIO
    layout: str = "samples"
    # reading: sample (one positioned read per sample) | whole (np.load of the whole array on a file's first read)
    load: str = "sample"


class NPZ(RangedFormat, ArrayFileFormat):
    name = "npz"
    suffix = ".npz"
    conf = NPZConf

    def whole_load_bytes(self, path: str | os.PathLike) -> int | None:
        return npz_load_bytes(path, MEMBER[self.layout])

    def _member_header(self, payload: FilePayload) -> bytes:
        """The .npy header of the samples' member: ``data`` (1-D, format 2.0) or ``x`` ((k, *shape), format 1.0),
        as the writers before wrote them."""
        f = io.BytesIO()
        if self.layout == "array":
            if not payload.shape:
                raise ValueError("format.layout=array needs workload.sample_shape")
            shape = (len(payload.sizes), *payload.shape)
            np.lib.format.write_array_header_1_0(f, {"descr": "|u1", "fortran_order": False, "shape": shape})
        else:
            shape = (payload.total_bytes,)
            np.lib.format.write_array_header_2_0(f, {"descr": "|u1", "fortran_order": False, "shape": shape})
        return f.getvalue()

    def begin(self, path: str | os.PathLike, payload: FilePayload, sized: bool = False) -> np.ndarray:
        """zipfile writes the archive as ``np.savez`` lays it out (stored members, zip64 headers): the samples'
        member's local header and .npy header, a hole as long as the samples, the other member (``offsets`` or
        ``y``) and the central directory; the samples' CRC-32 is written into both headers by :meth:`finish`, once
        the writers have filled the hole. Returns the byte offset in the file of every sample and of the end (int64,
        n+1). The file is at its final size already (``sized`` changes nothing)."""
        offsets = offsets_of(payload.sizes)
        total = int(offsets[-1])
        member = MEMBER[self.layout]
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            with zf.open(f"{member}.npy", "w", force_zip64=True) as f:
                f.write(self._member_header(payload))
                if not all(hasattr(f, a) for a in ("_file_size", "_fileobj")):  # not the zipfile known here
                    raise FormatError(f"{path}: this Python's zipfile cannot leave room for a member's data")
                start = f._fileobj.tell()
                f._fileobj.seek(total, os.SEEK_CUR)  # the samples' room: the writers fill it
                f._file_size += total
            with zf.open("offsets.npy" if self.layout == "samples" else "y.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, offsets if self.layout == "samples" else payload.labels)
        return offsets + start

    def write_groups(self, path: str | os.PathLike, payload: FilePayload, starts: np.ndarray,
                     part: slice | None = None, written: Written | None = None) -> list[tuple[int, int]]:
        """The groups ``part`` written at their offsets (as :meth:`RangedFormat.write_groups`), each group's CRC-32
        computed by the thread that generated it; returns ``(bytes, CRC-32)`` of each group, in order."""
        crcs = []
        fd = os.open(path, os.O_WRONLY)
        try:
            for lo, _, (buf, crc) in payload.iter_groups(prepare=_with_crc, reuse=True, part=part):
                crcs.append((write_at(fd, [buf], int(starts[lo]), written), crc))
        finally:
            os.close(fd)
        return crcs

    def finish(self, path: str | os.PathLike, payload: FilePayload, offsets: np.ndarray,
               parts: Sequence[Any] = ()) -> None:
        """The samples' member's CRC-32 (its .npy header's, combined with every group's: :func:`crc32_combine`)
        written into its local header and its central directory entry, then the file made durable."""
        crc = zlib.crc32(self._member_header(payload))
        for part in parts:
            for n, c in part:
                crc = crc32_combine(crc, c, n)
        name = f"{MEMBER[self.layout]}.npy"
        with zipfile.ZipFile(path) as zf:
            local, central = zf.getinfo(name).header_offset, zf.start_dir
        with open(path, "r+b") as f:
            f.seek(local)
            if f.read(4) != _LOCAL_MAGIC:
                raise FormatError(f"{path}: no zip local header for {name} at {local}")
            f.seek(central)
            entry = f.read(_CENTRAL_HEADER_SIZE + len(name))
            if entry[:4] != _CENTRAL_MAGIC or entry[_CENTRAL_HEADER_SIZE:] != name.encode():
                raise FormatError(f"{path}: the central directory does not start with {name}")
            for at in (local + _LOCAL_CRC_AT, central + _CENTRAL_CRC_AT):
                f.seek(at)
                f.write(struct.pack("<L", crc))
        fsync_path(path)

    def open(self, path: str | os.PathLike) -> Reader:
        if not self.loads_whole:
            return NPZReader(path, self.layout)
        r = NPZReader(path, self.layout)  # the archive's members and sample count, as at a positioned open
        r.close()
        member = MEMBER[self.layout]

        def load(f: Any) -> np.ndarray:
            with np.load(f) as z:
                return z[member]

        starts = r.offsets.tolist()
        if self.layout == "array":
            per = starts[1] - starts[0] if len(starts) > 1 else 0
            return WholeReader(str(path), r.num_samples, lambda i: per, load, lambda a, i: a[i])
        return WholeReader(str(path), r.num_samples, lambda i: starts[i + 1] - starts[i], load,
                           lambda a, i: a[starts[i] : starts[i + 1]])
