"""Plain data (what JSON holds: dicts, lists, tuples, scalars): copied without :func:`copy.deepcopy`'s machinery
(a cached answer handed out as a copy the caller may change), and written to a file atomically."""

from __future__ import annotations

import json
import os
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


def write_json_atomic(path: str | os.PathLike, obj: Any, durable: bool = True) -> None:
    """Write JSON so that readers see the old file or the whole new one: temp file, fsync (unless not
    ``durable``: a note that something durable elsewhere also holds), rename."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True, default=str)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
