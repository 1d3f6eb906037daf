"""The local executor: one point at a time on this machine, each a submitit local job (its controller's PID is
the job id), waited for to its end before the next starts."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ddlio.records import FailureRecord, Record, read_record
from ddlio.runpaths import RunPaths, local_measurement_lock
from ddlio.signals import interrupt_name
from experiments.config import PointSpec
from experiments.executors.base import Harvest, Harvested, Host, Pending, Submitted
from experiments.executors.entry import job_python

#: how often the driver looks whether a local job has left its record or is done (seconds; a look is two stat
#: calls and a waitpid)
LOCAL_POLL_S = 0.02
#: how often the driver looks into the run folder of a re-attached local job (seconds)
FILE_POLL_S = 0.5
#: submitit's own time limit for a local job comes this much after the point's (minutes): a backstop only
LOCAL_BACKSTOP_MIN = 1.0
#: after Ctrl-C, how long the driver waits for the local job to record that it was interrupted (seconds)
INTERRUPT_GRACE_S = 5.0


def local_job_alive(job_id: Any) -> bool:
    """Whether a local submitit job (its controller's PID) still runs: alive, not a zombie, and still submitit's
    controller (a recycled PID belongs to some other program)."""
    try:
        pid = int(job_id)
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (TypeError, ValueError, OSError):
        return False
    return "\nState:\tZ" not in status and b"submitit" in cmdline


@contextlib.contextmanager
def output_to(path: Path) -> Iterator[None]:
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
        """Wait for the files of local jobs an earlier driver started (a local executor holds nothing back)."""
        for p in pending:
            while local_job_alive(p.job_id) and read_record(p.run_dir) is None:
                host.heartbeat()
                time.sleep(FILE_POLL_S)
            record = read_record(p.run_dir) or host.lost(p.spec, p.job_id, "EXITED", p.run_dir, job_state="FAILED")
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
        import submitit  # lazy: start-up speed (submitit is needed once a point runs)

        rd = host.prepare(spec)
        folder = RunPaths(rd).job_folder
        # the point keeps its own time limit (run_point); submitit's, a little later, is only a backstop
        executor = submitit.LocalExecutor(folder=folder, max_num_timeout=0, python=job_python())
        executor.update_parameters(timeout_min=float(spec.cluster.timeout_min) + LOCAL_BACKSTOP_MIN)
        t0 = time.perf_counter()
        folder.mkdir(parents=True, exist_ok=True)
        with output_to(RunPaths(rd).controller_log):  # submitit's controller writes its own tracebacks there
            job = executor.submit(host.job, spec.to_dict(), str(rd))
        host.submitted(spec, str(job.job_id), rd, folder, self.name)
        host.report.submitted += 1
        record: Record
        try:
            # the job's own record, written before it returns (prepare_run_dir archived any earlier one): the point
            # is done then, without waiting for submitit's pickle and for the job and its controller to exit
            # (~0.1 s); submitit's result covers a job that died without writing one
            record = read_record(rd)
            while record is None and not job.done():  # submitit's own wait polls once a second
                host.heartbeat()
                time.sleep(LOCAL_POLL_S)
                record = read_record(rd)
            if record is None:
                record = read_record(rd) or job.result()
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: stop the job, store what it says of itself, then stop
            host.finish(spec, _interrupted(job, spec, rd, interrupt_name(e)), time.perf_counter() - t0)
            raise
        except Exception as e:  # the job itself died (killed, timed out): still record the point
            state = str(getattr(job, "state", "FAILED"))
            record = host.lost(spec, str(job.job_id), state, rd, detail=f"{type(e).__name__}: {e}")
        host.finish(spec, record, time.perf_counter() - t0)


def _interrupted(job: Any, spec: PointSpec, rd: Path, how: str = "Ctrl-C") -> Record:
    """After Ctrl-C (or SIGTERM, ``how``): stop the local job (it may not have seen the signal), wait a little for
    the failure record it writes of itself, else the point's record as interrupted, so a rerun measures it again."""
    with contextlib.suppress(Exception):
        job.cancel(check=False)
    end = time.monotonic() + INTERRUPT_GRACE_S
    record = None
    while record is None and time.monotonic() < end:
        record = read_record(rd)
        if record is None:
            time.sleep(LOCAL_POLL_S)
    if not isinstance(record, FailureRecord):
        record = FailureRecord.of(spec.to_dict(), f"interrupted ({how}) before the point finished; a rerun "
                                  "measures it again", job_state="INTERRUPTED", run_dir=str(rd))
    return record
