"""JPEG: real encoded images made with Pillow (quality 90, 4:4:4 chroma, baseline), packed with an offsets index
(see :mod:`experiments.formats.image`). Lossy: the decoded pixels approximate the payload; on incompressible
(noise) payloads the PSNR is about 30 dB, on smooth or constant payloads higher.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from ddlio.lazy import lazy_import
from experiments.formats.image import NOMINAL_KEY, ImageConf, ImageFormat, _pil

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

QUALITY = 90


@dataclass
class JPEGConf(ImageConf):
    name: str = "jpeg"


class JPEG(ImageFormat):
    name = "jpeg"
    conf = JPEGConf
    suffix = ".jpg"
    signature = (b"\xff\xd8\xff", b"\xff\xd9")
    min_psnr_db = 20.0  # ~30 dB on noise, lower on tiny images; unrelated noise scores ~8 dB

    def encode(self, pixels: np.ndarray, nominal: int) -> bytes:
        out = io.BytesIO()
        img = _pil().fromarray(pixels)
        img.save(out, "JPEG", quality=QUALITY, subsampling=0, comment=f"{NOMINAL_KEY}={nominal}".encode())
        return out.getvalue()
