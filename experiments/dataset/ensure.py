"""The content-keyed cache of datasets under ``data_root/datasets``: reuse a complete dataset, else (re)build it
(lock, layout, generation, verification, the manifest last); a dataset found damaged while read is invalidated.

A dataset directory's ``manifest.json`` is written last and is the completion mark: a directory without one, or
whose files differ in size from it, is rebuilt, never read.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddlio.errors import DatasetError
from ddlio.lazy import lazy_import
from experiments.dataset.lock import dataset_lock
from experiments.dataset.plan import LOADS, MANIFEST, RECORDS, SIZES, DatasetPlan
from experiments.dataset.verify import read_verification, whole_loads
from experiments.formats import get_format
from lustre import Layout, apply_layout, read_layout

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py


def data_files(plan: DatasetPlan) -> list[Path]:
    """Every file of the dataset that a reader touches: data files and their sidecars (indexes)."""
    fmt = get_format(plan.format, **plan.format_options)
    out = []
    for f in range(plan.num_files):
        p = Path(plan.file_path(f))
        out.append(p)
        out += fmt.sidecars(p)
    return out


def load_manifest(plan: DatasetPlan) -> dict[str, Any] | None:
    """The dataset's manifest if the dataset is complete and intact (every file present with its recorded size),
    else None."""
    path = Path(plan.directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    except OSError as e:  # EIO, ESTALE ...: not a reason to delete a dataset others may be reading
        raise DatasetError(f"cannot read {path}: {e}") from e
    d = Path(plan.directory)
    if manifest.get("key") != plan.key or not (d / SIZES).is_file() or not (d / RECORDS).is_file():
        return None
    for entry in manifest.get("files", []):
        p = Path(plan.directory) / entry["name"]
        if not p.is_file() or p.stat().st_size != entry["bytes"]:
            return None
    return manifest


def invalidate_dataset(plan: DatasetPlan, reason: str) -> str:
    """Mark a dataset whose bytes failed verification while being read (a checksum, a header) as incomplete: its
    manifest is renamed (kept, with the reason beside it, for inspection), so the next run that needs it rebuilds
    it. Returns the manifest's new name (or a note that another job already did it)."""
    d = Path(plan.directory)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    with dataset_lock(plan):
        if not (d / MANIFEST).exists():
            return "already invalidated"
        dest = d / f"{MANIFEST}.invalid-{stamp}"
        os.replace(d / MANIFEST, dest)
        (d / f"invalid-{stamp}.txt").write_text(reason)
    return dest.name


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


@dataclass
class DatasetInfo:
    """A ready dataset: its plan, manifest, and whether this call generated it (and in how many seconds)."""

    plan: DatasetPlan
    manifest: dict[str, Any]
    generated: bool
    seconds: float


def ensure_dataset(
    plan: DatasetPlan,
    layout: Layout,
    run_generation: Callable[[str, int], None],
    ranks: int,
) -> DatasetInfo:
    """Reuse the dataset if complete, else (re)build it: lock, empty directory with its layout set (by the storage
    backend of its file system, :mod:`lustre.registry`) before any file exists, parallel generation through
    ``run_generation(plan_json_path, ranks)``, verification, then the manifest last."""
    with dataset_lock(plan):
        manifest = load_manifest(plan)
        if manifest is not None:
            _plan_whole_loads(plan)
            return DatasetInfo(plan, manifest, False, 0.0)
        t0 = time.perf_counter()
        manifest = _build(plan, layout, run_generation, ranks, t0)
        return DatasetInfo(plan, manifest, True, time.perf_counter() - t0)


def _plan_whole_loads(plan: DatasetPlan) -> None:
    """A complete dataset generated before whole loads were planned: add their plan (``load=whole`` formats)."""
    d = Path(plan.directory)
    if not (d / LOADS).is_file() and get_format(plan.format, **plan.format_options).loads_whole:
        loads = whole_loads(plan)
        if loads is not None:
            np.save(d / LOADS, loads)


def _build(plan: DatasetPlan, layout: Layout, run_generation: Callable[[str, int], None], ranks: int,
           t0: float) -> dict[str, Any]:
    """Under the dataset's lock: rebuild its directory from nothing and return the manifest written last
    (``t0``: ``time.perf_counter()`` at the start, for ``generation_s``)."""
    d = Path(plan.directory)
    if d.exists():
        shutil.rmtree(d)  # incomplete or damaged: never read, rebuilt
    record = apply_layout(d, layout)
    plan_path = d / "plan.json"
    write_json_atomic(plan_path, plan.to_dict())
    gen_ranks = max(1, min(ranks, plan.num_files))
    run_generation(str(plan_path), gen_ranks)  # it draws the sizes, writes the files and checks them
    found = read_verification(plan)
    entries = found["entries"]
    record = read_layout(record, [d / e["name"] for e in entries if e["samples"]][:8])
    manifest = {
        "key": plan.key,
        "plan": plan.to_dict(),
        "files": entries,
        "payload_bytes": found["payload_bytes"],
        "record_bytes": found["record_bytes"],
        "disk_bytes": sum(e["bytes"] for e in entries),
        "layout": record.to_dict(),
        "generated_on": socket.gethostname(),
        "generation_ranks": gen_ranks,
        "generation_s": time.perf_counter() - t0,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # reads are tracked (experiments.kernel.cache.claim_first_read): the first one since generation is known
        "tracks_reads": True,
    }
    write_json_atomic(d / MANIFEST, manifest)
    return manifest
