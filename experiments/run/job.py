"""The job side: :func:`run_point` runs *inside* the job, on the first node: it runs the point's workload kind
(:data:`experiments.registry.KINDS`, handed a :class:`~experiments.kinds.base.JobContext`: ``train`` starts the
kernel as an MPI step whose ranks wait at a gate (:meth:`StepRunner.ahead`), ensures the dataset meanwhile, opens the
gate under the measurement lock and reads back the layout and file system) and returns the point's record
(:class:`~ddlio.records.ResultRecord`, or :class:`~ddlio.records.FailureRecord` when the point failed), also written
to the point's run folder."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddlio import env as envinfo
from ddlio.errors import DdlioError, LaunchError, StartTimeoutError, TimeLimitError
from ddlio.mpistep import gate_env, phase_path
from ddlio.records import FailureRecord, Record
from ddlio.resources import resource_oserror, resource_sentence
from ddlio.runpaths import RunPaths
from ddlio.signals import Terminated, interrupt_name, terminate_as_interrupt
from experiments.config import PointSpec
from experiments.dataset import ensure_dataset, write_json_atomic
from experiments.kinds.base import JobContext, Measured
from experiments.registry import KINDS
from experiments.run.forked import ForkedGenerator
from experiments.run.mpirun import RunningStep, failure_cause, headline, launch_argv, run_step


class StepRunner:
    """Runs the MPI steps of a point: ``runner(module, args, ranks, name)`` runs one to its end;
    :meth:`ahead` starts one whose ranks wait at a gate (:class:`AheadStep`). Every step gets what is left of the
    point's time limit (``deadline``, on the ``time.monotonic`` clock)."""

    def __init__(self, spec: PointSpec, run_dir: Path, deadline: float) -> None:
        self.spec, self.paths, self.deadline = spec, RunPaths(run_dir), deadline
        self.limit_s = float(spec.cluster.timeout_min) * 60
        self.env = {str(k): str(v) for k, v in spec.cluster.env.items()}
        # every rank is through MPI start-up within a second or two; a start that takes hang_timeout_s has hung
        self.start_s = float(spec.cluster.hang_timeout_s)

    def argv(self, module: str, args: list[str], ranks: int) -> list[str]:
        """The step's command line: the point's launch line for ``ranks`` ranks, then ``python -m module args``."""
        nodes = min(self.spec.nodes, ranks)
        return launch_argv(self.spec.cluster.launch, ranks, nodes, -(-ranks // nodes), module, args)

    def left(self, name: str) -> float:
        """Seconds left of the point's time limit; TimeLimitError when none are."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeLimitError(f"time limit reached before the {name} step: the point's cluster.timeout_min="
                                 f"{self.spec.cluster.timeout_min} ({self.limit_s:.1f} s) ran out; raise "
                                 "cluster.timeout_min")
        return left

    def __call__(self, module: str, args: list[str], ranks: int, name: str) -> None:
        argv = self.argv(module, args, ranks)
        self.left(name)
        self.check(name, argv, lambda: _start_twice(argv, self.deadline, self.env, self.paths, name, self.start_s))

    def check(self, name: str, argv: list[str], run: Callable[[], Any]) -> None:
        """Run ``run()`` (a step to its end: a :class:`~experiments.run.mpirun.StepResult`) and raise what its end
        says as the point's error: TimeLimitError, or LaunchError with the ranks' own message."""
        try:
            res = run()
        except TimeLimitError as e:
            raise TimeLimitError(
                f"time limit reached: the point's cluster.timeout_min={self.spec.cluster.timeout_min} "
                f"({self.limit_s:.1f} s) ran out in the {name} step, which was killed; raise cluster.timeout_min\n"
                f"{e}") from None
        if res.returncode != 0:
            # where the ranks said nothing on stderr, the launcher may have on stdout (Hydra's "BAD TERMINATION")
            tail = res.stderr_tail if res.stderr_tail.strip() else res.stdout_tail
            said = headline(tail)
            if res.cause:
                first = f"{name} step failed: {res.cause} (exit code {res.returncode})"
                first += f"; {said}" if said != "(no output)" and res.cause not in said else ""
            else:
                first = f"{name} step failed (exit code {res.returncode}): {said}"
            raise LaunchError(f"{first}\ncommand: {' '.join(argv)}\n{tail}")

    def ahead(self, module: str, args: list[str], ranks: int, name: str) -> AheadStep:
        """Start a step whose ranks start up now and wait (asleep) at its gate until :meth:`AheadStep.go` (or
        write a dataset first: :meth:`AheadStep.generate`); the program must call
        ``ddlio.mpistep.wait_for_gate`` after ``announce_started`` (the kernel's :func:`~experiments.kernel.main.ready`
        does)."""
        argv = self.argv(module, args, ranks)
        left = self.left(name)
        gate = self.paths.gate(name)
        for stale in (gate, Path(phase_path(gate, "gen")), Path(phase_path(gate, "generated"))):
            stale.unlink(missing_ok=True)  # an earlier run's files say nothing about this one
        env = {**self.env, **gate_env(gate, time.time() + left)}
        return AheadStep(self, name, argv, env)


class AheadStep:
    """An MPI step started ahead (:meth:`StepRunner.ahead`): its ranks are starting, or waiting at the gate. A
    start that hangs (``cluster.hang_timeout_s``) is killed and made once more, as a step run at once is."""

    def __init__(self, runner: StepRunner, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.runner, self.name, self.argv, self.env = runner, name, argv, env
        self.gate = runner.paths.gate(name)
        self.attempts = 0
        self.running = self._start()

    def _start(self) -> RunningStep:
        r = self.runner
        self.attempts += 1
        return RunningStep(self.argv, r.deadline - time.monotonic(), env=self.env, logs=r.paths.logs(self.name),
                           started=r.paths.started(self.name), start_timeout_s=r.start_s)

    def _again(self, hung: str) -> None:
        """The ranks hung in start-up: start them once more (through the gates already open), or fail."""
        r = self.runner
        self.running.kill()
        if self.attempts >= 2 or r.deadline - time.monotonic() <= r.start_s:
            raise LaunchError(f"{self.name} step failed: {hung}\nstarted twice; the ranks never all got through MPI "
                              "start-up (check cluster.launch and the MPI's process manager)")
        print(f"ddlio: {self.name} step: {hung.splitlines()[0]}; killed and started once more", file=sys.stderr,
              flush=True)
        self.running = self._start()

    def _start_failed(self, res: Any) -> bool:
        """Whether the step ended in MPI start-up (:func:`died_in_start_up`) on its first start and was started
        once more (through the gates already open)."""
        r = self.runner
        why = died_in_start_up(res, r.paths.started(self.name))
        if why is None or self.attempts >= 2 or r.deadline - time.monotonic() <= r.start_s:
            return False
        print(f"ddlio: {self.name} step: {why}; started once more", file=sys.stderr, flush=True)
        self.running = self._start()
        return True

    def generate(self, plan_path: str) -> None:
        """Have this step's ranks write and check the dataset of ``plan_path`` before they read it (what the
        generator's MPI step does: ``experiments.dataset.generate_in``), and wait until rank 0 says it is done.
        One MPI start for both: a rank's failure reads as ``generate step failed: ...``."""
        r = self.runner
        done = phase_path(self.gate, "generated")
        write_json_atomic(phase_path(self.gate, "gen"), {"plan": plan_path}, durable=False)  # a note between processes
        started = r.paths.started(self.name)
        while not os.path.exists(done):
            if self.running.proc.poll() is not None:  # the ranks ended: their error is the generation's
                res = self.running.wait()  # it has ended: no time limit or start watchdog can strike
                if self._start_failed(res):
                    continue
                r.check("generate", self.argv, lambda ended=res: ended)
                raise LaunchError(f"generate step failed: the {self.name} step's ranks ended (exit code 0) without "
                                  "writing the dataset")
            waited = time.perf_counter() - self.running.t0
            if not started.exists() and waited >= r.start_s:
                self._again(f"the MPI step's ranks were not all through MPI start-up after {waited:.0f} s "
                            "(cluster.hang_timeout_s)")
            if time.monotonic() >= r.deadline:
                raise TimeLimitError(f"time limit reached: the point's cluster.timeout_min="
                                     f"{r.spec.cluster.timeout_min} ({r.limit_s:.1f} s) ran out while the "
                                     f"{self.name} step's ranks wrote the dataset; raise cluster.timeout_min")
            time.sleep(0.005)

    def go(self) -> None:
        """Open the gate and run the step to its end, with the errors of a step run at once."""
        r = self.runner
        write_json_atomic(self.gate, {"opened": time.time()})

        def run() -> Any:
            while True:
                try:
                    res = self.running.wait()
                except StartTimeoutError as e:
                    self._again(str(e))
                    continue
                if self._start_failed(res):
                    continue
                return res

        r.check(self.name, self.argv, run)

    def kill(self) -> None:
        """End the step (it was started ahead of something that failed)."""
        self.running.kill()


def step_runner(spec: PointSpec, run_dir: Path, deadline: float | None = None) -> StepRunner:
    """Run MPI steps of a point (``step(module, args, ranks, name)``, :class:`StepRunner`); every step gets what
    is left of the point's time limit (``deadline``, on the ``time.monotonic`` clock; default: the whole
    ``cluster.timeout_min`` from now)."""
    limit_s = float(spec.cluster.timeout_min) * 60
    return StepRunner(spec, run_dir, time.monotonic() + limit_s if deadline is None else deadline)


def died_in_start_up(res: Any, started: Path) -> str | None:
    """Why a step that failed before its ranks were all through MPI start-up (``started`` never made: see
    :func:`ddlio.mpistep.announce_started`) is worth one more start, or None. Such a step measured nothing, and
    MPI's start-up fails now and then for reasons of the moment (a PMI-2 exchange garbled under load, a UCX
    address assertion, seen on the Slurm test cluster with two multi-node steps starting at once); a failure
    that is the program's own fails the second start too, and reads as it always did."""
    if res.returncode == 0 or started.exists():
        return None
    return f"the ranks ended (exit code {res.returncode}) before all were through MPI start-up"


def _start_twice(argv: list[str], deadline: float, env: dict[str, str], paths: RunPaths, name: str,
                 start_s: float) -> Any:
    """Run the step; a step whose ranks hang in MPI start-up (``start_s`` seconds) is started once more."""
    left = deadline - time.monotonic()
    for attempt in (1, 2):
        try:
            res = run_step(argv, left, env=env, logs=paths.logs(name), started=paths.started(name),
                           start_timeout_s=start_s)
            left = deadline - time.monotonic()
            why = died_in_start_up(res, paths.started(name)) if attempt == 1 and left > start_s else None
            if why is None:
                return res
            print(f"ddlio: {name} step: {why}; started once more", file=sys.stderr, flush=True)
        except StartTimeoutError as e:
            left = deadline - time.monotonic()
            if attempt == 2 or left <= start_s:
                raise LaunchError(f"{name} step failed: {e}\nstarted twice; the ranks never all got through MPI "
                                  "start-up (check cluster.launch and the MPI's process manager)") from None
            print(f"ddlio: {name} step: {str(e).splitlines()[0]}; killed and started once more",
                  file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


class GenerationRunner:
    """A point's dataset generated on its own, not by the kernel's ranks (a point's job has them write it:
    :meth:`AheadStep.generate`): ``run(plan_json_path, ranks)``, what :func:`ensure_dataset` calls. With several
    ranks, ``python -m experiments.dataset`` as an MPI step with the point's launch line; with one, a child forked
    from this process, which saves an MPI program's start: forked when the runner is made, when the point's dataset
    is one rank's, so that it loads numpy and the format's library while the caller gets to generation, as the
    kernel's ranks start ahead (:class:`~experiments.run.forked.ForkedGenerator`); given the plan, it forks the
    writers, one per usable core (one per two for one file: :func:`~experiments.dataset.writers.writer_count`).
    Failures read as the step's would (``generate step failed: ...``). ``bench/generate_vs_fio.py`` times
    generation with it, from :meth:`ready`."""

    def __init__(self, spec: PointSpec, run_dir: Path, deadline: float | None = None) -> None:
        self._step = step_runner(spec, run_dir, deadline)
        self._spec, self._deadline = spec, deadline
        self._env = {str(k): str(v) for k, v in spec.cluster.env.items()}
        one = max(1, min(spec.ranks, spec.num_files)) == 1
        self._ahead: ForkedGenerator | None = ForkedGenerator(spec.format.name, self._env) if one else None

    def ready(self, timeout: float = 60.0) -> float:
        """Wait until the writer forked ahead has loaded its libraries (at most ``timeout`` seconds); the CPU
        seconds its start took (0.0 with none forked: a several-rank point's MPI step starts when called)."""
        return self._ahead.ready(timeout) if self._ahead is not None else 0.0

    def close(self) -> None:
        """End the writer forked ahead, if it was not asked to generate."""
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None

    def __call__(self, plan_path: str, ranks: int) -> None:
        forked, self._ahead = self._ahead, None
        if ranks > 1:
            if forked is not None:
                forked.close()
            self._step("experiments.dataset", [plan_path], ranks, "generate")
            return
        if self._deadline is not None and time.monotonic() >= self._deadline:
            if forked is not None:
                forked.close()
            raise TimeLimitError(f"time limit reached before the generate step: the point's cluster.timeout_min="
                                 f"{self._spec.cluster.timeout_min} ran out; raise cluster.timeout_min")
        said = (forked or ForkedGenerator(self._spec.format.name, self._env)).generate(plan_path)
        if said is not None:
            cause = failure_cause(said)
            first = f"generate step failed: {cause}; {said}" if cause else f"generate step failed: {said}"
            raise LaunchError(f"{first}\n(generated by writer processes forked from the job's: one per usable core, "
                              "at most one per file or, for one file written at offsets, one per two cores)")


def generation_runner(spec: PointSpec, run_dir: Path, deadline: float | None = None) -> GenerationRunner:
    """The runner :func:`ensure_dataset` calls to generate ``spec``'s dataset on its own (:class:`GenerationRunner`:
    a one-rank dataset's writer is forked now, ahead)."""
    return GenerationRunner(spec, run_dir, deadline)


def failure_record(point: dict[str, Any], error: str, job_state: str = "FAILED", run_dir: str = "") -> dict[str, Any]:
    """The stored form of a point that could not be measured: its config and the error text."""
    return FailureRecord.of(point, error, job_state=job_state, run_dir=run_dir).to_dict()


def run_point(point: dict[str, Any], run_dir: str) -> Record:
    """Measure one point (runs inside the job). Never raises for a measurement problem: it returns, and writes,
    a failure record instead, so the driver and ``analysis ingest`` both see what went wrong. A resource that ran
    out (space, inodes, quota, open files), wherever it happens, is stored as one sentence
    (:func:`ddlio.resources.resource_sentence`); SIGTERM and SIGHUP are recorded by their names, as Ctrl-C is."""
    rd = Path(run_dir)
    paths = RunPaths(rd)
    t0 = time.perf_counter()
    try:
        with terminate_as_interrupt():
            rd.mkdir(parents=True, exist_ok=True)
            for stale in paths.records:
                stale.unlink(missing_ok=True)
            result, env = _measure(point, rd)
            if point.get("format") == "hdf5":  # the HDF5 library's version too, with HDF5 points only
                env["packages"] = envinfo.package_versions(hdf5=True)
    except KeyboardInterrupt as e:  # SIGINT: Ctrl-C in the driver's terminal, or the executor's own time limit
        how = "SIGINT: Ctrl-C, or the executor's time limit" if not isinstance(e, Terminated) else interrupt_name(e)
        return _failed(paths, FailureRecord.of(point, f"interrupted ({how}) after {time.perf_counter() - t0:.1f} s; "
                                               "a rerun measures the point again", job_state="INTERRUPTED",
                                               run_dir=str(rd)))
    except Exception as e:  # an unexpected bug still must not lose the point's config and error
        return _failed(paths, FailureRecord.of(point, _error_text(e, point, rd), run_dir=str(rd)))
    record = result.with_facts(point=point, run_dir=str(rd), job_state="COMPLETED", env=env,
                               point_seconds=time.perf_counter() - t0)
    try:
        write_json_atomic(paths.result, record.to_dict())
    except OSError as e:  # measured, but its record cannot be kept: the job's return value still carries it
        if resource_oserror(e) is None:
            raise
        _say(f"ddlio: the result could not be written to {paths.result}: {resource_sentence(e, rd)}")
    return record


def _error_text(e: Exception, point: dict[str, Any], rd: Path) -> str:
    """The stored error of a point that failed with ``e``: one sentence for a resource that ran out (which, where,
    how much), the exception for a ddlio error, the exception and its traceback for anything else (a bug)."""
    datasets = Path(str(point.get("data_root") or "/nonexistent")) / "datasets"
    planned = int(point.get("samples") or 0) * int(point.get("sample_size") or 0) or None  # the dataset's payload
    short = resource_oserror(e)
    if short is not None:
        where = Path(os.fsdecode(short.filename)) if short.filename else rd
        needed = planned if datasets in where.parents else None
        return f"{type(e).__name__}: {resource_sentence(short, rd, needed)}"
    if isinstance(e, DdlioError):
        cause = failure_cause(str(e))
        codes = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT}
        if cause in codes:  # said by an MPI step's output (generate, kernel): the step's name and one sentence
            step = str(e).split(":", 1)[0]
            said = OSError(codes[cause], cause, str(datasets.parent))
            return f"{type(e).__name__}: {step}: {resource_sentence(said, needed_bytes=planned)}"
        return f"{type(e).__name__}: {e}"
    return f"{type(e).__name__}: {e}\n{traceback.format_exc()}"


def _say(line: str) -> None:
    """``line`` on the job's stderr, if it can be written there (a log on a full disk cannot be)."""
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)


#: how a job's stderr says what the point failed with when its failure record could not be written (a full disk):
#: the driver's record of the job then starts with what follows (:func:`experiments.run.records.lost_job_error`)
POINT_FAILED = "ddlio: the point failed: "


def _failed(paths: RunPaths, record: FailureRecord) -> FailureRecord:
    """Write the failure ``record`` to the run folder; when the folder's file system cannot hold it (full), the
    record is still returned: the job's return value carries it to the driver."""
    try:
        write_json_atomic(paths.failure, record.to_dict())
    except OSError as e:
        if resource_oserror(e) is None:
            raise
        first = (record.error.strip().splitlines() or ["?"])[0]
        _say(f"{POINT_FAILED}{first} (its failure record could not be written to {paths.failure}: "
             f"{resource_sentence(e)})")
    return record


def _measure(point: dict[str, Any], rd: Path) -> Measured:
    """Run the point's workload kind (``KINDS[spec.kind]``) in the point's run folder ``rd``: its record (with the
    kind's own facts) and the environment it ran in."""
    spec = PointSpec.from_dict(point)
    deadline = time.monotonic() + float(spec.cluster.timeout_min) * 60
    ctx = JobContext(point=point, spec=spec, run_dir=rd, paths=RunPaths(rd), deadline=deadline,
                     steps=step_runner(spec, rd, deadline),
                     ensure=lambda *a, **k: ensure_dataset(*a, **k))  # looked up at call time: tests replace it
    return KINDS[spec.kind]().run(ctx)
