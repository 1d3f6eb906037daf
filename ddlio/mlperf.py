"""MLPerf Storage's two run rules that ddlio's validity verdict applies to its presets (``workload=mlperf/<name>``,
conf/workload/mlperf/), stated once for the job that probes and the analysis that judges.

1. The dataset-size rule (mlcommons/storage ``mlpstorage/rules.py``: ``calculate_training_data_size``; its
   ``Submission_guidelines.md`` §6.6 and §7): the dataset is at least :data:`MEMORY_MULTIPLE` × the memory of all
   the client nodes together, so that the page cache cannot hold it, and an epoch is at least
   :data:`MIN_STEPS_PER_EPOCH` steps (samples ≥ 500 × batch × ranks). :func:`size_shortfalls` says how a point falls
   short; a scaled-down point (``workload.scale``) is measured, and its verdict says it is not an MLPerf-sized run.
2. Results and logs are not on the storage under test: the run folders (records and logs) and the results store
   live on another file system than the datasets. :func:`apart` probes it as a hard link does: ``link(2)`` between
   two file systems fails with ``EXDEV``, within one it succeeds (a bind mount of the same file system is a mount
   apart too, and ``link`` says ``EXDEV`` there as well). The job probes before it measures
   (experiments/kinds/train.py) and stores the answer with the point's host facts (its environment's
   ``results_apart``).

The rules are MLPerf's, for MLPerf's workloads: a workload of one's own is judged by ddlio's own verdict (a cold cache
is verified by the kernel, not inferred from the dataset's size, and where the run folders live is ddlio's business).
Sizes in bytes.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path
from typing import Any

from ddlio.units import format_size

#: the workload presets the rules apply to: ``workload.name`` starting with it
PRESET_PREFIX = "mlperf/"
#: the dataset is at least this many times the client nodes' memory together
MEMORY_MULTIPLE = 5
#: an epoch is at least this many steps (batches of every rank)
MIN_STEPS_PER_EPOCH = 500
#: :func:`apart`'s answers: another file system (``EXDEV``), the same one (the link was made)
APART, SAME = "apart", "same"


def is_mlperf(workload_name: Any) -> bool:
    """Whether a point of workload preset ``workload_name`` is one of MLPerf Storage's (the rules apply)."""
    return isinstance(workload_name, str) and workload_name.startswith(PRESET_PREFIX)


def steps_per_epoch(samples: int, batch_size: int, ranks: int) -> int:
    """Whole steps in one epoch: samples / (batch × ranks), rounded down."""
    return int(samples // max(batch_size * ranks, 1))


def size_shortfalls(samples: int, sample_size: int, batch_size: int, ranks: int, nodes: int,
                    node_memory: float | None) -> list[str]:
    """How a point falls short of the dataset-size rule: "" items left out, so an empty list is an MLPerf-sized
    run. ``node_memory`` is one node's memory in bytes (all nodes alike, as MLPerf's host nodes are); unknown
    (None, NaN, 0): the memory half is not judged."""
    out = []
    data = float(samples) * float(sample_size)
    if node_memory is not None and node_memory == node_memory and node_memory > 0:
        need = MEMORY_MULTIPLE * float(node_memory) * max(int(nodes), 1)
        if data < need:
            out.append(f"the dataset ({format_size(data)}) is less than {MEMORY_MULTIPLE} x the nodes' memory "
                       f"({max(int(nodes), 1)} x {format_size(float(node_memory))}: needs {format_size(need)})")
    steps = steps_per_epoch(samples, batch_size, ranks)
    if steps < MIN_STEPS_PER_EPOCH:
        out.append(f"{steps} steps an epoch < {MIN_STEPS_PER_EPOCH} ({samples} samples / (batch {batch_size} x "
                   f"{ranks} ranks); needs {MIN_STEPS_PER_EPOCH * batch_size * ranks} samples)")
    return out


def apart(here: str | os.PathLike, there: str | os.PathLike) -> str:
    """Whether directory ``here`` is on another file system than directory ``there``, probed as MLPerf's rule
    asks: a file made in ``here`` is hard-linked into ``there``. ``EXDEV``: :data:`APART`; the link made:
    :data:`SAME` (both names are removed again); anything else: ``unknown (<why>)`` (a directory missing, a file
    system without hard links)."""
    name = f".ddlio-exdev-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    src, dst = Path(here) / name, Path(there) / name
    try:
        src.touch(exist_ok=False)
    except OSError as e:
        return f"unknown ({errno.errorcode.get(e.errno or 0, 'error')} making a file in {here})"
    try:
        os.link(src, dst)
    except OSError as e:
        if e.errno == errno.EXDEV:
            return APART
        return f"unknown ({errno.errorcode.get(e.errno or 0, 'error')} linking into {there})"
    finally:
        src.unlink(missing_ok=True)
    dst.unlink(missing_ok=True)
    return SAME


def store_dir(db: str) -> Path | None:
    """The directory of a SQLite store (a path, or a ``sqlite:///`` URL); None for a database server's URL."""
    if db.startswith("sqlite:///"):
        return Path(db[len("sqlite:///"):]).parent
    return None if "://" in db else Path(db).parent


def results_apart(run_dir: str | os.PathLike, datasets_dir: str | os.PathLike, db: str) -> dict[str, str]:
    """The rule's probe, for the environment record of a point: ``run_dir`` (where its records and logs go) and
    the results store's directory, each against ``datasets_dir`` (the storage under test): :data:`APART`,
    :data:`SAME` or ``unknown (...)``; a store on a database server is ``server`` (not a file on any file system
    the point reads)."""
    where = store_dir(db)
    if where is None:
        store = "server"
    elif not where.is_dir():  # a Slurm job on a node that does not see the driver's store file
        store = f"unknown ({where} is not visible here)"
    else:
        store = apart(where, datasets_dir)
    return {"run_dir": apart(run_dir, datasets_dir), "store": store}


def apart_shortfall(facts: Any) -> str:
    """What breaks the rule in an environment's ``results_apart`` (:func:`results_apart`): "" when nothing is
    known to (every answer ``apart``, ``server`` or unknown)."""
    if not isinstance(facts, dict):
        return ""
    same = [what for what, key in (("run folder (records, logs)", "run_dir"), ("results store", "store"))
            if facts.get(key) == SAME]
    return " and ".join(same)
