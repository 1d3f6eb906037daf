"""The MPI reader kernel: ``mpiexec -n RANKS python -m experiments.kernel SPEC.json``.

Each rank reads its share of the dataset's samples in batches, for every epoch, the way a data loader feeds a
training step: open files as they are first needed, one read per sample into a preallocated buffer, then the
batch's emulated compute (sleep). Every read and metadata call is timed (``time.perf_counter_ns``); the figures
are defined in :mod:`experiments.metrics`.

Before each epoch, one rank per node evicts the dataset's pages (``cache=cold``) and measures residency with
mincore before and after, so every epoch is labelled ``cold`` (eviction verified), ``warm`` (data read once before
the first epoch and left cached) or ``unknown`` (eviction could not be verified). Rank 0 checks that the bytes the
reads returned equal the plan exactly, and writes the result file atomically.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from experiments import cache as pagecache
from experiments.dataset import DatasetPlan, data_files, write_json_atomic
from experiments.errors import KernelError
from experiments.formats import get_format
from experiments.metrics import RankEpoch, aggregate, aggregate_run, histogram

#: After eviction, at most this fraction of the dataset's pages may still be resident for an epoch to count cold.
COLD_TOLERANCE = 0.01


def rank_samples(plan: DatasetPlan, access: str, ranks: int, rank: int) -> np.ndarray:
    """Global sample ids that ``rank`` reads in one epoch, in order.

    shared: the id range is cut into ``ranks`` contiguous blocks (block sizes differ by at most one);
    fpp: the rank reads exactly the samples of its own files (``num_files / ranks`` consecutive files).
    """
    if access == "fpp":
        per = plan.num_files // ranks
        starts = plan.file_starts
        return np.arange(starts[rank * per], starts[(rank + 1) * per], dtype=np.int64)
    bounds = np.linspace(0, plan.samples, ranks + 1).round().astype(np.int64)
    return np.arange(bounds[rank], bounds[rank + 1], dtype=np.int64)


def read_proc_io() -> dict[str, int]:
    """This process's I/O counters from /proc/self/io (``rchar``, ``read_bytes``...), or {} where unavailable."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}


def _prepare_cache(policy: str, epoch: int, files: list[Path], leader: bool) -> dict[str, Any] | None:
    """On a node leader: measure residency, evict (cold) or warm once (warm), measure again."""
    if not leader:
        return None
    before = pagecache.residency(files)
    if policy == "cold":
        try:
            pagecache.evict(files)
        except OSError as e:
            return {"before": before, "after": float("nan"), "error": f"eviction failed: {e}"}
    elif epoch == 0:
        pagecache.warm(files)
    return {"before": before, "after": pagecache.residency(files)}


def _cache_state(policy: str, reports: list[dict[str, Any]]) -> tuple[str, float, float, str]:
    before = max(r["before"] for r in reports)
    after = max(r["after"] for r in reports)
    note = "; ".join(r["error"] for r in reports if r.get("error"))
    if policy == "warm":
        return "warm", before, after, note
    if after == after and after <= COLD_TOLERANCE:  # not NaN, and (almost) nothing left cached
        return "cold", before, after, note
    note = note or (
        "residency could not be measured (mincore)" if after != after
        else f"{after:.1%} of the dataset stayed cached after eviction"
    )
    return "unknown", before, after, note


def guarded_barrier(comm: Any, timeout_s: float, what: str) -> None:
    """A barrier that gives up after ``timeout_s`` seconds: a hung or dead rank must not hang the sweep.
    On time-out the step is aborted (MPI_Abort), naming where it stuck."""
    req = comm.Ibarrier()
    deadline = time.monotonic() + timeout_s
    while not req.Test():
        if time.monotonic() > deadline:
            print(f"ddlio kernel: rank {comm.rank} waited {timeout_s:.0f} s for the other ranks at {what}: "
                  "a rank hung or died; aborting the step", file=sys.stderr, flush=True)
            comm.Abort(4)
        time.sleep(0.001)


def _fault(point: dict[str, Any], rank: int) -> str | None:
    """Fault injection for testing failure handling: ``DDLIO_FAULT=crash@RANK[:FORMAT]`` or
    ``hang@RANK[:FORMAT]`` makes that rank crash (exit 9) or hang in its first epoch."""
    spec = os.environ.get("DDLIO_FAULT", "")
    if not spec:
        return None
    kind, _, where = spec.partition("@")
    r, _, fmt = where.partition(":")
    if int(r or -1) == rank and (not fmt or fmt == point["format"]):
        return kind
    return None


