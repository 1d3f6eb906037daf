"""Byte sizes as users type them (``4096``, ``64KiB``, ``4M``, ``1.5GiB``) and back."""

from __future__ import annotations

import re

_UNITS = {
    "": 1, "b": 1,
    "k": 1024, "kb": 1000, "kib": 1024,
    "m": 1024**2, "mb": 1000**2, "mib": 1024**2,
    "g": 1024**3, "gb": 1000**3, "gib": 1024**3,
    "t": 1024**4, "tb": 1000**4, "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(value: int | float | str) -> int:
    """Return ``value`` in bytes.

    Accepts an integer, or a number followed by a unit: ``K``/``M``/``G``/``T`` and ``KiB``/``MiB``/... are powers
    of 1024 (as ``lfs setstripe -S`` reads them), ``kB``/``MB``/... powers of 1000. Raises ``ValueError`` with the
    accepted forms when the value cannot be read or is not a whole number of bytes.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{value!r} is not a whole number of bytes")
        return int(value)
    m = _SIZE_RE.match(str(value))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(
            f"{value!r} is not a size: use bytes (4096) or a number with a unit "
            "(64KiB, 4M, 1GiB; K/M/G/T and KiB/MiB/GiB are powers of 1024, kB/MB/GB powers of 1000)"
        )
    number = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not number.is_integer():
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(number)


def format_size(nbytes: float) -> str:
    """A short human form of ``nbytes`` in powers of 1024: ``4.0 KiB``, ``1.5 GiB``."""
    n = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
