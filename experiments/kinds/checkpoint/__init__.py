"""The ``checkpoint`` kind: a training checkpoint written by every rank at the same instant, fsync'd, then read
back with the caches emptied (the other half of training I/O).

A point's checkpoint is its options ``checkpoint.*`` (a preset of conf/checkpoint/: the model's dimensions and its
parallelism, and how to write it), laid out as ``access`` and ``checkpoint.layout`` say
(:mod:`~experiments.kinds.checkpoint.plan`), in fresh directories under ``data_root/checkpoints/<point key>/``
whose layout (stripe count, stripe size, CephFS object size, pool) is set before any file exists in them and
read back per file after. The MPI program (:mod:`~experiments.kinds.checkpoint.step`) measures; this module runs it
in the job and turns what its ranks said into the point's metrics (rows of the store's ``point_metrics``). The
checkpoints are deleted once measured: they are the measurement's by-product, not a dataset to reuse.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any, ClassVar

from ddlio import env as envinfo
from ddlio.errors import KernelError
from ddlio.metrics import percentile_us
from ddlio.units import format_size
from experiments.config import PointSpec
from experiments.dataset import exclusive, write_json_atomic
from experiments.executors import executor_for
from experiments.kinds.base import JobContext, Measured, Metric, WorkloadKind
from experiments.kinds.checkpoint.plan import CheckpointPlan
from lustre import Layout, apply_layout, read_layout
from lustre.fs import fs_info

MIB, GIB = 1024**2, 1024**3
#: MLPerf Storage's rule: the restore starts within this many seconds of the save's end
MLPERF_READ_WITHIN_S = 30.0
#: the file that marks a directory as ddlio's checkpoints (only such a directory is ever emptied)
MARKER = ".ddlio-checkpoints"


def _phase_metrics(prefix: str, verb: str, per_rank: list[list[dict[str, Any]]]) -> dict[str, float]:
    """A phase's metrics (``write`` or ``read``) from every rank's figures of every checkpoint (``per_rank[r][k]``).

    ``<p>_time_s`` is Darshan's view: the slowest rank's time in its calls over all checkpoints, and
    ``<p>_bandwidth_mib_s`` the bytes over it (agg_perf_by_slowest); ``<p>_duration_max_s`` is MLPerf's: each
    checkpoint's largest per-rank duration (barrier to the end of the save or restore), summed, and
    ``<p>_throughput_gib_s`` the bytes over it. The memory work torch does beside the calls (the save's checksums,
    ``write_crc_time_s``; the restore's copies into the state, ``read_copy_time_s``) is in the durations, not in
    the calls' time, as fsync is apart from the data calls (:mod:`experiments.kinds.checkpoint.calls`)."""
    count = len(per_rank[0])
    total = sum(f["bytes"] for rank in per_rank for f in rank)
    slowest = max(sum(f["io_s"] for f in rank) for rank in per_rank)
    duration = sum(max(rank[k]["duration_s"] for rank in per_rank) for k in range(count))
    hist = _sum_hists([f["hist"] for rank in per_rank for f in rank])
    proc = [f["proc"].get(f"{'write' if prefix == 'write' else 'read'}_bytes") for rank in per_rank for f in rank]
    out = {
        f"bytes_{verb}": float(total),
        f"{prefix}_time_s": slowest,
        f"{prefix}_bandwidth_mib_s": total / MIB / slowest if slowest > 0 else float("nan"),
        f"{prefix}_duration_max_s": duration,
        f"{prefix}_throughput_gib_s": total / GIB / duration if duration > 0 else float("nan"),
        f"{prefix}_meta_time_s": max(sum(f["meta_s"] for f in rank) for rank in per_rank),
        f"{prefix}_lat_p50_us": percentile_us(hist, 50) if hist else float("nan"),
        f"{prefix}_lat_p99_us": percentile_us(hist, 99) if hist else float("nan"),
        f"{prefix}s": float(sum(f["calls"] for rank in per_rank for f in rank)),
        f"os_{prefix}_bytes": float(sum(proc)) if proc and None not in proc else float("nan"),
    }
    if prefix == "write":
        out["fsync_time_s"] = max(sum(f["fsync_s"] for f in rank) for rank in per_rank)
        out["write_crc_time_s"] = max(sum(f.get("crc_s", 0.0) for f in rank) for rank in per_rank)
    else:
        out["read_copy_time_s"] = max(sum(f.get("copy_s", 0.0) for f in rank) for rank in per_rank)
    return out


def _sum_hists(hists: list[list[int]]) -> list[int]:
    hists = [h for h in hists if h]
    return [sum(col) for col in zip(*hists, strict=True)] if hists else []


def _per_checkpoint(said: dict[str, Any], phase: str) -> list[dict[str, float]]:
    """Each checkpoint's own figures of a phase (``saves``, ``restores``): bytes, the slowest rank's time in its
    calls and the largest duration (s), and their bandwidths (MiB/s, GiB/s); the largest rank's time in the save's
    checksums (``crc_time_max_s``) or the restore's copies (``copy_time_max_s``), s."""
    ranks = said["ranks"]
    apart, field = ("crc_time_max_s", "crc_s") if phase == "saves" else ("copy_time_max_s", "copy_s")
    out = []
    for k in range(len(ranks[0][phase])):
        b = sum(r[phase][k]["bytes"] for r in ranks)
        slow = max(r[phase][k]["io_s"] for r in ranks)
        dur = max(r[phase][k]["duration_s"] for r in ranks)
        out.append({"checkpoint": k, "bytes": b, "io_time_slowest_s": slow, "duration_max_s": dur,
                    "bandwidth_mib_s": b / MIB / slow if slow > 0 else None,
                    "throughput_gib_s": b / GIB / dur if dur > 0 else None,
                    apart: max(r[phase][k].get(field, 0.0) for r in ranks)})
    return out


class CheckpointKind(WorkloadKind):
    """Checkpoints as a trainer writes and restores them, measured as Darshan and MLPerf Storage do."""

    name: ClassVar[str] = "checkpoint"
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("checkpoints", "", "checkpoints written in a row (checkpoint.count)"),
        Metric("checkpoint_bytes", "bytes", "one checkpoint's bytes, all ranks, index included"),
        Metric("files", "", "files of one checkpoint"),
        Metric("bytes_written", "bytes", "bytes the write calls returned, all ranks and checkpoints"),
        Metric("os_write_bytes", "bytes", "bytes the ranks' /proc write_bytes counters saw sent to storage"),
        Metric("write_time_s", "s", "the slowest rank's time in create/open, write, fsync and close calls"),
        Metric("write_bandwidth_mib_s", "MiB/s", "bytes_written / write_time_s (Darshan's agg_perf_by_slowest)"),
        Metric("write_duration_max_s", "s", "each checkpoint's largest per-rank save duration, summed (MLPerf)"),
        Metric("write_throughput_gib_s", "GiB/s", "bytes_written / write_duration_max_s (MLPerf's figure)"),
        Metric("fsync_time_s", "s", "the slowest rank's time in fsync"),
        Metric("write_meta_time_s", "s", "the slowest rank's time in create/open and close"),
        Metric("write_crc_time_s", "s", "the slowest rank's time computing each piece's CRC-32 before writing it, "
                                        "as torch.save does in DCP's save (0 for access=shared)"),
        Metric("write_lat_p50_us", "us", "median write call latency"),
        Metric("write_lat_p99_us", "us", "99th percentile write call latency"),
        Metric("writes", "", "write calls, all ranks"),
        Metric("bytes_read", "bytes", "bytes the restore's read calls returned, all ranks and checkpoints"),
        Metric("os_read_bytes", "bytes", "bytes the ranks' /proc read_bytes counters saw fetched from storage"),
        Metric("read_time_s", "s", "the slowest rank's time in the restore's open, read and close calls"),
        Metric("read_bandwidth_mib_s", "MiB/s", "bytes_read / read_time_s (Darshan's agg_perf_by_slowest)"),
        Metric("read_duration_max_s", "s", "each checkpoint's largest per-rank restore duration, summed (MLPerf)"),
        Metric("read_throughput_gib_s", "GiB/s", "bytes_read / read_duration_max_s (MLPerf's figure)"),
        Metric("read_meta_time_s", "s", "the slowest rank's time in open and close while restoring"),
        Metric("read_lat_p50_us", "us", "median read call latency"),
        Metric("read_lat_p99_us", "us", "99th percentile read call latency"),
        Metric("reads", "", "read calls, all ranks"),
        Metric("read_copy_time_s", "s", "the slowest rank's time copying the pieces it read into its state, as "
                                        "DCP's load and torch.load + load_state_dict do"),
        Metric("restore_resident_fraction", "", "page-cache residency of the checkpoint files before the restore "
                                                "(worst node; 0 = emptied)"),
        Metric("write_to_read_s", "s", "seconds from the last save's end to the restore's start (MLPerf: <= 30)"),
    )
    analyses: ClassVar[frozenset[str] | None] = frozenset()  # train's figures and findings read train's wide row

    def describe(self, spec: PointSpec) -> str:
        """What the point will write and read, for the dry run."""
        plan = self.plan(spec)
        shards = sorted(set(plan.shard_bytes))
        each = (format_size(shards[0]) if len(shards) == 1
                else f"{format_size(shards[0])} to {format_size(shards[-1])}")
        files = "one shared file" if plan.access == "shared" else f"{plan.layout} files, one per rank"
        restore = (f", then restored (rank r reads rank r+{plan.read_shift}'s shard)" if plan.read_shift
                   else ", then restored") if plan.restore else ", not restored"
        return (f"{plan.count} checkpoint(s) of {format_size(plan.checkpoint_bytes())} ({files}, {each} a rank, "
                f"{format_size(plan.transfer_size)} a call){restore}, under {plan.root}")

    def plan(self, spec: PointSpec) -> CheckpointPlan:
        """The point's checkpoints (:class:`CheckpointPlan`), under ``data_root/checkpoints/<point key>``."""
        root = Path(spec.data_root) / "checkpoints" / spec.point_key
        return CheckpointPlan.build(spec.checkpoint, spec.ranks, spec.layout.access, spec.seed, root)

    def run(self, ctx: JobContext) -> Measured:
        """Lay out the point's checkpoint directories, run the MPI step, read the layouts back per file: the
        point's record (metrics, per-checkpoint figures, the layout, the caches) and environment."""
        spec = ctx.spec
        plan = self.plan(spec)
        root = Path(plan.root)
        spec_path, result_path = ctx.run_dir / "checkpoint-spec.json", ctx.run_dir / "checkpoint-result.json"
        result_path.unlink(missing_ok=True)
        _fresh(root, plan)
        try:
            request = Layout(spec.layout.stripe_count, spec.layout.stripe_size, spec.layout.object_size,
                             spec.layout.pool)
            records = [apply_layout(plan.directory(k), request) for k in range(plan.count)]
            write_json_atomic(spec_path, {"plan": plan.to_dict(), "result_path": str(result_path),
                                          "hang_timeout_s": spec.cluster.hang_timeout_s})
            env = envinfo.collect(hdf5=False)
            started = time.time()
            lock = executor_for(spec.cluster.executor).measurement_lock(spec)
            with exclusive(lock) if lock else contextlib.nullcontext():
                ctx.steps("experiments.kinds.checkpoint.step", [str(spec_path)], spec.ranks, "checkpoint")
            finished = time.time()
            if not result_path.exists():
                raise KernelError("the checkpoint step ended without writing its result")
            said = json.loads(result_path.read_text())
            layout = _layout(plan, records, request)
            fs = fs_info(root).to_dict()
        finally:
            _remove(root, plan)
        values = self.values(plan, said)
        record = self.record(ctx, values, started, finished, fs=fs, layout=layout,
                             nodes=sorted({r["host"] for r in said["ranks"]}),
                             checkpoints={"saves": _per_checkpoint(said, "saves"),
                                          "restores": _per_checkpoint(said, "restores"),
                                          "shard_bytes": list(plan.shard_bytes), "files": plan.files(),
                                          "ranks": _where(plan, said),
                                          "cache": said.get("cache") or {}},
                             mpi_library=said.get("mpi_library"), line=_line(values, said.get("cache") or {}))
        cache = (said.get("cache") or {}).get("cache")
        if cache:
            record = type(record)(record.point_key, {"cache": cache}, record.fields)
        return Measured(record, env)

    def values(self, plan: CheckpointPlan, said: dict[str, Any]) -> dict[str, float]:
        """The point's metrics (see :attr:`metrics`) from what the step's ranks said."""
        ranks = said["ranks"]
        out: dict[str, float] = {"checkpoints": float(plan.count), "checkpoint_bytes": float(plan.checkpoint_bytes()),
                                 "files": float(len(plan.files()))}
        out.update(_phase_metrics("write", "written", [r["saves"] for r in ranks]))
        if plan.restore:
            out.update(_phase_metrics("read", "read", [r["restores"] for r in ranks]))
            resident = (said.get("cache") or {}).get("resident")
            out["restore_resident_fraction"] = float("nan") if resident is None else float(resident)
            out["write_to_read_s"] = float(said.get("write_to_read_s") or float("nan"))
        return out


