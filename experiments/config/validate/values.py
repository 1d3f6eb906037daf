"""Checks of one value each, shared by the concerns: each adds its problem (naming the key and the valid range) to
``problems`` and returns the value to go on with (a stand-in when it is wrong, so later checks still run)."""

from __future__ import annotations

import math
from typing import Any

from ddlio.units import format_size, parse_size


def int_range(problems: list[str], key: str, value: Any, lo: int, hi: int | None = None, what: str = "") -> int:
    """``value`` as an integer in ``lo..hi`` (``hi`` None: no upper bound); ``what`` ends the message."""
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"{key}={value!r} is not an integer{what}")
        return lo
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        problems.append(f"{key}={value} is out of range: must be {rng}{what}")
    return value


def positive(problems: list[str], key: str, value: Any, unit: str, hi: float) -> float:
    """A finite number > 0 and at most ``hi`` (NaN and infinities are refused: they reach sbatch and time-outs)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        problems.append(f"{key}={value!r} must be a finite number of {unit} > 0")
        return 1.0
    if value > hi:
        problems.append(f"{key}={value:g} is out of range: at most {hi:g} {unit}")
    return float(value)


def fraction(problems: list[str], key: str, value: Any, default: float, example: str) -> float:
    """``value`` as a fraction in (0, 1] (``default`` to go on with when it is not one; ``example`` ends the
    message: what the key means and a value to give)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not 0 < number <= 1:
        problems.append(f"{key}={value!r} must be a fraction in (0, 1]{example}")
        return default
    return number


def seconds(problems: list[str], key: str, value: Any) -> float:
    """A finite number of seconds >= 0, as a float."""
    if not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
        problems.append(f"{key}={value!r} must be a number of seconds >= 0")
        return 0.0
    return float(value)


def size(problems: list[str], key: str, value: Any, lo: int, hi: int) -> int:
    """A size in bytes (a number or a unit string: 64KiB) in ``lo..hi``."""
    try:
        n = parse_size(value)
    except ValueError as e:
        problems.append(f"{key}: {e}")
        return lo
    if n < lo or n > hi:
        problems.append(
            f"{key}={value} ({n} bytes) is out of range: must be {format_size(lo)} .. {format_size(hi)}"
            + (" (at least one byte per sample)" if lo == 1 else "")
        )
    return n


def choice(problems: list[str], key: str, value: Any, choices: tuple[str, ...], why: str = "") -> Any:
    """``value`` if it is one of ``choices``; ``why`` ends the message."""
    if value not in choices:
        problems.append(f"{key}={value!r} is unknown: choose one of {', '.join(choices)}{why}")
    return value