def run(spec: dict[str, Any]) -> dict[str, Any] | None:
    """Run the kernel on this rank; rank 0 returns the result record, the others None."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, nranks = comm.rank, comm.size
    point, plan = spec["point"], DatasetPlan.from_dict(spec["plan"])
    if nranks != point["ranks"]:
        raise KernelError(f"the kernel runs on {nranks} ranks but the point asks for {point['ranks']}")
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    node_comm = comm.Split_type(MPI.COMM_TYPE_SHARED)
    leader = node_comm.rank == 0
    fmt = get_format(plan.format, **plan.format_options)
    record = plan.record_bytes()
    files = data_files(plan)
    paths = [plan.file_path(f) for f in range(plan.num_files)]
    starts = plan.file_starts

    ids = rank_samples(plan, point["access"], nranks, rank)
    file_of = np.searchsorted(starts, ids, side="right") - 1
    local_of = ids - starts[file_of]
    buf = np.empty(int(record[ids].max()) if len(ids) else 1, dtype=np.uint8)
    batch, compute_s, policy = point["batch_size"], point["compute_time"], point["cache"]
    guard_s = float(point["cluster"].get("hang_timeout_s", 600))
    fault = _fault(point, rank)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    epochs: list[list[RankEpoch]] = []
    cache_rows: list[dict[str, Any]] = []
    for epoch in range(point["epochs"]):
        report = _prepare_cache(policy, epoch, files, leader)
        reports = [r for r in comm.allgather(report) if r is not None]
        state, before, after, note = _cache_state(policy, reports)
        cache_rows.append({"cache": state, "residency_before": before, "residency_after": after, "cache_note": note})
        guarded_barrier(comm, guard_s, f"the start of epoch {epoch}")

        m = RankEpoch(rank, node, epoch)
        lat = np.empty(len(ids), dtype=np.int64)
        readers: dict[int, Any] = {}
        meta_ns = 0
        perf = time.perf_counter_ns
        io0 = read_proc_io()
        t_epoch = perf()
        nbytes = 0
        fo, lo = file_of.tolist(), local_of.tolist()
        for b0 in range(0, len(ids), batch):
            for k in range(b0, min(b0 + batch, len(ids))):
                f = fo[k]
                r = readers.get(f)
                if r is None:
                    t = perf()
                    r = readers[f] = fmt.open(paths[f])
                    meta_ns += perf() - t
                t = perf()
                nbytes += r.read(lo[k], buf)
                lat[k] = perf() - t
            if fault and epoch == 0:
                if fault == "crash":
                    print(f"ddlio kernel: rank {rank} crashing on purpose (DDLIO_FAULT)", file=sys.stderr, flush=True)
                    os._exit(9)
                while fault == "hang":
                    time.sleep(1)
            if compute_s > 0:
                t = perf()
                time.sleep(compute_s)
                m.compute_time_s += (perf() - t) / 1e9
        for r in readers.values():
            t = perf()
            r.close()
            meta_ns += perf() - t
        m.wall_time_s = (perf() - t_epoch) / 1e9
        m.os_read_bytes = read_proc_io().get("read_bytes", 0) - io0.get("read_bytes", 0)
        m.samples = len(ids)
        m.bytes_read = nbytes
        m.read_ops = len(ids)
        m.meta_ops = 2 * len(readers)  # one open and one close per file touched
        m.read_time_s = float(lat.sum()) / 1e9
        m.meta_time_s = meta_ns / 1e9
        m.hist = histogram(lat).tolist()
        guarded_barrier(comm, guard_s, f"the end of epoch {epoch}")
        gathered = comm.gather(m, root=0)
        if rank == 0:
            epochs.append(gathered)

    own = {
        "rank": rank,
        "node": node,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    ranks_info = comm.gather(own, root=0)
    if rank != 0:
        return None

    from mpi4py import MPI as _MPI

    planned_per_epoch = int(sum(record[rank_samples(plan, point["access"], nranks, r)].sum() for r in range(nranks)))
    epoch_rows = []
    for e, (ranks_e, cache_row) in enumerate(zip(epochs, cache_rows, strict=True)):
        agg = aggregate(ranks_e)
        agg.update(cache_row, epoch=e, bytes_planned=planned_per_epoch, ranks=[r.to_dict() for r in ranks_e])
        if agg["bytes_read"] != planned_per_epoch:
            raise KernelError(
                f"epoch {e}: the reads returned {agg['bytes_read']} bytes, the plan is {planned_per_epoch}: "
                "the measurement is not trustworthy"
            )
        epoch_rows.append(agg)
    total = aggregate_run(epochs)
    states = {row["cache"] for row in cache_rows}
    total.update(
        bytes_planned=planned_per_epoch * len(epochs),
        cache=states.pop() if len(states) == 1 else "mixed",
        max_rss_kib=max(r["max_rss_kib"] for r in ranks_info),
    )
    nodes = sorted({r["node"] for r in ranks_info})
    return {
        "kind": "ddlio.result",
        "version": 1,
        "point_key": point["point_key"],
        "dataset_key": plan.key,
        "ranks": nranks,
        "nodes": nodes,
        "hosts": sorted({r["host"] for r in ranks_info}),
        "rank_info": ranks_info,
        "mpi_library": _MPI.Get_library_version().strip().splitlines()[0],
        "mpi_vendor": "{} {}".format(_MPI.get_vendor()[0], ".".join(map(str, _MPI.get_vendor()[1]))),
        "totals": total,
        "epochs": epoch_rows,
        "started_utc": started,
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main(argv: list[str]) -> int:
    """``python -m experiments.kernel SPEC.json [--result PATH]`` (``--result`` overrides the spec's result
    path: the reproducer writes beside the original result instead of over it)."""
    spec_path = argv[0]
    spec = json.loads(Path(spec_path).read_text())
    if len(argv) == 3 and argv[1] == "--result":
        spec["result_path"] = argv[2]
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.rank
    try:
        result = run(spec)
    except KernelError as e:
        print(f"ddlio kernel: {e}", file=sys.stderr, flush=True)
        return 3
    except Exception as e:
        print(f"ddlio kernel rank {rank} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(2)
        return 2
    if result is not None:
        write_json_atomic(spec["result_path"], result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
