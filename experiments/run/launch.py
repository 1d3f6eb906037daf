"""Orchestration: run each point as a job (submitit), ingest as results arrive, never lose or repeat one.

Two halves:

- :func:`run_point` runs *inside* the job, on the first node: ensure the dataset (generation as an MPI step),
  read back its layout and file system, run the kernel as an MPI step, and return a plain result record (also
  written to the point's run folder as its result, or failure record when the point failed:
  :class:`~ddlio.runpaths.RunPaths` names every file of a run folder).
- :func:`launch` runs in the driver (``sweep.py``): skip points the tracker already holds, submit the others,
  wait for each and hand its record to the tracker. It knows the store only through :class:`Tracker`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ddlio.env import PROJECT_DIR
from ddlio.errors import DdlioError, LaunchError
from ddlio.runpaths import RECORDS, RunPaths, local_measurement_lock, runs_dir, slurm_dir
from experiments.config import PointSpec
from experiments.dataset import DatasetPlan, ensure_dataset, write_json_atomic
from experiments.executors.slurm import NEVER, TERMINAL, VANISHED, WAITING, JobWatcher, fmt_duration, reason_kind
from experiments.run.lifecycle import LIVE, Action, Event, Life, State, scheduler_event, stored_state


class Tracker(Protocol):
    """What :func:`launch` needs from the results store."""

    #: a short id of the store: run folders live under ``data_root/runs/<store_id>/`` (see :func:`run_dir_for`)
    store_id: str

    def lookup(self, point_key: str) -> dict[str, Any] | None:
        """The stored state of a point (``status``: claimed, submitted, completed, failed; ``job_id``, ``run_dir``,
        ``pending``, ``attempts``, ``finished_utc``, ``error``, the claim's ``claim_token``, ``claim_host``,
        ``claim_pid``, ``claim_utc``), or None."""

    def claim(self, point: dict[str, Any], token: str, host: str, pid: int, takeover: str | None = None) -> bool:
        """Atomically take the point for driver ``token`` (or from the dead driver ``takeover``); True if taken."""

    def heartbeat(self, token: str) -> None:
        """Driver ``token`` is alive: refresh its claims."""

    def release(self, token: str, point_key: str | None = None) -> None:
        """Driver ``token`` lets go of one point (of all its points without ``point_key``)."""

    def record_submitted(self, point: dict[str, Any], job_id: str, run_dir: str) -> None:
        """A point has been handed to the scheduler."""

    def record(self, record: dict[str, Any]) -> bool:
        """Store a finished point's record (``kind`` is ``ddlio.result`` or ``ddlio.failure``)."""


# --------------------------------------------------------------------------------------------- inside the job
def _step_runner(spec: PointSpec, run_dir: Path, deadline: float | None = None
                 ) -> Callable[[str, list[str], int, str], None]:
    """Run MPI steps of a point; every step gets what is left of the point's time limit (``deadline``, on the
    ``time.monotonic`` clock; default: the whole ``cluster.timeout_min`` from now)."""
    from ddlio.errors import StartTimeoutError, TimeLimitError
    from experiments.run.mpirun import headline, launch_argv, run_step

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
        paths = RunPaths(run_dir)
        try:
            for attempt in (1, 2):  # a step whose ranks hang in MPI start-up is started once more
                try:
                    res = run_step(argv, left, env=env, logs=paths.logs(name), started=paths.started(name),
                                   start_timeout_s=start_s)
                    break
                except StartTimeoutError as e:
                    left = deadline - time.monotonic()
                    if attempt == 2 or left <= start_s:
                        raise LaunchError(f"{name} step failed: {e}\nstarted twice; the ranks never all got "
                                          "through MPI start-up (check cluster.launch and the MPI's process "
                                          "manager)") from None
                    print(f"ddlio: {name} step: {str(e).splitlines()[0]}; killed and started once more",
                          file=sys.stderr, flush=True)
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


