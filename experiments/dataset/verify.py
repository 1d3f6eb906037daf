"""Verification of a generated dataset, where it was written: after writing, each generation rank opens the files
it wrote and checks their sample counts (and their record sizes, where the format predicts them) against the plan;
rank 0 gathers what the ranks found and writes the kernel's byte plans (``records.npy``, and ``loads.npy`` for
formats loaded whole), then ``verified.json``, which the job reads to write the manifest.

So the job process builds a dataset without numpy or a format's library (8-9 MiB and ~60 ms it would otherwise
load beside the point's ranks), and a dataset's files are checked by all the generation ranks at once instead of
by the job after the step. A file found wrong fails the point with a :class:`~ddlio.errors.DatasetError` in the job
(:func:`read_verification`), as a check in the job did.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddlio.errors import DatasetError
from ddlio.lazy import lazy_import
from experiments.dataset.plan import LOADS, RECORDS, SIZES, DatasetPlan
from experiments.formats import get_format

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

#: what the generation ranks found (rank 0 writes it last): the files' manifest entries and byte totals, or the error
VERIFIED = "verified.json"


def plan_sizes(plan: DatasetPlan) -> np.ndarray:
    """The bytes of every sample (int64), drawn from the plan's seed and saved as ``sizes.npy``, which the
    generation's writers read: rank 0 of the step (or the one process) calls it before any file is written."""
    sizes = plan.sizes()
    np.save(os.path.join(plan.directory, SIZES), sizes)
    return sizes


def whole_load_bytes(plan: DatasetPlan, files: Sequence[int]) -> dict[int, int | None]:
    """Bytes one whole load of each file of ``files`` reads (from its structure: no data is read), None for a
    format that cannot load files whole."""
    fmt = get_format(plan.format, **plan.format_options)
    return {f: fmt.whole_load_bytes(plan.file_path(f)) for f in files}


def whole_loads(plan: DatasetPlan, loads: dict[int, int | None] | None = None) -> np.ndarray | None:
    """Bytes one whole load of each file reads (int64 per file; ``loads``: :func:`whole_load_bytes` of every file,
    worked out here when not given), or None for a format that cannot load files whole."""
    loads = whole_load_bytes(plan, range(plan.num_files)) if loads is None else loads
    got = [loads[f] for f in range(plan.num_files)]
    return None if any(n is None for n in got) else np.array(got, dtype=np.int64)


def verify_dataset(plan: DatasetPlan, sizes: np.ndarray,
                   files: Sequence[int] | None = None) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Open every file (or the files ``files``) and check its sample count (and, where the format can predict
    them, its record sizes) against the plan; DatasetError for the first that differs. Returns the files'
    manifest entries, in file order, and the bytes per record of every sample (0 for the samples of files not
    checked)."""
    fmt = get_format(plan.format, **plan.format_options)
    starts = plan.file_starts
    entries = []
    records = np.zeros(plan.samples, dtype=np.int64)
    for f in range(plan.num_files) if files is None else sorted(files):
        path = plan.file_path(f)
        if not os.path.isfile(path):
            raise DatasetError(f"generation left no file {path}")
        n_want = int(starts[f + 1] - starts[f])
        with fmt.open(path) as r:
            got = np.array([r.record_bytes(i) for i in range(r.num_samples)], dtype=np.int64)
        want = fmt.expected_record_bytes(sizes[starts[f] : starts[f + 1]])
        if len(got) != n_want or (want is not None and not np.array_equal(got, want)) or np.any(got <= 0):
            raise DatasetError(
                f"{path}: holds {len(got)} samples / {int(got.sum())} bytes, planned {n_want}"
                + (f" / {int(want.sum())}" if want is not None else "")
            )
        records[starts[f] : starts[f + 1]] = got
        entries.append({"name": plan.file_name(f), "bytes": os.path.getsize(path), "samples": len(got),
                        "file": f})
        for side in fmt.sidecars(path):
            entries.append({"name": side.name, "bytes": side.stat().st_size, "samples": 0, "file": f})
    return entries, records


def check_files(plan: DatasetPlan, sizes: np.ndarray, files: Sequence[int]) -> dict[str, Any]:
    """One rank's part: :func:`verify_dataset` of the files it wrote and their whole-load bytes (a problem as its
    text)."""
    try:
        entries, records = verify_dataset(plan, sizes, files)
    except DatasetError as e:
        return {"error": str(e)}
    starts = plan.file_starts
    return {"entries": entries,  # each file's record bytes as an int64 array (gathered by pickle: 8 bytes a sample)
            "records": {f: records[starts[f] : starts[f + 1]].copy() for f in files},
            "loads": whole_load_bytes(plan, files)}


def verification(plan: DatasetPlan, sizes: np.ndarray, parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rank 0 (or the one process), with every rank's :func:`check_files`: writes the byte plans and returns what
    ``verified.json`` holds (the caller writes it, last), or the first rank's problem, in rank order."""
    d = Path(plan.directory)
    error = next((p["error"] for p in parts if "error" in p), None)
    if error is not None:
        return {"error": error}
    starts = plan.file_starts
    records = np.zeros(plan.samples, dtype=np.int64)
    entries = sorted((e for p in parts for e in p["entries"]), key=lambda e: e["file"])  # stable: sidecars follow
    for p in parts:
        for f, got in p["records"].items():
            records[starts[int(f)] : starts[int(f) + 1]] = got
    np.save(d / RECORDS, records)
    loads = whole_loads(plan, {int(f): n for p in parts for f, n in p["loads"].items()})
    if loads is not None:
        np.save(d / LOADS, loads)
    return {"entries": [{k: v for k, v in e.items() if k != "file"} for e in entries],
            "payload_bytes": int(sizes.sum()), "record_bytes": int(records.sum())}


def read_verification(plan: DatasetPlan) -> dict[str, Any]:
    """What the generation found (``entries``, ``payload_bytes``, ``record_bytes``); DatasetError when it found a
    file wrong, or left no verification (a step that ended without writing it)."""
    path = Path(plan.directory) / VERIFIED
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DatasetError(f"generation left no verification of its files ({path}: {e})") from e
    if "error" in found:
        raise DatasetError(found["error"])
    return found
