"""Slurm: waiting for a sweep's jobs (each outcome stored as it lands, held points submitted as slots free, a job
that can never start cancelled), the progress line, and :class:`SlurmExecutor`, which ties submitting and
waiting together behind the executor protocol."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ddlio.records import FailureRecord, read_record
from experiments.config import PointSpec
from experiments.executors.base import Harvest, Harvested, Host, Pending, Submitted
from experiments.executors.slurm import (
    NEVER,
    TERMINAL,
    VANISHED,
    WAITING,
    JobWatcher,
    cancel,
    fmt_duration,
    job_states,
    reason_kind,
)
from experiments.executors.slurm.submit import describe, harvest_jobs, submit_points, with_slurm_state

#: how often the driver looks at a Slurm sweep's run folders and asks sacct (stat load on a parallel file system)
STATE_POLL_S = 2.0
#: while no job changes state and no record lands, the time between two questions to Slurm grows up to this (s)
STATE_POLL_MAX_S = 10.0
#: right after a record landed, the run folders are looked at again this soon (s): a task's next point follows
TICK_MIN_S = 0.5
#: default of cluster.vanish_after_s: a job that neither squeue nor sacct knows for this long (seconds) is gone
VANISH_S = 120.0
#: points held by a site limit (sbatch refused them) are offered again at the latest after this many seconds,
#: and as soon as one of the sweep's jobs ends
HELD_RETRY_S = 30.0
#: after Slurm says a job ended, how long to wait for its result file to appear (shared file-system lag)
RESULT_GRACE_S = 10.0


class _Waiter:
    """One wait for a sweep's jobs: what is live, what is held, and when each was last looked at."""

    def __init__(self, pending: Sequence[Pending], held: Sequence[PointSpec], host: Host, held_reason: str) -> None:
        self.host = host
        self.live = {p.spec.point_key: p for p in pending}
        self.held = list(held)
        self.held_reason = held_reason
        self.live_at_refusal = len(self.live)  # jobs live when sbatch last refused: fewer means a slot may be free
        vanish = min((p.spec.cluster.vanish_after_s for p in self.live.values()), default=VANISH_S)
        if self.held:
            vanish = min(vanish, *(s.cluster.vanish_after_s for s in self.held))
        self.watcher = JobWatcher(vanish_after_s=vanish)
        self.last_states = 0.0
        self.last_line = ""
        self.last_try = time.perf_counter()

    def run(self) -> None:
        """Look at the run folders every ``tick`` (:data:`TICK_MIN_S` right after a record landed, growing to
        :data:`STATE_POLL_S` while none does) and ask Slurm every ``every`` (:data:`STATE_POLL_S` while records land
        or a job changes state, backing off to :data:`STATE_POLL_MAX_S` while the queue stands still)."""
        tick, every = STATE_POLL_S, STATE_POLL_S
        while self.live or self.held:
            self.host.heartbeat()
            now = time.perf_counter()
            landed = self._harvest_files()
            tick = TICK_MIN_S if landed else min(STATE_POLL_S, tick * 1.5)
            if self.held and (len(self.live) < self.live_at_refusal or now - self.last_try >= HELD_RETRY_S):
                self._retry_held(now)
            if self.live and now - self.last_states >= every:
                self.last_states = now
                before = {k: p.state for k, p in self.live.items()}
                states = self.watcher.poll(p.job_id for p in self.live.values())
                for key, p in list(self.live.items()):
                    if self._judge(p, states[p.job_id], now):
                        del self.live[key]
                moved = landed or len(self.live) < len(before) or any(
                    p.state != before.get(k) for k, p in self.live.items())
                every = STATE_POLL_S if moved else min(STATE_POLL_MAX_S, every * 1.5)
                self._show(now)
            elif not self.live and self.held:
                self._show(now)
            if self.live or self.held:
                time.sleep(tick)

    def _harvest_files(self) -> int:
        """Store the records that landed in the live points' run folders (one transaction where the host can);
        how many landed."""
        landed = []
        for key, p in list(self.live.items()):
            record = read_record(p.run_dir)
            if record is not None:
                landed.append((p.spec, with_slurm_state(record, p.job_id, p.state)))
                del self.live[key]
        many = getattr(self.host, "finish_many", None)
        if many is not None:
            many(landed)
        else:
            for spec, record in landed:
                self.host.finish(spec, record)
        return len(landed)

    def _retry_held(self, now: float) -> None:
        self.last_try = now
        more = submit_points(self.held, self.host, max_array=max(1, self.live_at_refusal - len(self.live)) or 1)
        self.held, self.held_reason = more.held, more.held_reason or self.held_reason
        self.live.update((p.spec.point_key, p) for p in more.pending)
        self.live_at_refusal = len(self.live)

    def _judge(self, p: Pending, js: Any, now: float) -> bool:
        """Take in the job's state; True when the point is done with (stored)."""
        if js.state != "UNKNOWN":
            p.state, p.reason = js.state, js.reason if js.state in WAITING else ""
            self.host.observe(p.spec, p.state)  # queued / running in the life cycle
        if p.state in WAITING:
            p.pending_since = p.pending_since or now
            p.never_polls = p.never_polls + 1 if reason_kind(p.reason) == NEVER else 0
            if p.never_polls >= 2 and p.spec.cluster.cancel_unrunnable:
                cancel([p.job_id])
                error = (f"job {p.job_id} was pending for {p.reason}, which only an administrator can clear "
                         "(the request is above a limit of the partition, account or QOS): cancelled. "
                         "cluster.cancel_unrunnable=false keeps such a job waiting")
                self.host.finish(p.spec, FailureRecord.of(p.spec.to_dict(), error, job_state="CANCELLED",
                                                          run_dir=str(p.run_dir)))
                return True
        if p.state in TERMINAL or p.state == VANISHED:
            p.ended_at = p.ended_at or now
            if now - p.ended_at >= (RESULT_GRACE_S if p.state in ("COMPLETED", VANISHED) else 1.0):
                record = read_record(p.run_dir) or self.host.lost(p.spec, p.job_id, p.state, p.run_dir)
                self.host.finish(p.spec, record)
                return True
        return False

    def _show(self, now: float) -> None:
        line = progress(self.live.values(), self.held, self.held_reason, self.host, now)
        if line != self.last_line:
            self.host.echo(f"[{now - self.host.t0:5.0f} s] {line}")
            self.last_line = line


