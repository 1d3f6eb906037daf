"""What the encoded-image formats (``jpeg``, ``png``) share: how a payload becomes an image, the packed file layout,
the reader with optional decoding, and the way back from an image to its payload bytes.

A sample of nominal size n bytes is an RGB image of ``ceil(n / 3)`` pixels, square-ish (W = ceil(sqrt(pixels)),
H = ceil(pixels / W)), whose pixel bytes in row-major RGB order are the sample's payload followed by zeros up to
W*H*3; so the decoded tensor has about the nominal size, as an image sample in training does, while the encoded size
(what is stored and read) depends on the codec and the payload (``workload.payload``) and is measured at
generation. Each image carries its nominal size n in a comment / text chunk, so that its payload can be
recovered from the image alone.

Layout: the images of a data file back to back, each a complete JPEG/PNG file, and their offsets in a sidecar
index ``<file>.idx`` — a packed image dataset, as TFRecord shards of JPEGs, WebDataset tars or DALI's indexed
files are. With ``workload.samples_per_file=1`` every data file is one ordinary image file. A sample is one
positioned read of its encoded bytes; its signature is checked; ``decode=true`` also decodes it fully with Pillow
(``Image.load()``), inside the timed read, so decoding counts as part of the measured work.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ddlio.errors import FormatError
from ddlio.lazy import lazy_import
from experiments.formats.base import FilePayload, Format, FormatConf, Reader, fsync_path
from experiments.formats.indexed import IndexedReader, index_path, offsets_of, write_index

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

#: key of the comment / text chunk holding the payload's nominal size (bytes)
NOMINAL_KEY = "ddlio-payload-bytes"


def _pil() -> Any:
    try:
        from PIL import Image  # lazy: start-up (Pillow only where images are made or read)
    except ImportError as e:  # pragma: no cover - a core dependency
        raise ImportError("the jpeg and png formats need Pillow: pip install pillow") from e
    # Our own images, sized by workload.sample_size (up to 2 GiB): not decompression bombs.
    Image.MAX_IMAGE_PIXELS = None
    return Image


def image_shape(nbytes: int) -> tuple[int, int]:
    """(height, width) in pixels of the RGB image that holds a payload of ``nbytes`` bytes."""
    pixels = max(1, math.ceil(nbytes / 3))
    width = math.ceil(math.sqrt(pixels))
    return math.ceil(pixels / width), width


def payload_image(payload: np.ndarray) -> np.ndarray:
    """The H x W x 3 uint8 pixels of a payload (its bytes in row-major RGB order, then zeros)."""
    h, w = image_shape(len(payload))
    pixels = np.zeros(h * w * 3, dtype=np.uint8)
    pixels[: len(payload)] = payload
    return pixels.reshape(h, w, 3)


class ImageReader(IndexedReader):
    """Reads one encoded image per sample; checks its signature; with ``decode`` also decodes it fully."""

    def __init__(self, path: str | os.PathLike, fmt: ImageFormat, decode: bool) -> None:
        super().__init__(path)
        self._fmt, self._decode = fmt, decode
        self._image = _pil() if decode else None

    def check(self, i: int, record: np.ndarray) -> None:
        head, tail = self._fmt.signature
        if record[: len(head)].tobytes() != head or record[len(record) - len(tail) :].tobytes() != tail:
            raise FormatError(f"{self.path}: record {i} is corrupt: not a complete {self._fmt.name.upper()} image")
        if self._image is not None:
            try:
                with self._image.open(io.BytesIO(record)) as img:
                    img.load()
            except (OSError, ValueError, SyntaxError) as e:
                raise FormatError(f"{self.path}: record {i} is corrupt: decoding failed ({e})") from e


@dataclass
class ImageConf(FormatConf):
    # also decode every image (Pillow, fully) inside the timed read, as a loader's decode step
    decode: bool = False


class ImageFormat(Format):
    """An encoded-image format; subclasses set the codec (:meth:`encode`), the file signature and the conf."""

    #: (first bytes, last bytes) of every well-formed encoded image
    signature: ClassVar[tuple[bytes, bytes]]
    read_options = frozenset({"decode"})
    writer_libraries = ("PIL.Image",)

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        v = options.get("decode", False)
        return [] if isinstance(v, bool) else [f"format.decode={v!r} must be true or false"]

    def expected_record_bytes(self, sizes: np.ndarray) -> np.ndarray | None:
        return None  # the encoded size depends on the codec and the pixels: measured at generation

    def encode(self, pixels: np.ndarray, nominal: int) -> bytes:
        """One encoded image of ``pixels`` (H x W x 3 uint8) carrying ``nominal`` (bytes) in its metadata."""
        raise NotImplementedError

    def write(self, path: str | os.PathLike, payload: FilePayload) -> None:
        lengths = []
        with open(path, "wb") as f:
            for lo, hi, buf in payload.iter_groups():
                pos = 0
                for s in payload.sizes[lo:hi].tolist():
                    data = self.encode(payload_image(buf[pos : pos + s]), s)
                    f.write(data)
                    lengths.append(len(data))
                    pos += s
        fsync_path(path)
        write_index(path, offsets_of(lengths))

    def open(self, path: str | os.PathLike) -> Reader:
        return ImageReader(path, self, bool(self.options.get("decode", False)))

    def sidecars(self, path: str | os.PathLike) -> list[Path]:
        return [index_path(path)]

    def decode_payload(self, data: bytes) -> bytes:
        """The payload an encoded image stands for: its first n pixel bytes, n from its metadata."""
        with _pil().open(io.BytesIO(data)) as img:
            img.load()
            nominal = img.info.get(NOMINAL_KEY) or img.info.get("comment")
            if isinstance(nominal, bytes):
                nominal = nominal.decode()
            if not nominal or not str(nominal).startswith(NOMINAL_KEY + "="):
                raise FormatError(f"a {self.name} image without its {NOMINAL_KEY} metadata")
            n = int(str(nominal).split("=", 1)[1])
            return np.asarray(img.convert("RGB")).reshape(-1)[:n].tobytes()
