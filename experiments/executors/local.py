"""The local executor: one point at a time on this machine, each a submitit local job whose process is the job
itself (its PID is the job id), waited for to its end before the next starts.

submitit's own local executor starts a controller process (``python -m submitit.local._local``) that starts the
job's process and watches its time limit. For ddlio's one task a job, that controller is one more Python process
with all of submitit imported (17 MiB and ~0.15 s of start-up, in front of the job's own start, on every point);
:class:`DirectLocalExecutor` starts the job's process itself, with the environment the controller gives a task,
and the driver, which watches the job anyway, keeps the backstop time limit. The job stays submitit's: pickled by
submitit, run by submitit's entry (:mod:`experiments.executors.entry`), its logs and result under submitit's names.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddlio.errors import DdlioError
from ddlio.procs import process_started
from ddlio.records import FailureRecord, Record, read_record
from ddlio.resources import resource_oserror, resource_sentence
from ddlio.runpaths import RunPaths, local_measurement_lock
from ddlio.signals import interrupt_name, interrupt_signal
from experiments.config import PointSpec
from experiments.executors.base import Harvest, Harvested, Host, Pending, Submitted
from experiments.executors.entry import SELF_JOB_ID, job_python

#: how often the driver looks whether a local job has left its record or is done (seconds; a look is two stat
#: calls and a waitpid)
LOCAL_POLL_S = 0.02
#: how often the driver looks into the run folder of a re-attached local job (seconds)
FILE_POLL_S = 0.5
#: the driver stops a local job this long after the point's own time limit (minutes): a backstop only, for a job
#: that failed to stop itself
LOCAL_BACKSTOP_MIN = 1.0
#: after Ctrl-C (or the backstop), how long the driver waits for the local job to record that it was interrupted
#: before it kills it (seconds)
INTERRUPT_GRACE_S = 5.0


def local_job_alive(job_id: Any) -> bool:
    """Whether a local submitit job (its process's PID; a controller's for jobs of earlier releases) still runs:
    alive, not a zombie, and still submitit's (a recycled PID belongs to some other program)."""
    try:
        pid = int(job_id)
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (TypeError, ValueError, OSError):
        return False
    return "\nState:\tZ" not in status and b"submitit" in cmdline


def task_env(timeout_min: float, signal_delay_s: int) -> dict[str, str]:
    """What submitit's local controller puts in its task's environment (``submitit.local.local``), for a job of
    one task on one node. The job id, the task's own PID, is set by the task's entry (:data:`SELF_JOB_ID`)."""
    return {"SUBMITIT_EXECUTOR": "local", "SUBMITIT_LOCAL_NTASKS": "1", "SUBMITIT_LOCAL_NODEID": "0",
            "SUBMITIT_LOCAL_JOB_NUM_NODES": "1", "SUBMITIT_LOCAL_LOCALID": "0", "SUBMITIT_LOCAL_GLOBALID": "0",
            "SUBMITIT_LOCAL_TIMEOUT_S": str(int(60 * timeout_min)),
            "SUBMITIT_LOCAL_SIGNAL_DELAY_S": str(signal_delay_s), "SUBMITIT_STDERR_TO_STDOUT": "",
            "SUBMITIT_LOCAL_WITH_SHELL": "", "CUDA_VISIBLE_DEVICES": "",
            "SUBMITIT_LOCAL_JOB_ID": SELF_JOB_ID}


def start_task(folder: Path, command: str, env: dict[str, str]) -> subprocess.Popen:
    """Start a local job's one task, ``command`` (submitit's command line, its words quoted for a shell), with its
    output in submitit's ``<job id>_0_log.out`` and ``.err`` in ``folder``: opened under temporary names and
    renamed once the PID (the job id) is known, so every byte the task writes, its interpreter's first included,
    is there."""
    folder.mkdir(parents=True, exist_ok=True)
    logs = [tempfile.mkstemp(dir=folder, prefix=".starting-", suffix=suffix) for suffix in (".out", ".err")]
    try:
        process = subprocess.Popen(shlex.split(command), env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                   stdout=logs[0][0], stderr=logs[1][0])
        for (_, tmp), stream in zip(logs, ("out", "err"), strict=True):
            os.replace(tmp, folder / f"{process.pid}_0_log.{stream}")
    except BaseException:
        for _, tmp in logs:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    finally:
        for fd, _ in logs:
            os.close(fd)
    return process


