"""TFRecord, written and checked by our own code (no TensorFlow needed).

Each record is framed as TensorFlow frames it: ``uint64 length``, ``uint32 masked_crc32c(length)``, the payload,
``uint32 masked_crc32c(payload)`` (little-endian; crc32c is hardware-accelerated by the ``crc32c`` package).
A sidecar ``.idx`` file (int64 offsets, n+1 entries, as .npy) gives random access to record i, as DALI's index
does; reading a record is one positioned read of its whole frame, whose length and checksums are then checked.

``layout=raw`` (the default) frames each sample's bytes as they are. ``layout=example`` frames a serialized
``tf.train.Example`` per sample, as TFRecord training sets hold them: features ``image`` (a bytes_list holding the
sample's bytes) and ``label`` (an int64_list of one label), what ``tf.io.parse_example`` reads with
``{"image": FixedLenFeature([], tf.string), "label": FixedLenFeature([], tf.int64)}``. The protobuf is encoded
here, by hand (TensorFlow is not needed to write it): its size, and so each record's, is known before writing.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ddlio.errors import FormatError
from ddlio.lazy import lazy_import
from experiments.formats.base import FilePayload, FormatConf, Reader, fsync_path, pread_into, sample_labels
from experiments.formats.ranges import RangedFormat

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

HEADER = 12  # uint64 length + uint32 masked crc
FOOTER = 4  # uint32 masked crc of the payload
_MASK_DELTA = 0xA282EAD8
_LEN = struct.Struct("<QI")
_CRC = struct.Struct("<I")
LAYOUTS = ("raw", "example")


# ----------------------------------------------------------------------------------- tf.train.Example, by hand
# Protobuf wire format: a field is a varint key (field_number << 3 | wire_type) then its value; wire type 2
# (length-delimited) values are a varint length and that many bytes. The messages (tensorflow/core/example/*.proto):
#   Example {Features features = 1}   Features {map<string, Feature> feature = 1}   (map entry: key = 1, value = 2)
#   Feature {oneof: BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3}
#   BytesList {repeated bytes value = 1}   Int64List {repeated int64 value = 1 [packed = true]}
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, value: bytes) -> bytes:
    """A length-delimited field (wire type 2) holding ``value``."""
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _entry_head(key: bytes, feature_len: int) -> bytes:
    """A map entry of Features.feature up to its Feature's bytes: the entry's field header, its key, the value's
    field header (the Feature is ``feature_len`` bytes)."""
    entry_len = len(_field(1, key)) + 1 + len(_varint(feature_len)) + feature_len
    return _varint(1 << 3 | 2) + _varint(entry_len) + _field(1, key) + _varint(2 << 3 | 2) + _varint(feature_len)


def example_parts(size: int, label: int) -> tuple[bytes, bytes]:
    """The serialized Example of an image of ``size`` bytes and ``label`` as (the bytes before the image, the
    bytes after it): ``prefix + image + suffix`` is the record's payload. Map entries in key order (image, label),
    as protobuf's deterministic serialization writes them."""
    if label < 0:
        raise ValueError("labels are >= 0")
    label_feature = _field(3, _field(1, _varint(label)))  # Feature.int64_list{packed value}
    label_entry = _entry_head(b"label", len(label_feature)) + label_feature
    bytes_list_head = _varint(1 << 3 | 2) + _varint(size)  # BytesList.value
    bl_len = len(bytes_list_head) + size
    feature_head = _varint(1 << 3 | 2) + _varint(bl_len)  # Feature.bytes_list
    feature_len = len(feature_head) + bl_len
    image_head = _entry_head(b"image", feature_len) + feature_head + bytes_list_head
    features_len = len(image_head) + size + len(label_entry)
    prefix = _varint(1 << 3 | 2) + _varint(features_len) + image_head  # Example.features
    return prefix, label_entry


def example_overhead(size: int, label: int) -> int:
    """Bytes of a serialized Example beyond its ``size``-byte image."""
    prefix, suffix = example_parts(size, label)
    return len(prefix) + len(suffix)


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7


def _fields(buf: memoryview) -> dict[int, list[tuple[int, int]]]:
    """Length-delimited and varint fields of one message: number -> [(start, end)] of each value (a varint's
    value is given as (value, -1))."""
    out: dict[int, list[tuple[int, int]]] = {}
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            n, pos = _read_varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("field runs past the message")
            out.setdefault(number, []).append((pos, pos + n))
            pos += n
        elif wire == 0:
            v, pos = _read_varint(buf, pos)
            out.setdefault(number, []).append((v, -1))
        else:
            raise ValueError(f"unexpected wire type {wire}")
    return out


