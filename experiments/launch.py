"""Orchestration: run each point as a job (submitit), ingest as results arrive, never lose or repeat one.

Two halves:

- :func:`run_point` runs *inside* the job, on the first node: ensure the dataset (generation as an MPI step),
  read back its layout and file system, run the kernel as an MPI step, and return a plain result record (also
  written to the point's run folder as ``result.json``, or ``failure.json`` when the point failed).
- :func:`launch` runs in the driver (``sweep.py``): skip points the tracker already holds, submit the others,
  wait for each and hand its record to the tracker. It knows the store only through :class:`Tracker`.
"""

from __future__ import annotations

import json
import os
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from experiments.config import PointSpec
from experiments.dataset import DatasetPlan, ensure_dataset, write_json_atomic
from experiments.errors import DdlioError, LaunchError

RESULT = "result.json"
FAILURE = "failure.json"


class Tracker(Protocol):
    """What :func:`launch` needs from the results store."""

    def is_done(self, point_key: str) -> bool:
        """True when the point has a stored, completed measurement."""

    def record_submitted(self, point: dict[str, Any], job_id: str, run_dir: str) -> None:
        """A point has been handed to the scheduler."""

    def record(self, record: dict[str, Any]) -> None:
        """Store a finished point's record (``kind`` is ``ddlio.result`` or ``ddlio.failure``)."""


