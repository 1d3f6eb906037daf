"""What every executor is (:class:`Executor`: one module per scheduler behind it, as submitit keeps one per
scheduler behind its Executor) and what it is given: the driver running the sweep (:class:`Host`), the jobs it
waits for (:class:`Pending`) and those an earlier driver left out (:class:`Harvest`).

An executor knows nothing of the store or the life cycle: it hands each outcome to :meth:`Host.finish` and says
what the scheduler reports of a live job through :meth:`Host.observe`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ddlio.records import FailureRecord, Record
from experiments.config import PointSpec

#: what runs inside a job: ``job(point_dict, run_dir) -> record`` (experiments.run.job.run_point)
JobFunction = Callable[[dict[str, Any], str], Record]


def run_pack(job: JobFunction, items: Sequence[tuple[dict[str, Any], str]]) -> list[Record]:
    """What one array task that measures several points runs (:mod:`experiments.executors.slurm.packing`): ``job``
    on each ``(point_dict, run_dir)`` in turn. Each point writes its own record in its own run folder, which the
    driver picks up as soon as it lands; a point that fails (a failure record) does not stop the others. An
    interrupted point (SIGINT: Ctrl-C, or the task's time limit) ends the task: the points not started leave no
    record, so the driver finds them lost when the task ends and measures them again when retried."""
    out: list[Record] = []
    for point, run_dir in items:
        record = job(point, run_dir)
        out.append(record)
        if getattr(record, "job_state", "") == "INTERRUPTED":
            break
    return out


@dataclass
class Pending:
    """A point whose job is queued or running."""

    spec: PointSpec
    job_id: str
    run_dir: Path
    ended_at: float | None = None  # when the scheduler first reported a terminal state without a result file
    state: str = "PENDING"
    reason: str = ""  # the scheduler's pending reason while the job waits (squeue %r)
    pending_since: float | None = None  # driver clock (s) when it was first seen waiting
    never_polls: int = 0  # consecutive polls that saw it pending for a reason only an administrator can clear


@dataclass
class Harvest:
    """A point whose job an earlier driver submitted and nobody harvested: harvest its outcome or wait for it."""

    spec: PointSpec
    job_id: str
    run_dir: Path
    #: measure it again when it failed (retry_failed, and the point did not complete before)
    retry: bool
    #: the point is forced (force=true): measured again even when its job was lost
    forced: bool = False


@dataclass
class Submitted:
    """What :meth:`Executor.submit` left out: jobs to wait for, and points a site limit holds back (and why)."""

    pending: list[Pending] = field(default_factory=list)
    held: list[PointSpec] = field(default_factory=list)
    held_reason: str = ""


@dataclass
class Harvested:
    """What :meth:`Executor.harvest` found: jobs still out, and points to measure again."""

    pending: list[Pending] = field(default_factory=list)
    again: list[PointSpec] = field(default_factory=list)


class Tally(Protocol):
    """The sweep's counts an executor reports in its progress line."""

    submitted: int
    completed: int
    failed: int


class Host(Protocol):
    """What an executor needs from the driver running the sweep."""

    #: when the driver started (``time.perf_counter`` clock, seconds)
    t0: float
    report: Tally
    #: the function each job runs
    job: JobFunction

    def echo(self, line: str) -> None: ...

    def heartbeat(self) -> None:
        """Tell the store the driver is alive; call it while waiting."""

    def finish(self, spec: PointSpec, record: Record, seconds: float | None = None, keep: bool = False) -> None:
        """Store and report a point's outcome (``keep``: the point's claim is kept, it is measured again)."""

    def observe(self, spec: PointSpec, scheduler_state: str) -> None:
        """The scheduler's word on a live job (Slurm's state names)."""

    def prepare(self, spec: PointSpec) -> Path:
        """The point's run folder, the previous outcome archived and the reproducer written."""

    def submitted(self, spec: PointSpec, job_id: str, run_dir: Path, folder: Path, executor: str) -> None:
        """The scheduler accepted the point's job (noted in the run folder and the store)."""

    def lost(self, spec: PointSpec, job_id: str, state: str, run_dir: Path, detail: str = "",
             job_state: str | None = None) -> FailureRecord:
        """The failure record (outcome LOST) of a job that ended in ``state`` and left no record of its own
        (``job_state``: what the record says of the job, ``state`` unless given)."""


class Executor(Protocol):
    """One scheduler: hands points out as jobs and gets their outcomes back."""

    #: the name ``cluster.executor`` gives it
    name: str

    def submit(self, specs: Sequence[PointSpec], live: Sequence[Pending], host: Host) -> Submitted:
        """Hand ``specs`` out as jobs (``live``: this executor's jobs already out, re-attached). An executor that
        runs one point at a time runs them all to their end and returns nothing to wait for."""

    def harvest(self, jobs: Sequence[Harvest], host: Host) -> Harvested:
        """Hand the outcome of each job an earlier driver left out to the host, or return it to wait for."""

    def wait(self, pending: Sequence[Pending], held: Sequence[PointSpec], host: Host) -> None:
        """Hand each outcome to the host as its job ends; submit ``held`` points as slots free."""

    def alive(self, job_id: str) -> bool:
        """Whether job ``job_id`` still runs (or waits to)."""

    def describe(self, specs: Sequence[PointSpec]) -> list[str]:
        """What a dry run says of points with equal resources: a headline, then what would be submitted."""

    def measurement_lock(self, spec: PointSpec) -> Path | None:
        """The lock file the job holds around the point's kernel step (one measurement at a time on a shared
        machine), or None."""