def parse_example(record: np.ndarray | bytes) -> tuple[np.ndarray, int]:
    """(the image bytes as a view of ``record``, the label) of a serialized Example holding ``image`` and
    ``label``, parsed from the wire format (for checks; TensorFlow's ``parse_example`` is what reads it in the
    ``reader=tf`` path). ValueError if it is not such an Example."""
    raw = np.frombuffer(record, dtype=np.uint8) if isinstance(record, bytes) else record
    buf = memoryview(raw)

    def sub(span: tuple[int, int], base: int) -> tuple[memoryview, int]:
        return buf[base + span[0] : base + span[1]], base + span[0]

    ex = _fields(buf)
    (features_span,) = ex[1]
    features, fbase = sub(features_span, 0)
    found: dict[bytes, tuple[memoryview, int]] = {}
    for span in _fields(features).get(1, []):
        entry, ebase = sub(span, fbase)
        ef = _fields(entry)
        key = bytes(entry[ef[1][0][0] : ef[1][0][1]])
        found[key] = sub(ef[2][0], ebase)
    feat, base = found[b"image"]
    (bl_span,) = _fields(feat)[1]
    bl, bl_base = sub(bl_span, base)
    (value_span,) = _fields(bl)[1]
    feat, _ = found[b"label"]
    il = _fields(feat)[3][0]
    packed = bytes(feat[il[0] : il[1]])
    lf = _fields(memoryview(packed))
    label, _ = _read_varint(memoryview(packed), lf[1][0][0]) if lf[1][0][1] != -1 else (lf[1][0][0], 0)
    return raw[bl_base + value_span[0] : bl_base + value_span[1]], label


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def crc32c_of(data: bytes | memoryview | np.ndarray, value: int = 0) -> int:
    """The crc32c of ``data``, continuing from ``value`` (hardware-accelerated by the ``crc32c`` package)."""
    import crc32c  # lazy: start-up (the conf of this module is read by `sweep.py --help`)

    return crc32c.crc32c(data, value)


def masked_crc(data: bytes | memoryview | np.ndarray) -> int:
    """TFRecord's masked crc32c: rotate right by 15 bits and add 0xa282ead8 (mod 2**32)."""
    return _mask(crc32c_of(data))


def frame(payload: bytes | memoryview | np.ndarray) -> bytes:
    """One framed TFRecord for ``payload``."""
    n = len(payload)
    length = struct.pack("<Q", n)
    return length + _CRC.pack(masked_crc(length)) + bytes(payload) + _CRC.pack(masked_crc(payload))


def frame_views(payload: np.ndarray, sizes: list[int]) -> list[bytes | memoryview]:
    """The framed TFRecords of samples of ``sizes`` bytes whose payloads lie back to back in ``payload``, as the
    pieces to write back to back (per record: its length and length checksum, a view of its payload, the payload's
    checksum): what :func:`frame` gives for each, without copying a payload byte
    (:func:`~experiments.formats.ranges.write_pieces`)."""
    import crc32c  # lazy: start-up (the conf of this module is read by `sweep.py --help`)

    src = memoryview(payload)
    heads: dict[int, bytes] = {}
    out: list[bytes | memoryview] = []
    start = 0
    for s in sizes:
        head = heads.get(s)
        if head is None:
            length = struct.pack("<Q", s)
            head = heads[s] = length + _CRC.pack(masked_crc(length))
        data = src[start : start + s]
        out += (head, data, _CRC.pack(_mask(crc32c.crc32c(data))))
        start += s
    return out


def example_views(payload: np.ndarray, sizes: list[int], labels: list[int]) -> list[bytes | memoryview]:
    """``layout=example``'s framed records of the images of ``sizes`` bytes back to back in ``payload`` with their
    ``labels``, as pieces to write back to back (per record: framing and the Example's bytes before the image, a
    view of the image, the bytes after it and the checksum), without copying an image byte."""
    import crc32c  # lazy: start-up (the conf of this module is read by `sweep.py --help`)

    src = memoryview(payload)
    out: list[bytes | memoryview] = []
    pos = 0
    for s, label in zip(sizes, labels, strict=True):
        prefix, suffix = example_parts(s, label)
        image = src[pos : pos + s]
        length = struct.pack("<Q", len(prefix) + s + len(suffix))
        crc = crc32c.crc32c(suffix, crc32c.crc32c(image, crc32c.crc32c(prefix)))
        out += (length + _CRC.pack(masked_crc(length)) + prefix, image, suffix + _CRC.pack(_mask(crc)))
        pos += s
    return out


