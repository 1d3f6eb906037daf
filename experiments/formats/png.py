"""PNG: real encoded images made with Pillow (RGB, zlib level 6), packed with an offsets index (see
:mod:`experiments.formats.image`). Lossless: the decoded pixels are the payload bytes exactly. PNG compresses, so
its encoded size follows ``workload.payload`` (random: slightly above the nominal size; zeros: tiny).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from ddlio.lazy import lazy_import
from experiments.formats.image import NOMINAL_KEY, ImageConf, ImageFormat, _pil

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

COMPRESS_LEVEL = 6


@dataclass
class PNGConf(ImageConf):
    name: str = "png"


class PNG(ImageFormat):
    name = "png"
    conf = PNGConf
    suffix = ".png"
    signature = (b"\x89PNG\r\n\x1a\n", b"IEND\xaeB`\x82")

    def encode(self, pixels: np.ndarray, nominal: int) -> bytes:
        from PIL.PngImagePlugin import PngInfo  # lazy: start-up (Pillow only where images are made)

        info = PngInfo()
        info.add_text(NOMINAL_KEY, f"{NOMINAL_KEY}={nominal}")
        out = io.BytesIO()
        _pil().fromarray(pixels).save(out, "PNG", compress_level=COMPRESS_LEVEL, pnginfo=info)
        return out.getvalue()