# --------------------------------------------------------------------------------------------- inside the job
def _step_runner(spec: PointSpec, run_dir: Path) -> Callable[[str, list[str], int, str], None]:
    from experiments.mpirun import headline, launch_argv, run_step

    timeout_s = float(spec.cluster["timeout_min"]) * 60
    env = {str(k): str(v) for k, v in (spec.cluster.get("env") or {}).items()}

    def step(module: str, args: list[str], ranks: int, name: str) -> None:
        nodes = min(spec.nodes, ranks)
        argv = launch_argv(spec.cluster["launch"], ranks, nodes, max(1, ranks // nodes), module, args)
        res = run_step(argv, timeout_s, env=env, log_prefix=str(run_dir / name))
        if res.returncode != 0:
            raise LaunchError(
                f"{name} step failed (exit code {res.returncode}): {headline(res.stderr_tail)}\n"
                f"command: {' '.join(argv)}\n{res.stderr_tail}"
            )

    return step


def failure_record(point: dict[str, Any], error: str, job_state: str = "FAILED", run_dir: str = "") -> dict[str, Any]:
    """The record of a point that could not be measured: its config and the error text."""
    return {
        "kind": "ddlio.failure",
        "point_key": point["point_key"],
        "point": point,
        "error": error.strip()[-4000:],
        "job_state": job_state,
        "run_dir": run_dir,
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def run_point(point: dict[str, Any], run_dir: str) -> dict[str, Any]:
    """Measure one point (runs inside the job). Never raises for a measurement problem: it returns, and writes,
    a failure record instead, so the driver and ``analysis ingest`` both see what went wrong."""
    from experiments import env as envinfo
    from lustre.fs import fs_info
    from lustre.layout import Layout

    rd = Path(run_dir)
    rd.mkdir(parents=True, exist_ok=True)
    for stale in (RESULT, FAILURE):
        (rd / stale).unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        spec = PointSpec.from_dict(point)
        step = _step_runner(spec, rd)
        plan = DatasetPlan.from_point(spec)
        info = ensure_dataset(
            plan,
            Layout(spec.stripe_count, spec.stripe_size),
            lambda plan_path, ranks: step("experiments.dataset", [plan_path], ranks, "generate"),
            spec.ranks,
        )
        kernel_spec = {"point": point, "plan": plan.to_dict(), "result_path": str(rd / "kernel-result.json")}
        write_json_atomic(rd / "kernel.json", kernel_spec)
        step("experiments.kernel", [str(rd / "kernel.json")], spec.ranks, "kernel")
        result = json.loads((rd / "kernel-result.json").read_text())
    except DdlioError as e:
        rec = failure_record(point, f"{type(e).__name__}: {e}", run_dir=str(rd))
        write_json_atomic(rd / FAILURE, rec)
        return rec
    except Exception as e:  # an unexpected bug still must not lose the point's config and error
        rec = failure_record(point, f"{type(e).__name__}: {e}\n{traceback.format_exc()}", run_dir=str(rd))
        write_json_atomic(rd / FAILURE, rec)
        return rec
    manifest = info.manifest
    result.update(
        point=point,
        run_dir=str(rd),
        job_state="COMPLETED",
        env=envinfo.collect(),
        fs=fs_info(plan.directory).to_dict(),
        layout=manifest["layout"],
        dataset={
            "directory": plan.directory,
            "files": len([f for f in manifest["files"] if f["samples"]]),
            "disk_bytes": manifest["disk_bytes"],
            "payload_bytes": manifest["payload_bytes"],
            "generated": info.generated,
            "generation_s": info.seconds,
        },
        point_seconds=time.perf_counter() - t0,
    )
    write_json_atomic(rd / RESULT, result)
    return result


# ----------------------------------------------------------------------------------------------- the driver
@dataclass
class SweepReport:
    """What one call of :func:`launch` did."""

    total: int
    skipped: int = 0
    completed: int = 0
    failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)


def run_dir_for(spec: PointSpec) -> Path:
    return Path(spec.data_root) / "runs" / spec.point_key


def launch(
    points: Sequence[PointSpec],
    tracker: Tracker,
    force: bool = False,
    echo: Callable[[str], None] = print,
) -> SweepReport:
    """Measure every point the tracker does not hold yet (all of them with ``force``), one job at a time on the
    local executor, recording each result or failure as soon as it is known."""
    import submitit

    todo = [p for p in points if force or p.force or not tracker.is_done(p.point_key)]
    report = SweepReport(total=len(points), skipped=len(points) - len(todo))
    if report.skipped:
        echo(f"{report.skipped} of {len(points)} points already measured: skipped (force=true re-measures)")
    t_start = time.perf_counter()
    for n, spec in enumerate(todo, 1):
        rd = run_dir_for(spec)
        rd.mkdir(parents=True, exist_ok=True)
        point = spec.to_dict()
        executor = submitit.LocalExecutor(folder=rd / "job")
        executor.update_parameters(timeout_min=float(spec.cluster["timeout_min"]))
        t0 = time.perf_counter()
        job = executor.submit(run_point, point, str(rd))
        tracker.record_submitted(point, str(job.job_id), str(rd))
        try:
            while not job.done():  # submitit's own wait polls once a second; a local job is cheap to poll
                time.sleep(0.05)
            record = job.result()
        except Exception as e:  # the job itself died (killed, timed out): still record the point
            state = job.state if hasattr(job, "state") else "FAILED"
            error = f"job {job.job_id} ended {state}: {e}"
            record = failure_record(point, error, job_state=str(state), run_dir=str(rd))
        tracker.record(record)
        dt = time.perf_counter() - t0
        prefix = f"[{n}/{len(todo)}] {spec.label}"
        if record["kind"] == "ddlio.result":
            report.completed += 1
            t = record["totals"]
            echo(f"{prefix}: {t['bandwidth_mib_s']:.1f} MiB/s, {t['iops']:.0f} IOPS, cache {t['cache']}  ({dt:.1f} s)")
        else:
            report.failed += 1
            first = record["error"].strip().splitlines()[0] if record["error"].strip() else "unknown error"
            report.failures.append((spec.point_key, first))
            echo(f"{prefix}: FAILED: {first}  ({dt:.1f} s)")
    if todo:
        echo(
            f"done: {report.completed} measured, {report.failed} failed, {report.skipped} skipped "
            f"in {time.perf_counter() - t_start:.1f} s"
        )
    return report


def new_sweep_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def load_run_records(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """Every result or failure record found below ``directory`` (for ``analysis ingest``)."""
    out = []
    for name in (RESULT, FAILURE):
        for p in sorted(Path(directory).rglob(name)):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                continue
    return out