def wait_jobs(pending: Sequence[Pending], host: Host, held: Sequence[PointSpec] = (), held_reason: str = "") -> None:
    """Store each point as its job finishes; show progress with each pending reason and how long it waits;
    submit held points as slots free; cancel a point that can never start (``cluster.cancel_unrunnable``)."""
    _Waiter(pending, held, host, held_reason).run()


def progress(live: Iterable[Pending], held: Sequence[PointSpec], held_reason: str, host: Host, now: float) -> str:
    """``2 running, 3 queued (2 JobArrayTaskLimit: waits, 1 min; 1 Priority: waits, <1 min), 1 held by a limit
    (QOSMaxSubmitJobPerUserLimit), 4 done, 0 failed``; points packed into a running array task (one job id)
    count one running and the rest ``next in a running task``."""
    live = list(live)
    queued = [p for p in live if p.state in WAITING or p.state == "UNKNOWN"]
    by_reason: dict[str, list[float]] = {}
    for p in queued:
        by_reason.setdefault(p.reason or ("submitted" if p.state == "UNKNOWN" else p.state.lower()), []).append(
            now - (p.pending_since or now))
    # an array task measuring several points (packing.py) runs one at a time: the others wait their turn in it
    started = [p for p in live if p not in queued]
    tasks = len({p.job_id for p in started})
    parts = [f"{tasks} running", f"{len(queued)} queued"]
    if len(started) > tasks:
        parts.insert(1, f"{len(started) - tasks} next in a running task")
    if by_reason:
        parts[-1] += " (" + "; ".join(
            f"{len(w)} {r}: {reason_kind(r) if r not in ('submitted', 'pending') else 'waits'}, {fmt_duration(max(w))}"
            for r, w in sorted(by_reason.items())) + ")"
    if held:
        parts.append(f"{len(held)} held by a limit ({held_reason}): submitted as slots free")
    parts += [f"{host.report.completed} done", f"{host.report.failed} failed"]
    return ", ".join(parts)


class SlurmExecutor:
    """``cluster.executor=slurm``: every point a job with its own nodes x ppn."""

    name = "slurm"

    def __init__(self) -> None:
        self.held_reason = ""

    def submit(self, specs: Sequence[PointSpec], live: Sequence[Pending], host: Host) -> Submitted:
        out = submit_points(specs, host) if specs else Submitted()
        self.held_reason = out.held_reason or self.held_reason
        return Submitted([*live, *out.pending], out.held, out.held_reason)

    def harvest(self, jobs: Sequence[Harvest], host: Host) -> Harvested:
        return harvest_jobs(jobs, host)

    def wait(self, pending: Sequence[Pending], held: Sequence[PointSpec], host: Host) -> None:
        wait_jobs(pending, host, held, self.held_reason)

    def alive(self, job_id: str) -> bool:
        return job_states([job_id]).get(job_id, "UNKNOWN") not in TERMINAL

    def describe(self, specs: Sequence[PointSpec]) -> list[str]:
        return describe(specs)

    def measurement_lock(self, spec: PointSpec) -> Path | None:
        """A job has its nodes to itself: nothing to hold."""
        return None