def frame_group(payload: np.ndarray, sizes: list[int]) -> np.ndarray:
    """The framed TFRecords of samples of ``sizes`` bytes whose payloads lie back to back in ``payload``, as one
    array (what :func:`frame` gives for each, concatenated)."""
    return np.frombuffer(b"".join(frame_views(payload, sizes)), dtype=np.uint8)


def index_path(path: str | os.PathLike) -> Path:
    return Path(str(path) + ".idx")


class TFRecordReader(Reader):
    def __init__(self, path: str | os.PathLike, verify_crc: bool = True, layout: str = "raw") -> None:
        self.path = str(path)
        self.verify_crc = verify_crc
        self.layout = layout
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
        return self._unframe(i, out, self.read(i, out))

    def fetch(self, i: int, out: np.ndarray) -> tuple[int, np.ndarray]:
        """(bytes read, the sample as a TFRecord reader hands it on): the record's payload, its framing checked and
        stripped, and with ``layout=example`` the Example parsed to its image bytes, as an application's loader
        parses it (``reader=torch``: the parse is part of the timed read; a shaped sample is these bytes)."""
        n = self.read(i, out)
        return n, self._unframe(i, out, n)

    def _unframe(self, i: int, out: np.ndarray, n: int) -> np.ndarray:
        """The payload of record ``i`` read into ``out`` (``n`` bytes): see :meth:`fetch`."""
        if self.layout == "example":
            try:
                return parse_example(out[HEADER : n - FOOTER])[0]
            except (ValueError, KeyError) as e:
                raise FormatError(f"{self.path}: record {i} is corrupt: not a tf.train.Example of image and "
                                  f"label ({e!r})") from e
        return out[HEADER : n - FOOTER]

    def close(self) -> None:
        os.close(self._fd)


@dataclass
class TFRecordConf(FormatConf):
    name: str = "tfrecord"
    # check each record's masked crc32c (length and payload) as it is read, as TensorFlow's reader does
    verify_crc: bool = True
    # raw: each record is a sample's bytes | example: a serialized tf.train.Example {image: bytes, label: int64}
    layout: str = "raw"


class TFRecord(RangedFormat):
    name = "tfrecord"
    writer_libraries = ("crc32c",)
    suffix = ".tfrecord"
    conf = TFRecordConf
    record_overhead = HEADER + FOOTER
    read_options = frozenset({"verify_crc"})
    layouts = LAYOUTS
    keyless_defaults: ClassVar[dict[str, Any]] = {"layout": LAYOUTS[0]}

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        v = options.get("verify_crc", True)
        return [] if isinstance(v, bool) else [f"format.verify_crc={v!r} must be true or false"]

    def expected_record_bytes(self, sizes: np.ndarray) -> np.ndarray | None:
        if self.layout != "example":
            return sizes + self.record_overhead
        labels = sample_labels(len(sizes)).tolist()
        return np.array([s + HEADER + FOOTER + example_overhead(s, lab)
                         for s, lab in zip(sizes.tolist(), labels, strict=True)], dtype=np.int64)

    def record_lengths(self, payload: FilePayload) -> np.ndarray:
        return self.expected_record_bytes(payload.sizes)

    def framing(self, payload: FilePayload) -> Callable[[int, int, np.ndarray], list[bytes | memoryview]]:
        """The threads that generate each group frame it (checksums over views of the payload): the group is then
        written with a few ``pwritev`` calls from the payload's own (reused) buffer."""
        example = self.layout == "example"
        sizes = payload.sizes.tolist()
        labels = payload.labels.tolist()

        def framed(lo: int, hi: int, buf: np.ndarray) -> list[bytes | memoryview]:
            if example:
                return example_views(buf, sizes[lo:hi], labels[lo:hi])
            return frame_views(buf, sizes[lo:hi])

        return framed

    def finish(self, path: str | os.PathLike, payload: FilePayload, offsets: np.ndarray,
               parts: Sequence[Any] = ()) -> None:
        with open(index_path(path), "wb") as f:
            np.save(f, offsets)
        fsync_path(path)
        fsync_path(index_path(path))

    def open(self, path: str | os.PathLike) -> Reader:
        return TFRecordReader(path, verify_crc=self.options.get("verify_crc", True), layout=self.layout)

    def sidecars(self, path: str | os.PathLike) -> list[Path]:
        return [index_path(path)]