def direct_executor(folder: Path, timeout_min: float) -> Any:
    """submitit's local executor for one point, its job's process started directly (see the module)."""
    import submitit  # lazy: start-up speed (submitit is needed once a point runs)
    from submitit.local.local import LocalJob

    class DirectLocalExecutor(submitit.LocalExecutor):
        """``submitit.LocalExecutor`` without the controller: ``_submit_command`` starts the task itself."""

        def _submit_command(self, command: str) -> LocalJob:
            env = task_env(float(self.parameters.get("timeout_min", 2.0)),
                           int(self.parameters.get("signal_delay_s", 30)))
            self.process = start_task(Path(self.folder), command, env)
            return LocalJob(folder=self.folder, job_id=str(self.process.pid), process=self.process, tasks=[0])

    executor = DirectLocalExecutor(folder=folder, max_num_timeout=0, python=job_python())
    executor.update_parameters(timeout_min=timeout_min)
    return executor


class LocalExecutor:
    """``cluster.executor=local``."""

    name = "local"

    def submit(self, specs: Sequence[PointSpec], live: Sequence[Pending], host: Host) -> Submitted:
        """Wait for the re-attached jobs, then run each point to its end: submit, wait, store; then the next."""
        self.wait(live, (), host)
        for spec in specs:
            self._run(spec, host)
        return Submitted()

    def wait(self, pending: Sequence[Pending], held: Sequence[PointSpec], host: Host) -> None:
        """Wait for the files of local jobs an earlier driver started (a local executor holds nothing back), and
        keep their backstop time limit, counted from the job process's start."""
        for p in pending:
            limit_s = 60 * (float(p.spec.cluster.timeout_min) + LOCAL_BACKSTOP_MIN)
            record: Record | None = None
            while local_job_alive(p.job_id) and read_record(p.run_dir) is None:
                if process_age_s(int(p.job_id)) > limit_s:
                    record = _stopped(_Reattached(int(p.job_id)), p.spec, p.run_dir, _overdue(p.spec))
                    break
                host.heartbeat()
                time.sleep(FILE_POLL_S)
            record = record or read_record(p.run_dir) or host.lost(p.spec, p.job_id, "EXITED", p.run_dir,
                                                                     job_state="FAILED")
            host.finish(p.spec, record)

    def harvest(self, jobs: Sequence[Harvest], host: Host) -> Harvested:
        """A finished job's record is stored; a job still running is waited for; one that died with its driver is
        lost and measured again (when retried or forced)."""
        out = Harvested()
        for h in jobs:
            record = read_record(h.run_dir)
            if record is None and self.alive(h.job_id):
                out.pending.append(Pending(h.spec, h.job_id, h.run_dir, state="RUNNING"))
                continue
            again = h.retry and isinstance(record, FailureRecord)
            if record is None:
                record, again = host.lost(h.spec, h.job_id, "LOST", h.run_dir), h.retry or h.forced
            host.finish(h.spec, record, keep=again)
            if again:
                out.again.append(h.spec)
        return out

    def alive(self, job_id: str) -> bool:
        return local_job_alive(job_id)

    def describe(self, specs: Sequence[PointSpec]) -> list[str]:
        return [f"{len(specs)} local point(s), one at a time"]

    def measurement_lock(self, spec: PointSpec) -> Path | None:
        """One measurement at a time on this machine, across sweeps too."""
        return local_measurement_lock(spec.data_root)

    def _run(self, spec: PointSpec, host: Host) -> None:
        # the point keeps its own time limit (run_point); the driver's, a little later, is only a backstop
        timeout_min = float(spec.cluster.timeout_min) + LOCAL_BACKSTOP_MIN
        t0 = time.perf_counter()
        rd = Path(spec.data_root)
        try:  # its run folder, job script and pickled call: a full disk here fails the point, in one sentence
            rd = host.prepare(spec)
            executor = direct_executor(RunPaths(rd).job_folder, timeout_min)
            job = executor.submit(host.job, spec.to_dict(), str(rd))
        except (OSError, DdlioError) as e:  # a full disk, an earlier attempt's process that would not stop ...
            short = resource_oserror(e)
            if short is not None:
                why = resource_sentence(short, rd)
            elif isinstance(e, OSError):
                why = f"{e.strerror or e}" + (f": {e.filename}" if e.filename else "")
            else:
                why = str(e)
            host.finish(spec, FailureRecord.of(spec.to_dict(), f"the point could not start: {why}",
                                               run_dir=str(rd)), time.perf_counter() - t0)
            return
        host.submitted(spec, str(job.job_id), rd, RunPaths(rd).job_folder, self.name)
        host.report.submitted += 1
        record: Record | None
        try:
            # the job's own record, written before it returns (prepare_run_dir archived any earlier one): the point
            # is done then, without waiting for submitit's pickle and for the job to exit (~0.1 s); submitit's
            # result covers a job that died without writing one
            backstop = time.monotonic() + 60 * timeout_min
            record = read_record(rd)
            while record is None and not job.done():  # submitit's own wait polls once a second
                if time.monotonic() > backstop:
                    record = _stopped(_Child(executor.process), spec, rd, _overdue(spec))
                    break
                host.heartbeat()
                time.sleep(LOCAL_POLL_S)
                record = read_record(rd)
            if record is None:
                record = read_record(rd) or job.result()
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: stop the job, store what it says of itself, then stop
            host.finish(spec, _interrupted(_Child(executor.process), spec, rd, interrupt_name(e),
                                           interrupt_signal(e)), time.perf_counter() - t0)
            raise
        except Exception as e:  # the job itself died (killed, timed out): still record the point
            state = str(getattr(job, "state", "FAILED"))
            record = host.lost(spec, str(job.job_id), state, rd, detail=_died(e))
        host.finish(spec, record, time.perf_counter() - t0)


