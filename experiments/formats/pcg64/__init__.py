"""The payload's pseudo-random bytes: numpy's PCG64 stream, taken straight from its 64-bit outputs, by a C fill
(``_fill.c``, built at install where a C compiler is: several lanes of the generator at once, in place, without the
GIL) or else by numpy's ``random_raw`` (the same bytes)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ddlio.lazy import lazy_import

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py


def _native_fill() -> Callable[..., tuple[int, int]] | None:
    """The C fill of ``_fill.c`` (built at install where a C compiler is), or None."""
    try:
        from experiments.formats.pcg64._fill import fill  # lazy: optional, built only where a C compiler was
    except ImportError:
        return None
    return fill


#: ``fill(buffer, state_hi, state_lo, inc_hi, inc_lo)``, or None where ``_fill.c`` was not built
FILL = _native_fill()
_U64 = (1 << 64) - 1


def random_bytes(key: tuple[int, ...], n: int, out: np.ndarray | None = None) -> np.ndarray:
    """``n`` pseudo-random bytes of the PCG64 stream seeded with ``key``: a new writable uint8 array, or the first
    ``n`` bytes of ``out`` (a writable uint8 array of at least ``n`` bytes), filled in place and returned.

    The very bytes ``np.random.Generator(np.random.PCG64(key)).bytes(n)`` returns (the stream every dataset has
    been generated from; ``Generator.bytes`` draws full-range uint32s, two per 64-bit output, low half first),
    taken straight from the bit generator's 64-bit outputs in little-endian order, without holding the GIL: by
    the C fill where it was built (~0.21 CPU-s per GiB here, into memory already faulted in), else by numpy's
    ``random_raw`` (~0.32 CPU-s per GiB, into a new array, copied into ``out``).
    """
    dst = np.empty(n, dtype=np.uint8) if out is None else out[:n]
    if FILL is not None:
        st = np.random.PCG64(list(key)).state["state"]
        FILL(dst, st["state"] >> 64, st["state"] & _U64, st["inc"] >> 64, st["inc"] & _U64)
        return dst
    raw = np.random.PCG64(list(key)).random_raw(-(-n // 8))
    if sys.byteorder != "little":
        raw = raw.byteswap()
    if out is None:
        return raw.view(np.uint8)[:n]
    dst[:] = raw.view(np.uint8)[:n]
    return dst
