"""Plain data (what JSON holds: dicts, lists, tuples, scalars) copied without :func:`copy.deepcopy`'s machinery:
a cached answer handed out as a copy the caller may change."""

from __future__ import annotations

from typing import Any


def copy_plain(value: Any) -> Any:
    """A copy of ``value`` as deep as its dicts, lists and tuples go (scalars and other objects are shared)."""
    if isinstance(value, dict):
        return {k: copy_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(copy_plain(v) for v in value)
    return value
