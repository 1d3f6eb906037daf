"""The ``train`` kind, what every point measured before kinds existed: ensure the point's dataset, then the kernel's
ranks read it as a training loop does, epoch after epoch (the kernel step started ahead, waiting at a gate; the
dataset, when it must be made, written by those same ranks: one MPI start for both)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, ClassVar

from ddlio import env as envinfo
from ddlio import phase
from ddlio.errors import LaunchError
from ddlio.mlperf import is_mlperf, results_apart
from ddlio.records import ResultRecord
from experiments.config import PointSpec
from experiments.dataset import DatasetPlan, exclusive, invalidate_dataset, write_json_atomic
from experiments.executors import executor_for
from experiments.kinds.base import JobContext, Measured, Metric, WorkloadKind
from lustre import Layout
from lustre.fs import fs_info


class TrainKind(WorkloadKind):
    """Data loading as training does it: epochs of the point's reader over its dataset, measured as Darshan does
    (its record's totals and epochs are the store's wide row of read columns)."""

    name: ClassVar[str] = "train"
    metrics: ClassVar[tuple[Metric, ...]] = (
        Metric("bytes_read", "bytes", "bytes the read calls returned, all ranks and epochs"),
        Metric("bytes_planned", "bytes", "bytes the sampling plan asked for"),
        Metric("os_read_bytes", "bytes", "bytes the kernel's /proc counters saw read"),
        Metric("io_time_slowest_s", "s", "the slowest rank's time in read and metadata calls"),
        Metric("bandwidth_mib_s", "MiB/s", "bytes read / io_time_slowest_s (Darshan's agg_perf_by_slowest)"),
        Metric("iops", "ops/s", "read calls / io_time_slowest_s"),
        Metric("wall_time_s", "s", "the epochs' wall-clock time"),
        Metric("samples_per_s", "samples/s", "throughput"),
        Metric("au", "", "accelerator utilisation: compute time / wall time"),
        Metric("lat_p50_us", "us", "median read latency"),
        Metric("lat_p90_us", "us", "90th percentile read latency"),
        Metric("lat_p99_us", "us", "99th percentile read latency"),
        Metric("posix_reads", "", "read calls the ranks issued to the file system"),
        Metric("posix_bytes_read", "bytes", "bytes those calls returned"),
        Metric("posix_read_time_s", "s", "the slowest rank's time in those calls"),
        Metric("amplification", "", "posix_bytes_read / bytes_read"),
    )
    analyses: ClassVar[frozenset[str] | None] = None  # every figure, guideline scenario and diagnose finding

    def label(self, spec: PointSpec) -> str:
        """The paper's configuration label, e.g. ``hdf5/shared 1N-4P-1OST`` (no kind: the one points always had)."""
        return spec.label

    def run(self, ctx: JobContext) -> Measured:
        """Ensure the point's dataset and run the kernel on it: the kernel's record with the dataset's facts (file
        system, layout applied, files and bytes) and the environment (versions, host: taken while the kernel's ranks
        start, not after they measured)."""
        spec, paths = ctx.spec, ctx.paths
        phase.write(paths.root, "starting")  # what the screen and `analysis status` show (ddlio.phase)
        plan = DatasetPlan.from_point(spec)
        for stale in (paths.kernel_result, paths.damaged):  # only this run's kernel may leave one
            stale.unlink(missing_ok=True)
        write_json_atomic(paths.kernel_spec, {"point": ctx.point, "plan": plan.to_dict(),
                                              "result_path": str(paths.kernel_result)})
        # the kernel's ranks start up while the dataset is made ready, write it when it must be generated (one MPI
        # start for both), and wait at a gate for the job to have the dataset and the measurement lock
        kernel = ctx.steps.ahead("experiments.kernel", [str(paths.kernel_spec)], spec.ranks, "kernel")
        try:
            env = envinfo.collect(hdf5=False)  # the HDF5 library's version after the measurement (h5py: 12 MiB)
            info = ctx.ensure(
                plan, Layout(spec.layout.stripe_count, spec.layout.stripe_size, spec.layout.object_size,
                             spec.layout.pool),
                lambda plan_path, ranks: (phase.write(paths.root, "generating"), kernel.generate(plan_path))[1],
                spec.ranks,
            )
            if is_mlperf(spec.workload.name):  # MLPerf's rule: records, logs and store not on the storage under test
                env["results_apart"] = results_apart(paths.root, Path(plan.directory).parent, spec.db)
            lock = executor_for(spec.cluster.executor).measurement_lock(spec)
            with exclusive(lock) if lock else contextlib.nullcontext():
                kernel.go()
        except LaunchError as e:
            if not paths.damaged.exists():
                raise
            moved = invalidate_dataset(plan, paths.damaged.read_text(errors="replace"))
            raise LaunchError(f"{e}\nthe dataset failed verification and was invalidated ({moved}): the next "
                              "run rebuilds it") from e
        finally:
            kernel.kill()  # ended already, or started ahead of a dataset that failed
        manifest = info.manifest
        record = ResultRecord.from_dict(json.loads(paths.kernel_result.read_text())).with_facts(
            fs=fs_info(plan.directory).to_dict(),
            layout=point_layout(manifest["layout"], spec_request(ctx.point)),
            dataset={
                "directory": plan.directory,
                "files": len([f for f in manifest["files"] if f["samples"]]),
                "disk_bytes": manifest["disk_bytes"],
                "payload_bytes": manifest["payload_bytes"],
                "generated": info.generated,
                "generation_s": info.seconds,
            },
        )
        return Measured(record, env)


def spec_request(point: dict[str, Any]) -> dict[str, int]:
    """The stripe layout this point asked for (stored form: ``stripe_count``, ``stripe_size`` in bytes)."""
    return {"stripe_count": int(point["stripe_count"]), "stripe_size": int(point["stripe_size"])}


def point_layout(dataset_layout: dict[str, Any], requested: dict[str, int]) -> dict[str, Any]:
    """The layout record stored with a point: its dataset's (what was applied, per file) with ``requested`` the
    point's own request. Off a striping file system points that differ only in striping share one dataset,
    whose manifest holds the request of the point that generated it; that request stays as
    ``dataset_requested``."""
    out = dict(dataset_layout)
    if out.get("requested") != requested:
        out["dataset_requested"] = out.get("requested")
    out["requested"] = dict(requested)
    return out
