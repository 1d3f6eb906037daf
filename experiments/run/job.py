"""The job side: :func:`run_point` runs *inside* the job, on the first node: ensure the dataset (generation as an
MPI step, :func:`generation_runner`), read back its layout and file system, run the kernel as an MPI step
(:func:`step_runner`), and return the point's record (:class:`~ddlio.records.ResultRecord`, or
:class:`~ddlio.records.FailureRecord` when the point failed), also written to the point's run folder."""

from __future__ import annotations

import contextlib
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddlio import env as envinfo
from ddlio.errors import DdlioError, LaunchError, StartTimeoutError, TimeLimitError
from ddlio.records import FailureRecord, Record, ResultRecord
from ddlio.runpaths import RunPaths
from experiments.config import PointSpec
from experiments.dataset import (
    DatasetInfo,
    DatasetPlan,
    ensure_dataset,
    exclusive,
    generate_here,
    invalidate_dataset,
    write_json_atomic,
)
from experiments.executors import executor_for
from experiments.run.mpirun import failure_cause, headline, launch_argv, run_step
from lustre import Layout
from lustre.fs import fs_info

Step = Callable[[str, list[str], int, str], None]


def step_runner(spec: PointSpec, run_dir: Path, deadline: float | None = None) -> Step:
    """Run MPI steps of a point (``step(module, args, ranks, name)``); every step gets what is left of the point's
    time limit (``deadline``, on the ``time.monotonic`` clock; default: the whole ``cluster.timeout_min`` from
    now)."""
    limit_s = float(spec.cluster.timeout_min) * 60
    deadline = time.monotonic() + limit_s if deadline is None else deadline
    env = {str(k): str(v) for k, v in spec.cluster.env.items()}
    # every rank is through MPI start-up within a second or two; a start that takes hang_timeout_s has hung
    start_s = float(spec.cluster.hang_timeout_s)

    def step(module: str, args: list[str], ranks: int, name: str) -> None:
        nodes = min(spec.nodes, ranks)
        argv = launch_argv(spec.cluster.launch, ranks, nodes, -(-ranks // nodes), module, args)
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeLimitError(f"time limit reached before the {name} step: the point's cluster.timeout_min="
                                 f"{spec.cluster.timeout_min} ({limit_s:.1f} s) ran out; raise cluster.timeout_min")
        try:
            res = _start_twice(argv, deadline, env, RunPaths(run_dir), name, start_s)
        except TimeLimitError as e:
            raise TimeLimitError(
                f"time limit reached: the point's cluster.timeout_min={spec.cluster.timeout_min} ({limit_s:.1f} s) "
                f"ran out in the {name} step, which was killed; raise cluster.timeout_min\n{e}") from None
        if res.returncode != 0:
            said = headline(res.stderr_tail)
            if res.cause:
                first = f"{name} step failed: {res.cause} (exit code {res.returncode})"
                first += f"; {said}" if said != "(no output)" and res.cause not in said else ""
            else:
                first = f"{name} step failed (exit code {res.returncode}): {said}"
            raise LaunchError(f"{first}\ncommand: {' '.join(argv)}\n{res.stderr_tail}")

    return step


def _start_twice(argv: list[str], deadline: float, env: dict[str, str], paths: RunPaths, name: str,
                 start_s: float) -> Any:
    """Run the step; a step whose ranks hang in MPI start-up (``start_s`` seconds) is started once more."""
    left = deadline - time.monotonic()
    for attempt in (1, 2):
        try:
            return run_step(argv, left, env=env, logs=paths.logs(name), started=paths.started(name),
                            start_timeout_s=start_s)
        except StartTimeoutError as e:
            left = deadline - time.monotonic()
            if attempt == 2 or left <= start_s:
                raise LaunchError(f"{name} step failed: {e}\nstarted twice; the ranks never all got through MPI "
                                  "start-up (check cluster.launch and the MPI's process manager)") from None
            print(f"ddlio: {name} step: {str(e).splitlines()[0]}; killed and started once more",
                  file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def generation_runner(spec: PointSpec, run_dir: Path, deadline: float | None = None) -> Callable[[str, int], None]:
    """How a point's dataset is generated (``run(plan_json_path, ranks)``, what :func:`ensure_dataset` calls):
    with several ranks, ``python -m experiments.dataset`` as an MPI step with the point's launch line; with one,
    in this process (the job's, on the node the step would use), which saves an MPI program's start (~0.4 s here,
    more than writing 256 MiB takes). Failures read as the step's would (``generate step failed: ...``)."""
    step = step_runner(spec, run_dir, deadline)
    env = {str(k): str(v) for k, v in spec.cluster.env.items()}

    def run(plan_path: str, ranks: int) -> None:
        if ranks > 1:
            step("experiments.dataset", [plan_path], ranks, "generate")
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeLimitError(f"time limit reached before the generate step: the point's cluster.timeout_min="
                                 f"{spec.cluster.timeout_min} ran out; raise cluster.timeout_min")
        try:
            generate_here(plan_path, env)
        except Exception as e:
            said = f"{type(e).__name__}: {e}"
            cause = failure_cause(said)
            first = f"generate step failed: {cause}; {said}" if cause else f"generate step failed: {said}"
            raise LaunchError(f"{first}\n(generated in the job's process, one rank)") from e

    return run


def failure_record(point: dict[str, Any], error: str, job_state: str = "FAILED", run_dir: str = "") -> dict[str, Any]:
    """The stored form of a point that could not be measured: its config and the error text."""
    return FailureRecord.of(point, error, job_state=job_state, run_dir=run_dir).to_dict()


def run_point(point: dict[str, Any], run_dir: str) -> Record:
    """Measure one point (runs inside the job). Never raises for a measurement problem: it returns, and writes,
    a failure record instead, so the driver and ``analysis ingest`` both see what went wrong."""
    rd = Path(run_dir)
    paths = RunPaths(rd)
    rd.mkdir(parents=True, exist_ok=True)
    for stale in paths.records:
        stale.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        result, plan, info = _measure(point, rd)
    except DdlioError as e:
        return _failed(paths, FailureRecord.of(point, f"{type(e).__name__}: {e}", run_dir=str(rd)))
    except Exception as e:  # an unexpected bug still must not lose the point's config and error
        return _failed(paths, FailureRecord.of(point, f"{type(e).__name__}: {e}\n{traceback.format_exc()}",
                                               run_dir=str(rd)))
    except KeyboardInterrupt:  # SIGINT: Ctrl-C in the driver's terminal, or the executor's own time limit
        return _failed(paths, FailureRecord.of(point, "interrupted (SIGINT: Ctrl-C, or the executor's time limit) "
                                               f"after {time.perf_counter() - t0:.1f} s; a rerun measures the point "
                                               "again", job_state="INTERRUPTED", run_dir=str(rd)))
    manifest = info.manifest
    record = result.with_facts(
        point=point,
        run_dir=str(rd),
        job_state="COMPLETED",
        env=envinfo.collect(hdf5=point.get("format") == "hdf5"),  # the HDF5 library's with HDF5 points
        fs=fs_info(plan.directory).to_dict(),
        layout=point_layout(manifest["layout"], spec_request(point)),
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
    write_json_atomic(paths.result, record.to_dict())
    return record


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


def _failed(paths: RunPaths, record: FailureRecord) -> FailureRecord:
    write_json_atomic(paths.failure, record.to_dict())
    return record


def _measure(point: dict[str, Any], rd: Path) -> tuple[ResultRecord, DatasetPlan, DatasetInfo]:
    """Ensure the point's dataset and run the kernel on it; the kernel's record, the plan and the dataset."""
    paths = RunPaths(rd)
    spec = PointSpec.from_dict(point)
    deadline = time.monotonic() + float(spec.cluster.timeout_min) * 60
    step = step_runner(spec, rd, deadline)
    plan = DatasetPlan.from_point(spec)
    info = ensure_dataset(
        plan, Layout(spec.layout.stripe_count, spec.layout.stripe_size, spec.layout.object_size, spec.layout.pool),
        generation_runner(spec, rd, deadline),
        spec.ranks,
    )
    for stale in (paths.kernel_result, paths.damaged):  # only this run's kernel may leave one
        stale.unlink(missing_ok=True)
    write_json_atomic(paths.kernel_spec, {"point": point, "plan": plan.to_dict(),
                                          "result_path": str(paths.kernel_result)})
    try:
        lock = executor_for(spec.cluster.executor).measurement_lock(spec)
        with exclusive(lock) if lock else contextlib.nullcontext():
            step("experiments.kernel", [str(paths.kernel_spec)], spec.ranks, "kernel")
    except LaunchError as e:
        if not paths.damaged.exists():
            raise
        moved = invalidate_dataset(plan, paths.damaged.read_text(errors="replace"))
        raise LaunchError(f"{e}\nthe dataset failed verification and was invalidated ({moved}): the next "
                          "run rebuilds it") from e
    return ResultRecord.from_dict(json.loads(paths.kernel_result.read_text())), plan, info