def _died(e: Exception) -> str:
    """What submitit said of a job that died (its exception's text ends with the job's traceback): the line that
    names the error, not the traceback around it."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    last = next((ln for ln in reversed(lines) if re.match(r"[\w.]+(Error|Exception|Interrupt)\b", ln)), None)
    return f"{type(e).__name__}: {last or (lines[0] if lines else '')}"


def process_age_s(pid: int) -> float:
    """How long process ``pid`` has run (seconds, to the second); 0 if it is gone."""
    started = process_started(pid)
    return 0.0 if started is None else time.time() - started


class _Child:
    """A local job this driver started (its process is the driver's child), as :func:`_stop` handles it."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)
        if sig == signal.SIGKILL:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=INTERRUPT_GRACE_S)

    def done(self) -> bool:
        return self.process.poll() is not None


class _Reattached:
    """A local job an earlier driver started, by its PID (not this driver's child), as :func:`_stop` handles it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def signal(self, sig: int) -> None:
        if local_job_alive(self.pid):  # still the job (a recycled PID is some other program's)
            os.kill(self.pid, sig)

    def done(self) -> bool:
        return not local_job_alive(self.pid)


def _overdue(spec: PointSpec) -> str:
    return (f"the point's time limit ({spec.cluster.timeout_min:g} min) and {LOCAL_BACKSTOP_MIN:g} min more passed "
            "and the job had not stopped")


def _stop(job: _Child | _Reattached, rd: Path, sig: int = signal.SIGINT) -> Record | None:
    """Interrupt a local job (SIGINT, as Ctrl-C would, or the signal the driver got, ``sig``: it stops its MPI step
    and writes its failure record naming that signal), give it :data:`INTERRUPT_GRACE_S` to end, kill it if it has
    not (as submitit's controller did); the record it wrote, if any."""
    with contextlib.suppress(OSError):
        job.signal(sig)
    end = time.monotonic() + INTERRUPT_GRACE_S
    while time.monotonic() < end and not job.done():
        time.sleep(LOCAL_POLL_S)
    if not job.done():
        with contextlib.suppress(OSError):
            job.signal(signal.SIGKILL)
    return read_record(rd)


def _stopped(job: _Child | _Reattached, spec: PointSpec, rd: Path, why: str) -> Record:
    """The backstop: the job outlived its time limit; stop it and record the point as timed out."""
    record = _stop(job, rd)
    if isinstance(record, FailureRecord) or record is None:
        record = FailureRecord.of(spec.to_dict(), f"stopped by the driver: {why}; a rerun measures it again",
                                  job_state="TIMEOUT", run_dir=str(rd))
    return record


def _interrupted(job: _Child, spec: PointSpec, rd: Path, how: str = "Ctrl-C", sig: int = signal.SIGINT) -> Record:
    """After Ctrl-C (or SIGTERM, SIGHUP: ``how``, the signal ``sig``): stop the local job with that signal (it may
    not have seen it), wait a little for the failure record it writes of itself, else the point's record as
    interrupted, so a rerun measures it again."""
    record = _stop(job, rd, sig)
    if not isinstance(record, FailureRecord):
        record = FailureRecord.of(spec.to_dict(), f"interrupted ({how}) before the point finished; a rerun "
                                  "measures it again", job_state="INTERRUPTED", run_dir=str(rd))
    return record