def _where(plan: CheckpointPlan, said: dict[str, Any]) -> list[dict[str, Any]]:
    """Each rank's host, and whose shard it restored, written on which host (a shifted restore across nodes)."""
    host = {r["rank"]: r["host"] for r in said["ranks"]}
    return [{"rank": r, "host": host[r], **({"restored": plan.source(r), "written_on": host[plan.source(r)]}
                                           if plan.restore else {})} for r in sorted(host)]


def _line(values: dict[str, float], cache: dict[str, Any]) -> str:
    """The point's line in the sweep's output: ``write 812.3 MiB/s (fsync 0.41 s), restore 1020.4 MiB/s, 2.0 GiB
    written, cache cold (verified)``."""
    out = f"write {values['write_bandwidth_mib_s']:.1f} MiB/s (fsync {values['fsync_time_s']:.2f} s)"
    if "read_bandwidth_mib_s" in values:
        out += f", restore {values['read_bandwidth_mib_s']:.1f} MiB/s"
    out += f", {format_size(values['bytes_written'])} written"
    if cache.get("cache") == "cold":
        out += ", caches emptied (verified)"
    elif cache.get("cache"):
        out += f", caches not verified empty ({cache.get('note') or 'unknown'})"
        out += ("; the checkpoints exceed 3x a node's memory (MLPerf's rule)" if cache.get("over_3x_memory")
                else "; nor do the checkpoints exceed 3x a node's memory (MLPerf's rule): the restore may be cached")
    late = values.get("write_to_read_s", 0.0)
    if late == late and late > MLPERF_READ_WITHIN_S:
        out += f", restore started {late:.0f} s after the save (MLPerf: within {MLPERF_READ_WITHIN_S:.0f} s)"
    return out