def generation_runner(spec: PointSpec, run_dir: Path, deadline: float | None = None) -> Callable[[str, int], None]:
    """How a point's dataset is generated (``run(plan_json_path, ranks)``, what :func:`ensure_dataset` calls):
    with several ranks, ``python -m experiments.dataset`` as an MPI step with the point's launch line; with one,
    in this process (the job's, on the node the step would use), which saves an MPI program's start (~0.4 s here,
    more than writing 256 MiB takes). Failures read as the step's would (``generate step failed: ...``)."""
    from ddlio.errors import TimeLimitError
    from experiments.run.mpirun import failure_cause

    step = _step_runner(spec, run_dir, deadline)
    env = {str(k): str(v) for k, v in spec.cluster.env.items()}

    def run(plan_path: str, ranks: int) -> None:
        if ranks > 1:
            step("experiments.dataset", [plan_path], ranks, "generate")
            return
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeLimitError(f"time limit reached before the generate step: the point's cluster.timeout_min="
                                 f"{spec.cluster.timeout_min} ran out; raise cluster.timeout_min")
        from experiments.dataset import generate_here

        try:
            generate_here(plan_path, env)
        except Exception as e:
            said = f"{type(e).__name__}: {e}"
            cause = failure_cause(said)
            first = f"generate step failed: {cause}; {said}" if cause else f"generate step failed: {said}"
            raise LaunchError(f"{first}\n(generated in the job's process, one rank)") from e

    return run


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
    from ddlio import env as envinfo
    from lustre import Layout, fs_info

    rd = Path(run_dir)
    paths = RunPaths(rd)
    rd.mkdir(parents=True, exist_ok=True)
    for stale in paths.records:
        stale.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        spec = PointSpec.from_dict(point)
        deadline = time.monotonic() + float(spec.cluster.timeout_min) * 60
        step = _step_runner(spec, rd, deadline)
        plan = DatasetPlan.from_point(spec)
        info = ensure_dataset(
            plan, Layout(spec.layout.stripe_count, spec.layout.stripe_size), generation_runner(spec, rd, deadline),
            spec.ranks,
        )
        for stale in (paths.kernel_result, paths.damaged):  # only this run's kernel may leave one
            stale.unlink(missing_ok=True)
        kernel_spec = {"point": point, "plan": plan.to_dict(), "result_path": str(paths.kernel_result)}
        write_json_atomic(paths.kernel_spec, kernel_spec)
        try:
            if spec.cluster.executor == "local":  # one measurement at a time on this machine, across sweeps too
                from experiments.dataset import exclusive

                with exclusive(local_measurement_lock(spec.data_root)):
                    step("experiments.kernel", [str(paths.kernel_spec)], spec.ranks, "kernel")
            else:
                step("experiments.kernel", [str(paths.kernel_spec)], spec.ranks, "kernel")
        except LaunchError as e:
            if not paths.damaged.exists():
                raise
            from experiments.dataset import invalidate_dataset

            moved = invalidate_dataset(plan, paths.damaged.read_text(errors="replace"))
            raise LaunchError(f"{e}\nthe dataset failed verification and was invalidated ({moved}): the next "
                              "run rebuilds it") from e
        result = json.loads(paths.kernel_result.read_text())
    except DdlioError as e:
        rec = failure_record(point, f"{type(e).__name__}: {e}", run_dir=str(rd))
        write_json_atomic(paths.failure, rec)
        return rec
    except Exception as e:  # an unexpected bug still must not lose the point's config and error
        rec = failure_record(point, f"{type(e).__name__}: {e}\n{traceback.format_exc()}", run_dir=str(rd))
        write_json_atomic(paths.failure, rec)
        return rec
    except KeyboardInterrupt:  # SIGINT: Ctrl-C in the driver's terminal, or the executor's own time limit
        rec = failure_record(point, "interrupted (SIGINT: Ctrl-C, or the executor's time limit) after "
                             f"{time.perf_counter() - t0:.1f} s; a rerun measures the point again",
                             job_state="INTERRUPTED", run_dir=str(rd))
        write_json_atomic(paths.failure, rec)
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
    write_json_atomic(paths.result, result)
    return result


# ----------------------------------------------------------------------------------------------- the driver
LOCAL_POLL_S = 0.05
FILE_POLL_S = 0.5
#: how often the driver looks at a Slurm sweep's run folders and asks sacct (stat load on a parallel file system)
STATE_POLL_S = 2.0
#: default of cluster.vanish_after_s: a job that neither squeue nor sacct knows for this long (seconds) is gone
VANISH_S = 120.0
#: points per job array when Slurm's MaxArraySize cannot be read (its default is 1001)
MAX_ARRAY = 1000
#: points held by a site limit (sbatch refused them) are offered again at the latest after this many seconds,
#: and as soon as one of the sweep's jobs ends
HELD_RETRY_S = 30.0
#: after Slurm says a job ended, how long to wait for its result file to appear (shared file-system lag)
RESULT_GRACE_S = 10.0
#: how often a driver tells the store it is alive (refreshes its claims), in seconds
HEARTBEAT_S = 30.0
#: a claim held by a driver on another host that has not refreshed it for this long belongs to a dead driver
#: (on the same host the driver's PID tells at once), in seconds
CLAIM_STALE_S = 300.0
#: how often a driver waiting for points another driver holds looks at the store, in seconds (per 100 points)
FOLLOW_POLL_S = 0.5
#: submitit's own time limit for a local job comes this much after the point's (minutes): a backstop only
LOCAL_BACKSTOP_MIN = 1.0
#: after Ctrl-C, how long the driver waits for the local job to record that it was interrupted (seconds)
INTERRUPT_GRACE_S = 5.0


@dataclass
class SweepReport:
    """What one call of :func:`launch` did."""

    total: int
    skipped: int = 0
    not_retried: int = 0
    submitted: int = 0
    reattached: int = 0
    completed: int = 0
    failed: int = 0
    still_running: int = 0
    #: points another live driver was measuring, whose outcome this call waited for and reports as its own
    followed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    #: each point's last outcome in this call (point key -> completed | failed); the exit status follows it
    final: dict[str, str] = field(default_factory=dict)

    @property
    def failed_points(self) -> list[str]:
        """Points whose last outcome in this call is a failure (a LOST point measured again is not one)."""
        return [k for k, v in self.final.items() if v != "completed"]


@dataclass
class Pending:
    """A point whose job is queued or running."""

    spec: PointSpec
    job_id: str
    run_dir: Path
    ended_at: float | None = None  # when Slurm first reported a terminal state without a result file
    state: str = "PENDING"
    reason: str = ""  # Slurm's pending reason while the job waits (squeue %r)
    pending_since: float | None = None  # driver clock (s) when it was first seen waiting
    never_polls: int = 0  # consecutive polls that saw it pending for a reason only an administrator can clear


@dataclass
class Follow:
    """A point another live driver holds: wait for the outcome it stores."""

    spec: PointSpec
    token: str
    seen: tuple[Any, Any]  # (attempts, finished_utc) when first seen: an outcome is new when these changed


def run_dir_for(spec: PointSpec, store_id: str = "") -> Path:
    """The point's run folder (:meth:`RunPaths.of`)."""
    return RunPaths.of(spec.data_root, spec.point_key, store_id).root


