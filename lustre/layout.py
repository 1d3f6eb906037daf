"""Lustre striping: apply it with ``lfs setstripe`` before any file exists, read it back with
``lfs getstripe --yaml``, and say plainly when the file system is not Lustre.

``lfs`` is found on ``PATH`` (or at ``$DDLIO_LFS``). Whatever ``lfs`` prints on failure is wrapped in a
:class:`~ddlio.errors.LayoutError` together with the command that failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ddlio.errors import LayoutError
from lustre.fs import fs_info

#: Lustre's limits on a plain layout: stripe size is a multiple of 64 KiB below 4 GiB; stripe count up to 2000.
STRIPE_SIZE_UNIT = 64 * 1024
STRIPE_SIZE_MAX = 4 * 1024**3
STRIPE_COUNT_MAX = 2000


@dataclass(frozen=True)
class Layout:
    """A requested plain layout: ``stripe_count`` as ``lfs setstripe -c`` takes it (-1 = all OSTs, 0 = the file
    system's default, N >= 1) and ``stripe_size`` in bytes (0 = the file system's default)."""

    stripe_count: int = 1
    stripe_size: int = 1024 * 1024

    def problems(self) -> list[str]:
        """Every reason this layout cannot be applied, each naming what is valid."""
        out = []
        if self.stripe_count < -1 or self.stripe_count > STRIPE_COUNT_MAX:
            out.append(
                f"stripe={self.stripe_count} is not a Lustre stripe count: use -1 (all OSTs), "
                f"0 (the file system's default) or 1..{STRIPE_COUNT_MAX}"
            )
        if self.stripe_size != 0 and (
            self.stripe_size < STRIPE_SIZE_UNIT
            or self.stripe_size % STRIPE_SIZE_UNIT
            or self.stripe_size >= STRIPE_SIZE_MAX
        ):
            out.append(
                f"stripe_size={self.stripe_size} bytes is not a Lustre stripe size: use a multiple of 64KiB "
                "below 4GiB (64KiB, 1MiB, 4MiB ...) or 0 for the file system's default"
            )
        return out

    def setstripe_args(self) -> list[str]:
        args = ["-c", str(self.stripe_count)]
        if self.stripe_size:
            args += ["-S", str(self.stripe_size)]
        return args


@dataclass
class LayoutRecord:
    """What layout a dataset really has, as stored with every result.

    ``applicable`` is False off Lustre (with the ``reason``); ``applied`` holds what ``lfs getstripe`` reported
    for a directory or file (``stripe_count``, ``stripe_size`` in bytes, ``pattern``, ``stripe_offset``, ``osts``)."""

    applicable: bool
    fs_type: str
    requested: dict[str, int]
    applied: dict[str, Any] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def lfs_command() -> str:
    """The ``lfs`` executable to run, or a LayoutError that says how to get one."""
    name = os.environ.get("DDLIO_LFS", "lfs")
    path = shutil.which(name)
    if path is None:
        raise LayoutError(
            f"'{name}' not found on PATH, but the data root is on Lustre: install the Lustre client utilities "
            "(package lustre-client or lustre-utils), load the site's module, or set DDLIO_LFS to lfs's path"
        )
    return path


def _run_lfs(args: list[str], timeout_s: float = 60.0) -> str:
    cmd = [lfs_command(), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        raise LayoutError(f"'{' '.join(cmd)}' did not answer within {timeout_s:.0f} s") from e
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip() or f"exit code {proc.returncode}"
        raise LayoutError(f"'{' '.join(cmd)}' failed: {said}")
    return proc.stdout


def parse_getstripe_yaml(text: str) -> dict[str, Any]:
    """Normalise ``lfs getstripe --yaml`` output (file, directory, or composite/PFL layout) to
    ``{stripe_count, stripe_size, pattern, stripe_offset, osts, components}`` (sizes in bytes).

    For a composite layout the top-level figures are those of the first component, and ``components`` lists all.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise LayoutError(f"could not read 'lfs getstripe --yaml' output: {e}") from e
    if not isinstance(doc, dict):
        raise LayoutError(f"unexpected 'lfs getstripe --yaml' output: {text[:200]!r}")

    def plain(d: dict[str, Any]) -> dict[str, Any]:
        def get(key: str) -> Any:
            return d.get(f"lmm_{key}", d.get(key))

        objs = d.get("lmm_objects") or []
        return {
            "stripe_count": int(get("stripe_count")) if get("stripe_count") is not None else None,
            "stripe_size": int(get("stripe_size")) if get("stripe_size") is not None else None,
            "pattern": str(get("pattern")) if get("pattern") is not None else None,
            "stripe_offset": int(get("stripe_offset")) if get("stripe_offset") is not None else None,
            "osts": [int(o["l_ost_idx"]) for o in objs if isinstance(o, dict) and "l_ost_idx" in o],
        }

    if "components" in doc:
        comps = []
        for c in doc["components"] or []:
            sub = c.get("sub_layout", c)
            entry = plain(sub)
            entry["extent_start"] = c.get("lcme_extent.e_start")
            entry["extent_end"] = c.get("lcme_extent.e_end")
            comps.append(entry)
        if not comps:
            raise LayoutError("'lfs getstripe --yaml' reported a composite layout without components")
        return {**comps[0], "components": comps}
    out = plain(doc)
    if out["stripe_count"] is None:
        raise LayoutError(f"'lfs getstripe --yaml' output has no stripe count: {text[:200]!r}")
    out["components"] = []
    return out


def apply_layout(directory: str | os.PathLike, layout: Layout) -> LayoutRecord:
    """Create ``directory`` and, on Lustre, set its default layout (before any file exists in it).

    Off Lustre nothing is set and the record says why; that is not an error. On Lustre a failing ``lfs`` is.
    """
    d = Path(directory)
    info = fs_info(d)
    requested = {"stripe_count": layout.stripe_count, "stripe_size": layout.stripe_size}
    if not info.is_lustre:
        d.mkdir(parents=True, exist_ok=True)
        return LayoutRecord(False, info.type, requested, reason=f"{info.type} is not Lustre: striping not applied")
    d.mkdir(parents=True, exist_ok=True)
    if any(d.iterdir()):
        raise LayoutError(f"{d} already holds files: a layout must be set before any file exists in it")
    _run_lfs(["setstripe", *layout.setstripe_args(), str(d)])
    applied = parse_getstripe_yaml(_run_lfs(["getstripe", "-d", "--yaml", str(d)]))
    return LayoutRecord(True, info.type, requested, applied=applied)


def read_layout(record: LayoutRecord, files: list[str | os.PathLike]) -> LayoutRecord:
    """Add the layout each of ``files`` really got (``lfs getstripe --yaml``) to ``record`` (Lustre only)."""
    if not record.applicable:
        return record
    for f in files:
        record.files[Path(f).name] = parse_getstripe_yaml(_run_lfs(["getstripe", "--yaml", str(f)]))
    return record