def _fresh(root: Path, plan: CheckpointPlan) -> None:
    """An empty ``root`` for the point's checkpoints: what an earlier run of the point left (its files, in a
    directory marked as ddlio's) is removed; a directory ddlio did not make, or one holding files ddlio did not
    write, is refused, never emptied."""
    if root.exists():
        if not (root / MARKER).exists():
            raise KernelError(f"{root} exists and was not made by ddlio (no {MARKER} in it): move it away")
        left = _remove_own(root, plan)
        if left:
            raise KernelError(f"{root} holds files ddlio did not write ({', '.join(left[:3])}"
                              f"{', ...' if len(left) > 3 else ''}): move them away")
    root.mkdir(parents=True)
    (root / MARKER).write_text("ddlio checkpoints of one point; removed once measured\n")


def _remove(root: Path, plan: CheckpointPlan) -> None:
    """Remove the point's checkpoints once measured: only the files the plan names in its ``ckpt-<k>``
    directories, the marker, and the directories left empty (a file someone else put there stays)."""
    if (root / MARKER).exists():
        _remove_own(root, plan)
        with contextlib.suppress(OSError):
            root.parent.rmdir()  # checkpoints/ itself, when no other point's are left in it


def _remove_own(root: Path, plan: CheckpointPlan) -> list[str]:
    """Unlink the files ddlio writes under ``root`` (each ``ckpt-<k>/`` directory's plan files, the marker) and
    remove the directories left empty: the names of what is left (not ddlio's), ``root`` itself gone if none."""
    own = set(plan.files())
    for d in sorted(root.glob("ckpt-*")):
        if d.is_dir() and not d.is_symlink() and d.name[5:].isdigit():
            for name in own:
                with contextlib.suppress(FileNotFoundError):
                    (d / name).unlink()
            with contextlib.suppress(OSError):
                d.rmdir()
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name != MARKER and not p.is_dir())
    left = left or sorted(str(p.relative_to(root)) for p in root.iterdir() if p.name != MARKER)  # empty folders
    if not left:
        (root / MARKER).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            root.rmdir()
    return left


def _layout(plan: CheckpointPlan, records: list[Any], request: Layout) -> dict[str, Any]:
    """The layout stored with the point: what the first checkpoint directory got, and what every file of every
    checkpoint got (``ckpt-<k>/<name>``), read back."""
    files: dict[str, Any] = {}
    first = None
    for k, rec in enumerate(records):
        rec = read_layout(rec, [plan.directory(k) / name for name in plan.files()])
        first = first or rec
        files.update({f"ckpt-{k}/{name}": got for name, got in rec.files.items()})
    out = first.to_dict() if first is not None else {"applicable": False}
    out["files"] = files
    out["requested"] = request.requested()
    return out
