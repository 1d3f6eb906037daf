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

from ddlio.lazy import lazy_import
from ddlio.plain import write_json_atomic
from experiments.dataset.lock import dataset_lock
from experiments.dataset.plan import LOADS, MANIFEST, RECORDS, SIZES, DatasetPlan, load_manifest
from experiments.dataset.verify import VERIFIED, read_verification, whole_loads
from experiments.formats import get_format
from lustre import Layout, apply_layout, read_layout

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py


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


#: the files ddlio writes in every dataset directory, besides the data files and their sidecars
_OWN = ("plan.json", MANIFEST, SIZES, RECORDS, LOADS, VERIFIED)


def own_names(plan: DatasetPlan) -> set[str]:
    """The names of the files ddlio writes in the dataset directory of ``plan``: its data files and their sidecars
    (as the plan and the format name them), the plan, byte plans, verification and manifest, and every file that a
    manifest found there (the current one, or one renamed by :func:`invalidate_dataset`) lists."""
    d = Path(plan.directory)
    fmt = get_format(plan.format, **plan.format_options)
    names = set(_OWN)
    for f in range(plan.num_files):
        names.add(plan.file_name(f))
        names.update(p.name for p in fmt.sidecars(d / plan.file_name(f)))
    for m in [d / MANIFEST, *d.glob(f"{MANIFEST}.invalid-*")]:
        try:
            files = json.loads(m.read_text()).get("files") or []
        except (OSError, ValueError, AttributeError):
            continue
        names.update(e["name"] for e in files if isinstance(e, dict) and isinstance(e.get("name"), str))
    return {n for n in names if n and "/" not in n and n not in (".", "..")}


def _own(name: str, names: set[str]) -> bool:
    """Whether the entry ``name`` of a dataset directory is ddlio's: one of ``names``, a manifest renamed or a note
    left by :func:`invalidate_dataset`, a read marker (:func:`experiments.kernel.cache.read_marker`), or a
    temporary file of one of them (``<name>.tmp.<pid>``, as :func:`ddlio.plain.write_json_atomic` leaves)."""
    return (name in names or name.startswith((f"{MANIFEST}.invalid-", ".read-since-"))
            or (name.startswith("invalid-") and name.endswith(".txt")) or name.partition(".tmp.")[0] in names)


def remove_own_files(plan: DatasetPlan) -> list[str]:
    """Before a rebuild: remove from the dataset directory of ``plan`` the files ddlio wrote there
    (:func:`own_names`), and nothing else (through a link too: only the entries ddlio names). Returns the names
    kept (a user's files: a file system whose layout must be set on an empty directory then says they are in the
    way)."""
    d = Path(plan.directory)
    if not d.is_dir():
        return []
    names = own_names(plan)
    kept = []
    for entry in sorted(d.iterdir()):
        if not _own(entry.name, names):
            kept.append(entry.name)
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return kept


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
    if d.exists() or d.is_symlink():
        remove_own_files(plan)  # incomplete or damaged: never read, rebuilt; a file ddlio did not write is kept
    record = apply_layout(d, layout)
    plan_path = d / "plan.json"
    write_json_atomic(plan_path, plan.to_dict(), durable=False)  # the generation's input: the manifest holds it
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
