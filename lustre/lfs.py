"""The Lustre backend: striping applied with ``lfs setstripe`` before any file exists, read back with
``lfs getstripe --yaml``; Lustre is detected by the statfs magic of a Lustre client
(:attr:`lustre.fs.FsInfo.is_lustre`).

``lfs`` is found on ``PATH`` (or at ``$DDLIO_LFS``). Whatever ``lfs`` prints on failure is wrapped in a
:class:`~ddlio.errors.LayoutError` together with the command that failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, ClassVar

import yaml

from ddlio.errors import LayoutError
from lustre.base import Layout, LayoutRecord, StorageBackend
from lustre.fs import FsInfo, fs_info

#: Lustre's limits on a plain layout: stripe size is a multiple of 64 KiB below 4 GiB; stripe count up to 2000.
STRIPE_SIZE_UNIT = 64 * 1024
STRIPE_SIZE_MAX = 4 * 1024**3
STRIPE_COUNT_MAX = 2000
#: how to get ``lfs`` where it is missing (:attr:`LustreBackend.install`)
INSTALL = ("install the Lustre client utilities (package lustre-client or lustre-utils), load the site's module, "
           "or set DDLIO_LFS to lfs's path")
#: a storage target's name in Lustre's words: the label's wording of a stripe count (``4OST``)
TARGET = "OST"
#: the special stripe counts by name (:meth:`LustreBackend.describe` with ``named``)
NAMED_COUNTS = {0: "default", -1: "all"}


def layout_problems(request: Layout) -> list[str]:
    """Every reason ``request`` is not a plain Lustre layout, each naming what is valid."""
    out = []
    if request.stripe_count < -1 or request.stripe_count > STRIPE_COUNT_MAX:
        out.append(
            f"stripe={request.stripe_count} is not a Lustre stripe count: use -1 (all OSTs), "
            f"0 (the file system's default) or 1..{STRIPE_COUNT_MAX}"
        )
    if request.stripe_size != 0 and (
        request.stripe_size < STRIPE_SIZE_UNIT
        or request.stripe_size % STRIPE_SIZE_UNIT
        or request.stripe_size >= STRIPE_SIZE_MAX
    ):
        out.append(
            f"stripe_size={request.stripe_size} bytes is not a Lustre stripe size: use a multiple of 64KiB "
            "below 4GiB (64KiB, 1MiB, 4MiB ...) or 0 for the file system's default"
        )
    return out


def setstripe_args(request: Layout) -> list[str]:
    """``lfs setstripe``'s options for ``request``."""
    args = ["-c", str(request.stripe_count)]
    if request.stripe_size:
        args += ["-S", str(request.stripe_size)]
    if request.pool:
        args += ["-p", request.pool]
    return args