def read_record(run_dir: Path) -> dict[str, Any] | None:
    """The result or failure record a job left in its run folder, if any."""
    for p in RunPaths(run_dir).records:
        try:
            return json.loads(p.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None  # being replaced, or a stale handle on a shared file system: look again later
    return None


def _tail_file(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def _lost_job_error(spec: PointSpec, job_id: str, state: str, run_dir: Path, detail: str = "") -> str:
    """Why a job left no result: its scheduler state, what ended it if any of its logs tells (a signal by name,
    no space left, the time limit ...), ``detail``, and the tails of whatever it wrote."""
    from experiments.run.mpirun import failure_cause, read_log

    info = _job_info(run_dir)
    paths = RunPaths(run_dir)
    folder = Path(info.get("folder", paths.job_folder))
    logs = sorted(folder.glob(f"{job_id}_*_log.err")) + sorted(folder.glob(f"{job_id}_*_log.out"))
    logs += [log for step in ("kernel", "generate") for log in reversed(paths.logs(step))]
    texts = {log: read_log(log) for log in logs}
    cause = failure_cause(detail, *texts.values())
    parts = [f"job {job_id} ended {state} without a result" + (f": {cause}" if cause else "")]
    if detail:
        parts.append(detail.strip())
    for log, text in texts.items():
        tail = "\n".join(text.strip().splitlines()[-20:])
        if tail and (log.parent == folder or log.suffix == ".err"):
            parts.append(f"--- {log.name}\n{tail}")
    return "\n".join(parts)


def _with_slurm_state(record: dict[str, Any], job_id: str, state: str) -> dict[str, Any]:
    """A failure the job recorded itself, with Slurm's account of the job when Slurm ended it (cancelled, timed
    out, preempted ...): the driver inside the job only saw its MPI step die."""
    from experiments.executors.slurm import TERMINAL

    if record["kind"] != "ddlio.failure" or state not in TERMINAL or state == "COMPLETED":
        return record
    return {**record, "job_state": state, "error": f"job {job_id} ended {state}: {record['error']}"}


def _job_info(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads(RunPaths(run_dir).job.read_text())
    except (OSError, ValueError):
        return {}


def _archive_outcome(rd: Path) -> None:
    """Move a previous attempt's outcome out of the way (into ``attempts/NNN/``), so that any result file found
    later is this submission's and nothing an earlier job wrote is ever deleted."""
    paths = RunPaths(rd)
    old = paths.outcome()
    if not old:
        return
    attempts = paths.attempts
    n = len(list(attempts.glob("*"))) if attempts.exists() else 0
    dest = attempts / f"{n:03d}"
    dest.mkdir(parents=True, exist_ok=True)
    for p in old:
        os.replace(p, dest / p.name)


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) with the folder itself readable by its owner only (mode 0700): run
    folders hold job scripts, configs and logs, which are nobody else's business. An existing folder of ours that
    others could enter is closed; the datasets beside it keep the umask's modes."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def _prepare_run_dir(spec: PointSpec, store_id: str = "") -> Path:
    """Archive the point's previous outcome and write the standalone reproducer."""
    from experiments.executors.slurm import render_sbatch, site_options

    paths = RunPaths.of(spec.data_root, spec.point_key, store_id)
    rd = paths.root
    private_dir(runs_dir(spec.data_root))
    rd.mkdir(parents=True, exist_ok=True)
    _archive_outcome(rd)
    c = spec.cluster
    paths.repro.write_text(render_sbatch(
        label=spec.label, run_dir=str(rd), nodes=spec.nodes, ppn=spec.ppn,
        time_min=max(1, int(-(-float(c.timeout_min) // 1))), launch=c.launch, python=sys.executable,
        project_dir=str(PROJECT_DIR), kernel_spec=str(paths.kernel_spec),
        env={str(k): str(v) for k, v in c.env.items()}, **site_options(c),
    ))
    return rd


def _note_submitted(driver: _Driver, spec: PointSpec, job_id: str, rd: Path, folder: Path, executor: str) -> None:
    """The scheduler accepted the point's job: note it in the run folder and the store (SUBMIT_OK)."""
    write_json_atomic(RunPaths(rd).job, {"job_id": job_id, "folder": str(folder), "executor": executor,
                                 "submitted_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    driver.tracker.record_submitted(spec.to_dict(), job_id, str(rd))
    if driver.state(spec) is State.HELD:  # it was held by a site limit: a slot freed
        driver.on(spec, Event.SLOT_FREE)
    driver.on(spec, Event.SUBMIT_OK)


class _Driver:
    """Bookkeeping shared by the local and Slurm paths: report, echo, storing each outcome once, and this
    driver's claims in the store (one token per driver process)."""

    def __init__(self, tracker: Tracker, report: SweepReport, echo: Callable[[str], None]) -> None:
        import socket

        self.tracker, self.report, self.echo = tracker, report, echo
        self.t0 = time.perf_counter()
        self.done = 0
        self.token, self.host, self.pid = uuid.uuid4().hex, socket.gethostname(), os.getpid()
        self.store_id = str(getattr(tracker, "store_id", "") or "")
        self.last_beat = time.monotonic()
        self.held_reason = ""  # the site limit that refused the held points (Slurm)
        self.live_at_refusal = 0  # jobs live when sbatch last refused: fewer means a slot may have freed
        self.lives: dict[str, Life] = {}

    # ------------------------------------------------------------------ the life cycle (experiments.run.lifecycle)
    def begin(self, spec: PointSpec, state: State) -> None:
        """Start following the point's life cycle from ``state`` (what the store holds for it)."""
        self.lives[spec.point_key] = Life(state)

    def on(self, spec: PointSpec, event: Event) -> Action:
        """Move the point by ``event`` in the life-cycle table; returns the action to do (an event the table does
        not allow in the point's state raises: a driver bug)."""
        return self.lives.setdefault(spec.point_key, Life(State.NEW)).on(event)

    def state(self, spec: PointSpec) -> State:
        return self.lives[spec.point_key].state if spec.point_key in self.lives else State.NEW

    def observe(self, spec: PointSpec, scheduler_state: str) -> None:
        """The scheduler's word on a live job (Slurm's state names) as a QUEUED / STARTED event; the seam through
        which the Slurm waiting code moves its points (an ended job's outcome goes through :meth:`finish`)."""
        event = scheduler_event(scheduler_state)
        if event is not None and self.state(spec) in LIVE:
            self.on(spec, event)

    def heartbeat(self) -> None:
        """Tell the store this driver is alive (at most every :data:`HEARTBEAT_S` seconds); call it while waiting."""
        if time.monotonic() - self.last_beat >= HEARTBEAT_S:
            self.last_beat = time.monotonic()
            self.tracker.heartbeat(self.token)

    def claim(self, spec: PointSpec, takeover: str | None = None) -> bool:
        return self.tracker.claim(spec.to_dict(), self.token, self.host, self.pid, takeover=takeover)

    def release(self, spec: PointSpec | None = None) -> None:
        self.tracker.release(self.token, spec.point_key if spec else None)

    def _line(self, spec: PointSpec) -> str:
        self.done += 1
        expected = self.report.total - self.report.skipped - self.report.not_retried
        return f"[{self.done}/{max(expected, self.done)}] {spec.label}"

    def finish(self, spec: PointSpec, record: dict[str, Any], seconds: float | None = None,
               keep: bool = False) -> None:
        """Store a point's outcome and report it; the claim is released unless ``keep`` (measured again next)."""
        self.on(spec, _outcome_event(record))  # -> STORE
        self.tracker.record(record)
        if not keep:
            self.release(spec)
        took = f"  ({seconds:.1f} s)" if seconds is not None else ""
        prefix = self._line(spec)
        if record["kind"] == "ddlio.result":
            self.report.completed += 1
            self.report.final[spec.point_key] = State.COMPLETED.value
            t = record["totals"]
            self.echo(f"{prefix}: {t['bandwidth_mib_s']:.1f} MiB/s, {t['iops']:.0f} IOPS, cache {t['cache']}{took}")
        else:
            self._failed(spec, prefix, record["error"], took)

    def adopt(self, spec: PointSpec, row: dict[str, Any]) -> None:
        """Report the outcome another driver stored for a point this one asked for, as this call's own."""
        self.report.followed += 1
        self.on(spec, Event.ADOPT_RESULT if row["status"] == "completed" else Event.ADOPT_FAILURE)  # -> REPORT
        prefix = self._line(spec)
        if row["status"] == "completed":
            self.report.completed += 1
            self.report.final[spec.point_key] = State.COMPLETED.value
            bw, iops = row.get("bandwidth_mib_s") or 0.0, row.get("iops") or 0.0
            self.echo(f"{prefix}: {bw:.1f} MiB/s, {iops:.0f} IOPS, cache {row.get('cache')} (measured by another "
                      "driver)")
        else:
            self._failed(spec, prefix, row.get("error") or "", " (measured by another driver)")

    def _failed(self, spec: PointSpec, prefix: str, error: str, took: str) -> None:
        self.report.failed += 1
        self.report.final[spec.point_key] = self.state(spec).value  # failed, or lost
        lines = error.strip().splitlines()
        first = lines[0] if lines else "unknown error"
        self.report.failures.append((spec.point_key, first))
        self.echo(f"{prefix}: FAILED: {first}{took}")


def _outcome_event(record: dict[str, Any]) -> Event:
    """RESULT, FAILURE (the job's own failure record), or GONE (the driver's record of a job that ended or vanished
    without leaving any)."""
    if record["kind"] == "ddlio.result":
        return Event.RESULT
    first = (record.get("error") or "").strip().split("\n", 1)[0]
    return Event.GONE if "without a result" in first else Event.FAILURE


def _process_alive(pid: int | None, since: Any) -> bool:
    """Whether process ``pid`` of this host runs and is the one that was alive at ``since`` (a naive UTC datetime):
    a PID recycled by a process started later is not it."""
    import datetime as dt

    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()  # type: ignore[arg-type]
        btime = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                     if ln.startswith("btime "))
    except (TypeError, ValueError, OSError, StopIteration):
        return False
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return False
    started = btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    if since is None:
        return True
    when = since.replace(tzinfo=dt.timezone.utc).timestamp() if isinstance(since, dt.datetime) else float(since)
    return started <= when + 2.0  # btime has a resolution of one second


def claim_alive(row: dict[str, Any]) -> bool:
    """Whether the driver holding a point's claim is alive: on this host its PID says so; on another host its
    claim must have been refreshed within :data:`CLAIM_STALE_S` seconds."""
    import datetime as dt
    import socket

    if not row.get("claim_token"):
        return False
    if row.get("claim_host") == socket.gethostname():
        return _process_alive(row.get("claim_pid"), row.get("claim_utc"))
    when = row.get("claim_utc")
    if when is None:
        return False
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    return (now - when).total_seconds() < CLAIM_STALE_S


def _take(spec: PointSpec, driver: _Driver) -> dict[str, Any] | None:
    """Claim the point for this driver, taking it over from a dead driver if need be. Returns None when the point
    is now this driver's, else the row of the live driver that holds it."""
    row: dict[str, Any] = {}
    for _ in range(10):  # each turn loses only to another driver that just took or released the point
        if driver.claim(spec):
            return None
        row = driver.tracker.lookup(spec.point_key) or {}
        holder = row.get("claim_token")
        if holder is None:
            continue
        if holder == driver.token:
            return None
        if claim_alive(row):
            return row
        if driver.claim(spec, takeover=holder):
            driver.echo(f"{spec.label}: taking over from a driver that is gone "
                        f"(host {row.get('claim_host')}, pid {row.get('claim_pid')})")
            return None
    return row


def _plan(points: Sequence[PointSpec], tracker: Tracker, force: bool, retry_failed: bool,
          report: SweepReport, driver: _Driver) -> tuple[list[PointSpec], list[Pending], list[Follow]]:
    """Sort the points by the life cycle (:mod:`experiments.run.lifecycle`): skip the measured; claim the others in
    the store (a point another live driver holds is followed, not measured); under the claim start from the state
    the store holds: harvest or re-attach to a job that went out, and measure what is new, failed or lost (or
    forced). Returns (to submit, to wait for, to follow)."""
    submit: list[PointSpec] = []
    attach: list[Pending] = []
    follow: list[Follow] = []
    slurm_ids: dict[str, tuple[PointSpec, str, Path, bool]] = {}

    def measure(spec: PointSpec) -> None:
        if driver.on(spec, Event.MEASURE) is Action.SUBMIT:
            submit.append(spec)

    for spec in points:
        first = tracker.lookup(spec.point_key)
        forced = force or spec.force
        if stored_state(first) is State.COMPLETED and not (first or {}).get("claim_token") and not forced:
            report.skipped += 1
            continue
        seen = (first.get("attempts"), first.get("finished_utc")) if first else (None, None)
        holder = _take(spec, driver)
        if holder is not None:
            driver.begin(spec, stored_state(holder))
            if driver.on(spec, Event.OTHER_DRIVER) is Action.FOLLOW:
                follow.append(Follow(spec, holder["claim_token"], seen))
            continue
        row = tracker.lookup(spec.point_key) or {}  # under this driver's claim from here on
        state = stored_state(row)
        driver.begin(spec, state)
        ended = state in (State.COMPLETED, State.FAILED, State.LOST)
        if ended and first is not None and (row.get("attempts"), row.get("finished_utc")) != seen:
            driver.release(spec)  # another driver measured it between our two looks: its outcome is ours
            driver.adopt(spec, row)
            continue
        rd = Path(row.get("run_dir") or run_dir_for(spec, driver.store_id))
        if state is State.SUBMITTED:
            # a job of an earlier driver went out and was not harvested: harvest it or re-attach, never resubmit
            info = _job_info(rd)
            retry = retry_failed and row.get("status") != "completed"
            record = None if info.get("executor") == "slurm" else read_record(rd)
            if info.get("executor") == "slurm":  # Slurm's word first: it may say why the job's own record exists
                slurm_ids[spec.point_key] = (spec, str(row.get("job_id")), rd, retry)
            elif record is not None:
                again = record["kind"] == "ddlio.failure" and retry
                driver.finish(spec, record, keep=again)
                if again:
                    measure(spec)
            elif info.get("executor") == "local" and _local_job_alive(row.get("job_id")):
                attach.append(Pending(spec, str(row.get("job_id")), rd, state="RUNNING"))
            else:  # a local job that died with its driver: it is lost; measure it again
                again = retry or forced
                driver.finish(spec, failure_record(spec.to_dict(), _lost_job_error(
                    spec, str(row.get("job_id")), "LOST", rd), job_state="LOST", run_dir=str(rd)), keep=again)
                if again:
                    measure(spec)
        elif state is State.NEW or forced:
            measure(spec)
        elif state is State.COMPLETED:
            driver.release(spec)
            report.skipped += 1
        else:  # failed or lost: a result may still have landed after the driver gave up on it
            record = read_record(rd)
            if record is not None and record["kind"] == "ddlio.result":
                driver.finish(spec, record)
            elif retry_failed:
                measure(spec)
            else:
                driver.release(spec)
                report.not_retried += 1
    if slurm_ids:
        from experiments.executors.slurm import TERMINAL, job_states

        states = job_states(jid for _, jid, _, _ in slurm_ids.values())
        for spec, jid, rd, retry in slurm_ids.values():
            job_state = states.get(jid, "UNKNOWN")
            record = read_record(rd)
            if job_state in TERMINAL or record is not None:
                record = _with_slurm_state(record, jid, job_state) if record else failure_record(
                    spec.to_dict(), _lost_job_error(spec, jid, job_state, rd), job_state=job_state, run_dir=str(rd))
                again = record["kind"] == "ddlio.failure" and retry
                driver.finish(spec, record, keep=again)
                if again:
                    measure(spec)
            else:
                driver.observe(spec, job_state)
                attach.append(Pending(spec, jid, rd, state=job_state))
    return submit, attach, follow


def _follow(follow: list[Follow], driver: _Driver) -> list[PointSpec]:
    """Wait for the points other live drivers hold and report the outcomes they store as this call's own.
    Returns the points to plan again: their driver died (take them over), or let go of them without an outcome
    (e.g. it submitted them with wait=false)."""
    if not follow:
        return []
    driver.echo(f"{len(follow)} point(s) are being measured by another driver: waiting for their outcome")
    replan: list[PointSpec] = []
    live = list(follow)
    while live:
        driver.heartbeat()
        for f in list(live):
            row = driver.tracker.lookup(f.spec.point_key) or {}
            holder = row.get("claim_token")
            if holder and holder != driver.token and claim_alive(row):
                f.token = holder  # still held (perhaps by a driver that took it over): wait on
                continue
            live.remove(f)
            if not holder and not row.get("pending") and row.get("status") in ("completed", "failed") \
                    and (row.get("attempts"), row.get("finished_utc")) != f.seen:
                driver.adopt(f.spec, row)
            else:
                replan.append(f.spec)
        if live:
            time.sleep(FOLLOW_POLL_S * max(1.0, len(live) / 100))
    return replan


def _local_job_alive(job_id: Any) -> bool:
    """Whether a local submitit job (its controller's PID) still runs: alive, not a zombie, and still submitit's
    controller (a recycled PID belongs to some other program)."""
    try:
        pid = int(job_id)
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (TypeError, ValueError, OSError):
        return False
    return "\nState:\tZ" not in status and b"submitit" in cmdline


def _run_local(specs: list[PointSpec], attach: list[Pending], driver: _Driver) -> None:
    """Locally, one point at a time: submit, wait, store; then the next."""
    import submitit

    for p in attach:  # a local job of an earlier driver still running: wait for its files
        while _local_job_alive(p.job_id) and read_record(p.run_dir) is None:
            driver.heartbeat()
            time.sleep(FILE_POLL_S)
        record = read_record(p.run_dir) or failure_record(
            p.spec.to_dict(), _lost_job_error(p.spec, p.job_id, "EXITED", p.run_dir), run_dir=str(p.run_dir))
        driver.finish(p.spec, record)
    for spec in specs:
        rd = _prepare_run_dir(spec, driver.store_id)
        folder = RunPaths(rd).job_folder
        # the point keeps its own time limit (run_point); submitit's, a little later, is only a backstop
        executor = submitit.LocalExecutor(folder=folder, max_num_timeout=0)
        executor.update_parameters(timeout_min=float(spec.cluster.timeout_min) + LOCAL_BACKSTOP_MIN)
        t0 = time.perf_counter()
        folder.mkdir(parents=True, exist_ok=True)
        with _output_to(RunPaths(rd).controller_log):  # submitit's controller writes its own tracebacks there
            job = executor.submit(run_point, spec.to_dict(), str(rd))
        _note_submitted(driver, spec, str(job.job_id), rd, folder, "local")
        driver.report.submitted += 1
        try:
            while not job.done():  # submitit's own wait polls once a second; a local job is cheap to poll
                driver.heartbeat()
                time.sleep(LOCAL_POLL_S)
            record = job.result()
        except KeyboardInterrupt:  # Ctrl-C: stop the job, store what it says of itself, then stop the sweep
            _interrupt_local(job, spec, rd, driver, t0)
            raise
        except Exception as e:  # the job itself died (killed, timed out): still record the point
            state = str(getattr(job, "state", "FAILED"))
            error = _lost_job_error(spec, str(job.job_id), state, rd, detail=f"{type(e).__name__}: {e}")
            record = failure_record(spec.to_dict(), error, job_state=state, run_dir=str(rd))
        driver.finish(spec, record, time.perf_counter() - t0)


@contextlib.contextmanager
def _output_to(path: Path) -> Iterator[None]:
    """Point this process's stdout and stderr file descriptors at ``path`` for the duration, so that a child
    started meanwhile (submitit's local controller) writes there and not into the user's terminal."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def _interrupt_local(job: Any, spec: PointSpec, rd: Path, driver: _Driver, t0: float) -> None:
    """After Ctrl-C: stop the local job (it may not have seen the signal), wait a little for the failure record
    it writes of itself, and store the point as interrupted, so a rerun measures it again."""
    with contextlib.suppress(Exception):
        job.cancel(check=False)
    end = time.monotonic() + INTERRUPT_GRACE_S
    record = None
    while record is None and time.monotonic() < end:
        record = read_record(rd)
        if record is None:
            time.sleep(LOCAL_POLL_S)
    if record is None or record["kind"] != "ddlio.failure":
        record = failure_record(spec.to_dict(), "interrupted (Ctrl-C) before the point finished; a rerun measures "
                                "it again", job_state="INTERRUPTED", run_dir=str(rd))
    driver.finish(spec, record, time.perf_counter() - t0)


class _Refused(Exception):
    """sbatch refused a submission for a site limit that clears as other jobs end."""


def _submit_chunk(group: list[PointSpec], driver: _Driver) -> list[Pending]:
    """Submit points with equal resources as one job (array); raise :class:`_Refused` for a site limit."""
    from experiments.executors.slurm import is_submit_limit, make_executor

    folder = slurm_dir(group[0].data_root)
    executor = make_executor(group, folder)
    dirs = [_prepare_run_dir(s, driver.store_id) for s in group]
    try:
        with executor.batch():
            jobs = [executor.submit(run_point, s.to_dict(), str(rd)) for s, rd in zip(group, dirs, strict=True)]
    except Exception as e:  # sbatch refused: a limit that clears with time, or say what Slurm said
        if is_submit_limit(str(e)):
            raise _Refused(str(e)) from e
        raise LaunchError(f"sbatch refused the job{'s' if len(group) > 1 else ''}: {e}") from e
    pending = []
    for spec, rd, job in zip(group, dirs, jobs, strict=True):
        _note_submitted(driver, spec, str(job.job_id), rd, folder, "slurm")
        pending.append(Pending(spec, str(job.job_id), rd))
    driver.report.submitted += len(group)
    ids = sorted({str(j.job_id).split("_")[0] for j in jobs})
    driver.echo(f"submitted {len(group)} point(s) as Slurm job {', '.join(ids)} "
                f"({group[0].nodes} node(s) x {group[0].ppn} rank(s))")
    return pending


def _submit_slurm(specs: list[PointSpec], driver: _Driver, max_array: int | None = None
                  ) -> tuple[list[Pending], list[PointSpec]]:
    """Submit every point with its own resources; points with equal resources go out as job arrays below Slurm's
    MaxArraySize. Returns (submitted, held): points sbatch refused for a limit that clears as jobs end (submit or
    job count per user, account or QOS) are held, to be submitted as slots free; a smaller array is tried first."""
    from experiments.executors.slurm import check_available, resources

    check_available()
    if max_array is None:
        from experiments.executors.slurm import ask_site

        site = ask_site()
        max_array = MAX_ARRAY if site.error or "MaxArraySize" not in site.config else site.max_array_size - 1
    max_array = max(1, max_array)
    groups: dict[tuple, list[PointSpec]] = {}
    for spec in specs:
        groups.setdefault(resources(spec), []).append(spec)
    pending: list[Pending] = []
    held: list[PointSpec] = []
    for g in groups.values():
        rest, size = list(g), max_array
        while rest:
            chunk = rest[:size]
            try:
                pending += _submit_chunk(chunk, driver)
            except _Refused as e:
                if size > 1:  # an array counts each task against the limit: try fewer at once
                    size = max(1, min(size, len(chunk)) // 2)
                    continue
                reason = _refusal_reason(str(e))
                if _queue_is_empty():  # no job of the user's is out: nothing can end and free a slot
                    for spec in rest:
                        driver.finish(spec, failure_record(spec.to_dict(), (
                            f"sbatch refused the job for {reason} although none of your jobs is queued or running: "
                            f"the limit is below one job and cannot clear by waiting; ask the site\n{e}"),
                            job_state="REFUSED"))
                    break
                held += rest
                driver.held_reason = reason
                break
            rest = rest[len(chunk):]
    return pending, held


def _queue_is_empty() -> bool:
    """Whether squeue lists no job of this user (False when it cannot tell)."""
    import getpass
    import subprocess

    try:
        p = subprocess.run(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i"], capture_output=True, text=True,
                           timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0 and not p.stdout.strip()


def _refusal_reason(message: str) -> str:
    """The limit's name in sbatch's refusal (``QOSMaxSubmitJobPerUserLimit``), or its words."""
    import re

    m = re.search(r"\b((?:QOS|Assoc)\w*Limit|MaxSubmit\w*|MaxJobs\w*)\b", message)
    if m:
        return m.group(1)
    m = re.search(r"Batch job submission failed: ([^\n]+)", message)
    return m.group(1).strip() if m else "a site limit"


def _wait_slurm(pending: list[Pending], driver: _Driver, held: Sequence[PointSpec] = ()) -> None:
    """Store each point as its job finishes; show progress with each pending reason and how long it waits;
    submit held points as slots free; cancel a point that can never start (``cluster.cancel_unrunnable``)."""
    from experiments.executors.slurm import cancel

    live = {p.spec.point_key: p for p in pending}
    held = list(held)
    vanish = min((p.spec.cluster.vanish_after_s for p in live.values()), default=VANISH_S)
    if held:
        vanish = min(vanish, *(s.cluster.vanish_after_s for s in held))
    watcher = JobWatcher(vanish_after_s=vanish)
    last_states = 0.0
    last_line = ""
    last_try = time.perf_counter()
    while live or held:
        driver.heartbeat()
        now = time.perf_counter()
        for key, p in list(live.items()):
            record = read_record(p.run_dir)
            if record is not None:
                driver.finish(p.spec, _with_slurm_state(record, p.job_id, p.state))
                del live[key]
        if held and (len(live) < driver.live_at_refusal or now - last_try >= HELD_RETRY_S):
            last_try = now
            more, held = _submit_slurm(held, driver, max_array=max(1, driver.live_at_refusal - len(live)) or 1)
            live.update((p.spec.point_key, p) for p in more)
            driver.live_at_refusal = len(live)
        if live and now - last_states >= STATE_POLL_S:
            last_states = now
            states = watcher.poll(p.job_id for p in live.values())
            for key, p in list(live.items()):
                js = states[p.job_id]
                if js.state != "UNKNOWN":
                    p.state, p.reason = js.state, js.reason if js.state in WAITING else ""
                    driver.observe(p.spec, p.state)  # queued / running in the life cycle
                if p.state in WAITING:
                    p.pending_since = p.pending_since or now
                    p.never_polls = p.never_polls + 1 if reason_kind(p.reason) == NEVER else 0
                    if p.never_polls >= 2 and p.spec.cluster.cancel_unrunnable:
                        cancel([p.job_id])
                        error = (f"job {p.job_id} was pending for {p.reason}, which only an administrator can clear "
                                 "(the request is above a limit of the partition, account or QOS): cancelled. "
                                 "cluster.cancel_unrunnable=false keeps such a job waiting")
                        driver.finish(p.spec, failure_record(p.spec.to_dict(), error, job_state="CANCELLED",
                                                             run_dir=str(p.run_dir)))
                        del live[key]
                        continue
                if p.state in TERMINAL or p.state == VANISHED:
                    p.ended_at = p.ended_at or now
                    if now - p.ended_at >= (RESULT_GRACE_S if p.state in ("COMPLETED", VANISHED) else 1.0):
                        record = read_record(p.run_dir) or failure_record(
                            p.spec.to_dict(), _lost_job_error(p.spec, p.job_id, p.state, p.run_dir),
                            job_state=p.state, run_dir=str(p.run_dir))
                        driver.finish(p.spec, record)
                        del live[key]
            line = _progress(live.values(), held, driver, now)
            if line != last_line:
                driver.echo(f"[{now - driver.t0:5.0f} s] {line}")
                last_line = line
        elif not live and held:
            line = _progress((), held, driver, now)
            if line != last_line:
                driver.echo(f"[{now - driver.t0:5.0f} s] {line}")
                last_line = line
        if live or held:
            time.sleep(STATE_POLL_S)


def _progress(live: Any, held: Sequence[PointSpec], driver: _Driver, now: float) -> str:
    """``2 running, 3 queued (2 JobArrayTaskLimit: waits, 1 min; 1 Priority: waits, <1 min), 1 held by a limit
    (QOSMaxSubmitJobPerUserLimit), 4 done, 0 failed``."""
    live = list(live)
    queued = [p for p in live if p.state in WAITING or p.state == "UNKNOWN"]
    by_reason: dict[str, list[float]] = {}
    for p in queued:
        by_reason.setdefault(p.reason or ("submitted" if p.state == "UNKNOWN" else p.state.lower()), []).append(
            now - (p.pending_since or now))
    parts = [f"{len(live) - len(queued)} running", f"{len(queued)} queued"]
    if by_reason:
        parts[-1] += " (" + "; ".join(
            f"{len(w)} {r}: {reason_kind(r) if r not in ('submitted', 'pending') else 'waits'}, {fmt_duration(max(w))}"
            for r, w in sorted(by_reason.items())) + ")"
    if held:
        parts.append(f"{len(held)} held by a limit ({driver.held_reason}): submitted as slots free")
    parts += [f"{driver.report.completed} done", f"{driver.report.failed} failed"]
    return ", ".join(parts)


def launch(
    points: Sequence[PointSpec],
    tracker: Tracker,
    force: bool = False,
    wait: bool = True,
    retry_failed: bool = True,
    echo: Callable[[str], None] = print,
) -> SweepReport:
    """Measure every point the tracker does not hold yet (all of them with ``force``), recording each result
    or failure as soon as it is known.

    Locally points run one at a time. On Slurm every point is a job with its own nodes × ppn (equal resources
    share a job array); with ``wait`` the driver stores each result as it lands, else it returns once all are
    submitted. Calling again with the same points harvests finished jobs, re-attaches to running ones and never
    submits a point twice; failed points are retried unless ``retry_failed`` is False.
    """
    report = SweepReport(total=len(points))
    driver = _Driver(tracker, report, echo)
    try:
        todo = list(points)
        while todo:  # a second round only for points another driver held and let go of, or died holding
            todo = _round(todo, force, retry_failed, wait, driver)
    finally:
        driver.release()  # jobs still out keep their pending mark: the next driver harvests or re-attaches
    if report.completed or report.failed:
        echo(f"done: {report.completed} measured, {report.failed} failed, {report.skipped} skipped "
             f"in {time.perf_counter() - driver.t0:.1f} s")
    return report


def _round(points: Sequence[PointSpec], force: bool, retry_failed: bool, wait: bool,
           driver: _Driver) -> list[PointSpec]:
    """Plan, measure and wait for ``points`` once; return those to plan again (see :func:`_follow`)."""
    report, echo = driver.report, driver.echo
    skipped, not_retried = report.skipped, report.not_retried
    submit, attach, follow = _plan(points, driver.tracker, force, retry_failed, report, driver)
    if report.skipped > skipped:
        echo(f"{report.skipped - skipped} of {len(points)} points already measured: skipped "
             "(force=true re-measures)")
    if report.not_retried > not_retried:
        echo(f"{report.not_retried - not_retried} failed point(s) not retried (retry_failed=false)")
    if attach:
        report.reattached += len(attach)
        echo(f"re-attached to {len(attach)} job(s) still queued or running")
    slurm = [s for s in submit if s.cluster.executor == "slurm"]
    local = [s for s in submit if s.cluster.executor != "slurm"]
    if local or any(p.spec.cluster.executor != "slurm" for p in attach):
        _run_local(local, [p for p in attach if p.spec.cluster.executor != "slurm"], driver)
    pending = [p for p in attach if p.spec.cluster.executor == "slurm"]
    held: list[PointSpec] = []
    if slurm:
        more, held = _submit_slurm(slurm, driver)
        pending += more
        driver.live_at_refusal = len(pending)
        for spec in held:
            driver.on(spec, Event.LIMITED)
        if held:
            echo(f"{len(held)} point(s) held by a site limit ({driver.held_reason}): they are submitted as the "
                 "sweep's jobs end and free slots")
    if (pending or held) and wait:
        try:
            _wait_slurm(pending, driver, held)
        except KeyboardInterrupt:
            echo("interrupted: the jobs go on; run the same command again to store their results")
            raise
    else:
        if pending:
            report.still_running += len(pending)
            echo(f"{len(pending)} job(s) queued or running: run the same command again (without wait=false) "
                 "to store their results")
        if held:
            echo(f"{len(held)} point(s) held by a site limit were not submitted: run the same command again to "
                 "submit them")
    if not wait and follow:
        report.still_running += len(follow)
        echo(f"{len(follow)} point(s) are being measured by another driver (not waited for: wait=false)")
        return []
    return _follow(follow, driver)


def dry_run(points: Sequence[PointSpec], echo: Callable[[str], None] = print, store_id: str = "") -> None:
    """Print what :func:`launch` would submit (points, resources, and for Slurm the whole job script sbatch would
    receive) and write nothing."""
    from experiments.executors.slurm import resources

    echo(f"dry run: {len(points)} point(s), nothing is submitted or written")
    groups: dict[tuple, list[PointSpec]] = {}
    for spec in points:
        groups.setdefault((*resources(spec), spec.cluster.executor), []).append(spec)
    for group in groups.values():
        first = group[0]
        c = first.cluster
        if c.executor == "slurm":
            kind = f"Slurm {'job array' if len(group) > 1 else 'job'} of {len(group)} point(s)"
        else:
            kind = f"{len(group)} local point(s), one at a time"
        echo(f"\n{kind}: {first.nodes} node(s) x {first.ppn} rank(s), time limit {c.timeout_min} min")
        if c.executor == "slurm":
            from experiments.executors.slurm import job_script

            echo("  the job script sbatch receives:")
            echo("\n".join("  | " + ln for ln in job_script(group, slurm_dir(first.data_root))
                           .splitlines() if ln))
        for spec in group:
            step = spec.cluster.launch.format(ranks=spec.ranks, nodes=spec.nodes, ppn=spec.ppn)
            echo(f"  - {spec.label}  key {spec.point_key}  [{' '.join(spec.overrides) or 'defaults'}]")
            kernel = RunPaths.of(spec.data_root, spec.point_key, store_id).kernel_spec
            echo(f"      kernel: {step} python -m experiments.kernel {kernel}")


def new_sweep_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def load_run_records(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """Every result or failure record found below ``directory`` (for ``analysis ingest``)."""
    out = []
    for name in RECORDS:
        for p in sorted(Path(directory).rglob(name)):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                continue
    return out