def lfs_command() -> str:
    """The ``lfs`` executable to run, or a LayoutError that says how to get one."""
    name = os.environ.get("DDLIO_LFS", "lfs")
    path = shutil.which(name)
    if path is None:
        raise LayoutError(f"'{name}' not found on PATH, but the data root is on Lustre: {INSTALL}")
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
    """Normalise ``lfs getstripe --yaml`` output (file, directory, or composite layout) to ``{stripe_count,
    stripe_size, pattern, stripe_offset, osts, pool, components}`` (sizes in bytes).

    Composite layouts (PFL, Data-on-MDT) come in two forms: ``component0:``, ``component1:`` ... (Lustre before
    2.16) and a ``components:`` list (2.16); each component is recorded with its extent (``extent_start``,
    ``extent_end``: bytes, None for EOF) and pattern (``mdt``: its bytes live on the MDT, no OSTs). For a composite
    layout the top-level figures are those of the first component on OSTs (``dom_bytes``: the size of a
    Data-on-MDT first component, else absent).
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise LayoutError(f"could not read 'lfs getstripe --yaml' output: {e}") from e
    if not isinstance(doc, dict):
        raise LayoutError(f"unexpected 'lfs getstripe --yaml' output: {text[:200]!r}")
    numbered = sorted((k for k in doc if isinstance(k, str) and k.startswith("component") and k[9:].isdigit()),
                      key=lambda k: int(k[9:]))
    listed = doc.get("components") if "components" in doc else ([doc[k] for k in numbered] if numbered else None)
    if listed is not None:
        comps = [_component(c) for c in listed or []]
        if not comps:
            raise LayoutError("'lfs getstripe --yaml' reported a composite layout without components")
        on_osts = [c for c in comps if c["pattern"] != "mdt"] or comps
        out = {**on_osts[0], "components": comps}
        if comps[0]["pattern"] == "mdt":
            out["dom_bytes"] = comps[0]["extent_end"]
        return out
    out = _plain(doc)
    if out["stripe_count"] is None:
        raise LayoutError(f"'lfs getstripe --yaml' output has no stripe count: {text[:200]!r}")
    out["components"] = []
    return out


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    def get(key: str) -> Any:
        return d.get(f"lmm_{key}", d.get(key))

    objs = d.get("lmm_objects") or []
    out = {
        "stripe_count": int(get("stripe_count")) if get("stripe_count") is not None else None,
        "stripe_size": int(get("stripe_size")) if get("stripe_size") is not None else None,
        "pattern": str(get("pattern")) if get("pattern") is not None else None,
        "stripe_offset": int(get("stripe_offset")) if get("stripe_offset") is not None else None,
        "osts": [int(o["l_ost_idx"]) for o in objs if isinstance(o, dict) and "l_ost_idx" in o],
    }
    if get("pool"):
        out["pool"] = str(get("pool"))
    return out


def _component(c: dict[str, Any]) -> dict[str, Any]:
    def extent(v: Any) -> int | None:
        return None if v in (None, "EOF", "eof", -1) else int(v)

    entry = _plain(c.get("sub_layout", c))
    entry["extent_start"] = extent(c.get("lcme_extent.e_start"))
    entry["extent_end"] = extent(c.get("lcme_extent.e_end"))
    if c.get("lcme_flags") is not None:
        entry["flags"] = str(c["lcme_flags"])
    return entry


def active_osts(text: str) -> int:
    """Active OSTs in ``lfs df`` output: the ``<fs>-OSTxxxx_UUID`` lines (an inactive one prints ``OSTxxxx :
    inactive device`` instead)."""
    return sum(1 for line in text.splitlines() if "-OST" in line.split(" ", 1)[0] and "_UUID" in line)


class LustreBackend(StorageBackend):
    """Lustre (see the module's docstring): :class:`lustre.base.StorageBackend`."""

    name: ClassVar[str] = "lustre"
    stripes: ClassVar[bool] = True
    knobs: ClassVar[frozenset[str]] = frozenset({"pool"})
    title: ClassVar[str] = "Lustre"
    install: ClassVar[str] = INSTALL

    def detect(self, info: FsInfo) -> bool:
        return info.is_lustre

    def validate(self, request: Layout, where: str | os.PathLike | None = None) -> list[str]:
        return layout_problems(request)

    def apply(self, directory: str | os.PathLike, request: Layout) -> LayoutRecord:
        """Create ``directory`` and set its default layout, before any file exists in it; a failing ``lfs`` is a
        :class:`~ddlio.errors.LayoutError`."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if any(d.iterdir()):
            raise LayoutError(f"{d} already holds files: a layout must be set before any file exists in it")
        _run_lfs(["setstripe", *setstripe_args(request), str(d)])
        applied = parse_getstripe_yaml(_run_lfs(["getstripe", "-d", "--yaml", str(d)]))
        osts = active_osts(_run_lfs(["df", str(d)]))
        applied["active_osts"] = osts
        if osts and (request.stripe_count == -1 or request.stripe_count > osts):
            applied["stripe_count_capped"] = osts  # Lustre stripes a new file over at most the active OSTs
        return LayoutRecord(True, fs_info(d).type, request.requested(), applied=applied)

    def read_back(self, file: str | os.PathLike) -> dict[str, Any]:
        return parse_getstripe_yaml(_run_lfs(["getstripe", "--yaml", str(file)]))

    def describe(self, request: Layout, named: bool = False) -> str:
        """``<stripe_count>OST`` (``4OST``); ``named``: ``defaultOST`` for 0 and ``allOST`` for -1."""
        count = request.stripe_count
        return f"{NAMED_COUNTS.get(count, count) if named else count}{TARGET}"
