"""The driver (``sweep.py``): :func:`launch` skips points the tracker already holds, hands the others to their
executor (:mod:`experiments.executors`), waits for each and hands its record to the tracker. It knows the store
only through :class:`Tracker`, a point's life cycle through :mod:`experiments.run.lifecycle`, and a scheduler only
through the executor registry.

Planning a round by the life cycle: skip the measured; claim the others in the store (a point another live
driver holds is followed, not measured); under the claim start from the state the store holds: harvest or
re-attach to a job that went out (its executor's :meth:`harvest`), and measure what is new, failed or lost (or
forced). And :func:`dry_run`: what a sweep would submit."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ddlio.mlperf import is_mlperf
from ddlio.phase import LiveLine, time_split
from ddlio.records import FailureRecord, Outcome, Record, ResultRecord, read_record
from ddlio.runpaths import RunPaths
from experiments.config import PointSpec
from experiments.config.mlperf import describe as describe_mlperf
from experiments.executors import EXECUTORS, Executor, Harvest, Pending, Submitted, executor_for
from experiments.registry import KINDS
from experiments.run.claims import claim_alive
from experiments.run.job import run_point
from experiments.run.lifecycle import LIVE, Action, Event, Life, State, scheduler_event, stored_state
from experiments.run.progress import SweepReport, adopted_line, first_line, point_labels, result_line
from experiments.run.records import job_info, lost_record, note_job, prepare_run_dir, run_dir_for

#: how often a driver tells the store it is alive (refreshes its claims), in seconds
HEARTBEAT_S = 30.0
#: how often a driver waiting for points another driver holds looks at the store, in seconds (per 100 points)
FOLLOW_POLL_S = 0.5
#: the life-cycle event of each outcome
OUTCOME_EVENTS = {Outcome.COMPLETED: Event.RESULT, Outcome.FAILED: Event.FAILURE, Outcome.LOST: Event.GONE}


class Tracker(Protocol):
    """What :func:`launch` needs from the results store."""

    #: a short id of the store: run folders live under ``data_root/runs/<store_id>/`` (see ``run_dir_for``)
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
        """Store a finished point's record in its stored form (``kind`` is ``ddlio.result`` or ``ddlio.failure``)."""


class Driver:
    """Bookkeeping shared by every executor (the :class:`~experiments.executors.Host` they are given): report,
    echo, storing each outcome once, each point's life cycle, and this driver's claims in the store (one token per
    driver process)."""

    def __init__(self, tracker: Tracker, report: SweepReport, echo: Callable[[str], None],
                 job: Callable[[dict[str, Any], str], Record] = run_point) -> None:
        self.tracker, self.report, self.job = tracker, report, job
        #: the running local point's phase, in place on a terminal (ddlio.phase); every other line clears it first
        self.live = LiveLine()

        def say(line: str) -> None:
            self.live.clear()
            echo(line)

        self.echo = say
        self.t0 = time.perf_counter()
        self.done = 0
        self.token, self.host, self.pid = uuid.uuid4().hex, socket.gethostname(), os.getpid()
        self.store_id = str(getattr(tracker, "store_id", "") or "")
        self.last_beat = time.monotonic()
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
        which an executor's waiting code moves its points (an ended job's outcome goes through :meth:`finish`)."""
        event = scheduler_event(scheduler_state)
        if event is not None and self.state(spec) in LIVE:
            self.on(spec, event)

    # ------------------------------------------------------------------------------------ the store's claims
    def heartbeat(self) -> None:
        """Tell the store this driver is alive (at most every :data:`HEARTBEAT_S` seconds); call it while waiting."""
        self.live.tick()
        if time.monotonic() - self.last_beat >= HEARTBEAT_S:
            self.last_beat = time.monotonic()
            self.tracker.heartbeat(self.token)

    def claim(self, spec: PointSpec, takeover: str | None = None) -> bool:
        return self.tracker.claim(spec.to_dict(), self.token, self.host, self.pid, takeover=takeover)

    def release(self, spec: PointSpec | None = None) -> None:
        self.tracker.release(self.token, spec.point_key if spec else None)

    def take(self, spec: PointSpec) -> dict[str, Any] | None:
        """Claim the point for this driver, taking it over from a dead driver if need be. Returns None when the
        point is now this driver's, else the row of the live driver that holds it."""
        row: dict[str, Any] = {}
        for _ in range(10):  # each turn loses only to another driver that just took or released the point
            if self.claim(spec):
                return None
            row = self.tracker.lookup(spec.point_key) or {}
            holder = row.get("claim_token")
            if holder is None:
                continue
            if holder == self.token:
                return None
            if claim_alive(row):
                return row
            if self.claim(spec, takeover=holder):
                self.echo(f"{spec.label}: taking over from a driver that is gone "
                          f"(host {row.get('claim_host')}, pid {row.get('claim_pid')})")
                return None
        return row

    # ------------------------------------------------------------------------------ what executors call
    def prepare(self, spec: PointSpec) -> Path:
        return prepare_run_dir(spec, self.store_id)

    def submitted(self, spec: PointSpec, job_id: str, run_dir: Path, folder: Path, executor: str) -> None:
        """The scheduler accepted the point's job: note it in the run folder and the store (SUBMIT_OK)."""
        if executor == "local":  # one at a time, waited for here: its phase shown while it runs
            self.live.running(self.report.label(spec), run_dir)
        self.submitted_many([(spec, job_id, run_dir)], folder, executor)

    def submitted_many(self, items: Sequence[tuple[PointSpec, str, Path]], folder: Path, executor: str) -> None:
        """:meth:`submitted` for one sbatch's ``(spec, job_id, run_dir)``: the store written in one transaction
        when the tracker can (``record_submitted_many``)."""
        for _spec, job_id, run_dir in items:
            note_job(run_dir, job_id, folder, executor)
        many = getattr(self.tracker, "record_submitted_many", None)
        if many is not None:
            many([(spec.to_dict(), job_id, str(run_dir)) for spec, job_id, run_dir in items])
        else:
            for spec, job_id, run_dir in items:
                self.tracker.record_submitted(spec.to_dict(), job_id, str(run_dir))
        for spec, _, _ in items:
            if self.state(spec) is State.HELD:  # it was held by a site limit: a slot freed
                self.on(spec, Event.SLOT_FREE)
            self.on(spec, Event.SUBMIT_OK)

    def lost(self, spec: PointSpec, job_id: str, state: str, run_dir: Path, detail: str = "",
             job_state: str | None = None) -> FailureRecord:
        return lost_record(spec, job_id, state, run_dir, detail, job_state)

    def finish(self, spec: PointSpec, record: Record, seconds: float | None = None, keep: bool = False) -> None:
        """Store a point's outcome and report it; the claim is released unless ``keep`` (measured again next)."""
        self.live.done()
        self.on(spec, OUTCOME_EVENTS[record.outcome])  # -> STORE
        self.tracker.record(record.to_dict())
        if not keep:
            self.release(spec)
        self._report(spec, record, seconds)

    def finish_many(self, outcomes: Sequence[tuple[PointSpec, Record]]) -> None:
        """:meth:`finish` (claims released) for the outcomes that landed in one look at the run folders: stored in
        one transaction and released in another when the tracker can (``record_many``, ``release_many``)."""
        record_many = getattr(self.tracker, "record_many", None)
        release_many = getattr(self.tracker, "release_many", None)
        if record_many is None or release_many is None or len(outcomes) < 2:
            for spec, record in outcomes:
                self.finish(spec, record)
            return
        for spec, record in outcomes:
            self.on(spec, OUTCOME_EVENTS[record.outcome])  # -> STORE
        record_many([record.to_dict() for _, record in outcomes])
        release_many(self.token, [spec.point_key for spec, _ in outcomes])
        for spec, record in outcomes:
            self._report(spec, record, None)

    def _report(self, spec: PointSpec, record: Record, seconds: float | None) -> None:
        took = f"  ({seconds:.1f} s)" if seconds is not None else ""
        prefix = self._line(spec)
        if isinstance(record, ResultRecord):
            split = time_split(record.fields, record.totals)  # generation apart from the epochs (ddlio.phase)
            if split:
                took = f"  ({seconds:.1f} s: {split})" if seconds is not None else f"  ({split})"
            self.report.completed += 1
            self.report.final[spec.point_key] = State.COMPLETED.value
            self.echo(f"{prefix}: {result_line(record)}{took}")
        else:
            self._failed(spec, prefix, record.error, took)

    def adopt(self, spec: PointSpec, row: dict[str, Any]) -> None:
        """Report the outcome another driver stored for a point this one asked for, as this call's own."""
        self.report.followed += 1
        self.on(spec, Event.ADOPT_RESULT if row["status"] == "completed" else Event.ADOPT_FAILURE)  # -> REPORT
        prefix = self._line(spec)
        if row["status"] == "completed":
            self.report.completed += 1
            self.report.final[spec.point_key] = State.COMPLETED.value
            self.echo(f"{prefix}: {adopted_line(row)}")
        else:
            self._failed(spec, prefix, row.get("error") or "", " (measured by another driver)")

    def _line(self, spec: PointSpec) -> str:
        self.done += 1
        expected = self.report.total - self.report.skipped - self.report.not_retried
        return f"[{self.done}/{max(expected, self.done)}] {self.report.label(spec)}"

    def _failed(self, spec: PointSpec, prefix: str, error: str, took: str) -> None:
        self.report.failed += 1
        self.report.final[spec.point_key] = self.state(spec).value  # failed, or lost
        first = first_line(error)
        self.report.failures.append((spec.point_key, first))
        self.echo(f"{prefix}: FAILED: {first}{took}")


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
    report = SweepReport(total=len(points), labels=point_labels(points))
    driver = Driver(tracker, report, echo)
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


class Executors(dict):
    """The executors a round needs, by name: those of its points, and any other made when first asked for (an
    earlier driver's job of another executor to harvest). A local sweep never imports the Slurm side."""

    @classmethod
    def of(cls, points: Sequence[PointSpec]) -> Executors:
        """The executors of ``points``, in the registry's order (local points run before Slurm ones go out)."""
        names = {s.cluster.executor for s in points}
        return cls((name, executor_for(name)) for name in EXECUTORS if name in names)

    def __missing__(self, name: str) -> Executor:
        self[name] = executor_for(name)
        return self[name]


def _round(points: Sequence[PointSpec], force: bool, retry_failed: bool, wait: bool,
           driver: Driver) -> list[PointSpec]:
    """Plan, measure and wait for ``points`` once; return those to plan again (see :func:`_follow`)."""
    report, echo = driver.report, driver.echo
    skipped, not_retried = report.skipped, report.not_retried
    executors = Executors.of(points)
    planned = plan(points, force, retry_failed, driver, executors)
    if report.skipped > skipped:
        echo(f"{report.skipped - skipped} of {len(points)} points already measured: skipped "
             "(force=true re-measures)")
    if report.not_retried > not_retried:
        echo(f"{report.not_retried - not_retried} failed point(s) not retried (retry_failed=false)")
    if planned.attach:
        report.reattached += len(planned.attach)
        echo(f"re-attached to {len(planned.attach)} job(s) still queued or running")
    out = [(ex, _submit(ex, planned.submit, planned.attach, driver)) for ex in executors.values()]
    out = [(ex, sub) for ex, sub in out if sub.pending or sub.held]
    if wait:
        for ex, sub in out:
            try:
                ex.wait(sub.pending, sub.held, driver)
            except KeyboardInterrupt:
                echo("interrupted: the jobs go on; run the same command again to store their results")
                raise
    else:
        _left_out(out, driver)
    if not wait and planned.follow:
        report.still_running += len(planned.follow)
        echo(f"{len(planned.follow)} point(s) are being measured by another driver (not waited for: wait=false)")
        return []
    return _follow(planned.follow, driver)


def _submit(ex: Executor, specs: Sequence[PointSpec], attach: Sequence[Any], driver: Driver) -> Submitted:
    """Hand the executor its points (and its re-attached jobs); points a site limit holds back become HELD."""
    mine = [s for s in specs if s.cluster.executor == ex.name]
    live = [p for p in attach if p.spec.cluster.executor == ex.name]
    if not mine and not live:
        return Submitted()
    sub = ex.submit(mine, live, driver)
    for spec in sub.held:
        driver.on(spec, Event.LIMITED)
    if sub.held:
        driver.echo(f"{len(sub.held)} point(s) held by a site limit ({sub.held_reason}): they are submitted as the "
                    "sweep's jobs end and free slots")
    return sub


def _left_out(out: Sequence[tuple[Executor, Submitted]], driver: Driver) -> None:
    """wait=false: say what is still out."""
    pending = sum(len(sub.pending) for _, sub in out)
    held = sum(len(sub.held) for _, sub in out)
    if pending:
        driver.report.still_running += pending
        driver.echo(f"{pending} job(s) queued or running: run the same command again (without wait=false) "
                    "to store their results")
    if held:
        driver.echo(f"{held} point(s) held by a site limit were not submitted: run the same command again to "
                    "submit them")


def _follow(follow: list[Follow], driver: Driver) -> list[PointSpec]:
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


def new_sweep_id() -> str:
    """A new sweep's id: its start time and six random hex digits (``20261201-215500-1a2b3c``)."""
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


# ------------------------------------------------------------------------------------------ planning a round
@dataclass
class Follow:
    """A point another live driver holds: wait for the outcome it stores."""

    spec: PointSpec
    token: str
    seen: tuple[Any, Any]  # (attempts, finished_utc) when first seen: an outcome is new when these changed


@dataclass
class Plan:
    """A round's plan: points to submit, jobs to wait for, points to follow, jobs to harvest (by executor)."""

    submit: list[PointSpec] = field(default_factory=list)
    attach: list[Pending] = field(default_factory=list)
    follow: list[Follow] = field(default_factory=list)
    harvest: dict[str, list[Harvest]] = field(default_factory=dict)

    def measure(self, spec: PointSpec, driver: Driver) -> None:
        if driver.on(spec, Event.MEASURE) is Action.SUBMIT:
            self.submit.append(spec)


def plan(points: Sequence[PointSpec], force: bool, retry_failed: bool, driver: Driver,
         executors: Mapping[str, Executor]) -> Plan:
    """Sort the points by the life cycle (see the module); returns the round's :class:`Plan`."""
    out = Plan()
    bulk = _claim_all(points, force, driver)
    for spec in points:
        _plan_point(spec, force, retry_failed, driver, out, bulk)
    for name, jobs in out.harvest.items():
        got = executors[name].harvest(jobs, driver)
        out.attach += got.pending
        for spec in got.again:
            out.measure(spec, driver)
    return out


@dataclass
class Bulk:
    """A round's store reads and claims done for all its points at once (:func:`_claim_all`): each point's row
    before the claim, the keys this driver now holds and their rows after the claim."""

    first: dict[str, dict[str, Any]]
    taken: set[str]
    after: dict[str, dict[str, Any]]
    used: set[str] = field(default_factory=set)  # keys planned from it (a key met twice is planned one by one)


def _skips(row: dict[str, Any] | None, forced: bool) -> bool:
    """A point measured already, and no driver holds it: skipped unless forced."""
    return stored_state(row) is State.COMPLETED and not (row or {}).get("claim_token") and not forced


def _claim_all(points: Sequence[PointSpec], force: bool, driver: Driver) -> Bulk | None:
    """Look up every point and claim those to plan in a few store transactions (None when the tracker has no
    batched calls: then each point is looked up and claimed on its own). The claims are the same conditional
    UPDATE as one point's; a point another driver holds is left to :meth:`Driver.take`, one by one."""
    tracker = driver.tracker
    lookup_many, claim_many = getattr(tracker, "lookup_many", None), getattr(tracker, "claim_many", None)
    if lookup_many is None or claim_many is None or len(points) < 2:
        return None
    first = lookup_many([s.point_key for s in points])
    todo = {s.point_key: s for s in points if not _skips(first.get(s.point_key), force or s.force)}
    taken = claim_many([s.to_dict() for s in todo.values()], driver.token, driver.host, driver.pid) if todo else set()
    return Bulk(first, set(taken), lookup_many(sorted(taken)) if taken else {})


def _plan_point(spec: PointSpec, force: bool, retry_failed: bool, driver: Driver, out: Plan,
                bulk: Bulk | None = None) -> None:
    key = spec.point_key
    fresh = bulk is not None and key not in bulk.used
    if fresh:
        bulk.used.add(key)
    first = bulk.first.get(key) if fresh else driver.tracker.lookup(key)
    forced = force or spec.force
    if _skips(first, forced):
        driver.report.skipped += 1
        return
    seen = (first.get("attempts"), first.get("finished_utc")) if first else (None, None)
    row = bulk.after.get(key) or {} if fresh and key in bulk.taken else _take(spec, seen, driver, out)
    if row is None:
        return
    state = stored_state(row)
    driver.begin(spec, state)
    ended = state in (State.COMPLETED, State.FAILED, State.LOST)
    if ended and first is not None and (row.get("attempts"), row.get("finished_utc")) != seen:
        driver.release(spec)  # another driver measured it between our two looks: its outcome is ours
        driver.adopt(spec, row)
        return
    rd = Path(row.get("run_dir") or run_dir_for(spec, driver.store_id))
    if state is State.SUBMITTED:
        # a job of an earlier driver went out and was not harvested: harvest it or re-attach, never resubmit
        job = Harvest(spec, str(row.get("job_id")), rd, retry_failed and row.get("status") != "completed", forced)
        name = job_info(rd).get("executor")
        if name in EXECUTORS:
            out.harvest.setdefault(name, []).append(job)
        else:
            _harvest_unnoted(job, driver, out)
    elif state is State.NEW or forced:
        out.measure(spec, driver)
    elif state is State.COMPLETED:
        driver.release(spec)
        driver.report.skipped += 1
    else:  # failed or lost: a result may still have landed after the driver gave up on it
        record = read_record(rd)
        if isinstance(record, ResultRecord):
            driver.finish(spec, record)
        elif retry_failed:
            out.measure(spec, driver)
        else:
            driver.release(spec)
            driver.report.not_retried += 1


def _take(spec: PointSpec, seen: tuple[Any, Any], driver: Driver, out: Plan) -> dict[str, Any] | None:
    """Claim one point (:meth:`Driver.take`): its row under this driver's claim, or None when another live driver
    holds it (then it is followed)."""
    holder = driver.take(spec)
    if holder is not None:
        driver.begin(spec, stored_state(holder))
        if driver.on(spec, Event.OTHER_DRIVER) is Action.FOLLOW:
            out.follow.append(Follow(spec, holder["claim_token"], seen))
        return None
    return driver.tracker.lookup(spec.point_key) or {}


def _harvest_unnoted(job: Harvest, driver: Driver, out: Plan) -> None:
    """A job whose run folder does not say which executor ran it: its record, else it is lost (measured again
    when retried or forced)."""
    record = read_record(job.run_dir)
    again = isinstance(record, FailureRecord) and job.retry
    if record is None:
        record, again = driver.lost(job.spec, job.job_id, "LOST", job.run_dir), job.retry or job.forced
    driver.finish(job.spec, record, keep=again)
    if again:
        out.measure(job.spec, driver)


def dry_run(points: Sequence[PointSpec], echo: Callable[[str], None] = print, store_id: str = "") -> None:
    """Print what :func:`~experiments.run.driver.launch` would submit (points, resources, and for Slurm the whole
    job script sbatch would receive) and write nothing."""
    from experiments.executors.slurm import resources  # lazy: a sweep that runs its points never needs it

    echo(f"dry run: {len(points)} point(s), nothing is submitted or written")
    groups: dict[tuple, list[PointSpec]] = {}
    for spec in points:
        groups.setdefault((*resources(spec), spec.cluster.executor), []).append(spec)
    for group in groups.values():
        first = group[0]
        c = first.cluster
        head, *more = executor_for(c.executor).describe(group)
        echo(f"\n{head}: {first.nodes} node(s) x {first.ppn} rank(s), time limit {c.timeout_min} min")
        for line in more:
            echo(line)
        for spec in group:
            step = spec.cluster.launch.format(ranks=spec.ranks, nodes=spec.nodes, ppn=spec.ppn)
            label = spec.label if spec.kind == "train" else f"{spec.kind} {spec.label}"
            echo(f"  - {label}  key {spec.point_key}  [{' '.join(spec.overrides) or 'defaults'}]")
            if spec.kind != "train":  # another workload kind: what it will do, in its own words
                echo(f"      {spec.kind}: {KINDS[spec.kind]().describe(spec) or step}")
                continue
            kernel = RunPaths.of(spec.data_root, spec.point_key, store_id).kernel_spec
            echo(f"      kernel: {step} python -m experiments.kernel {kernel}")
            if is_mlperf(spec.workload.name) or spec.accelerator:  # MLPerf's numbers, as the preset gave them
                for line in describe_mlperf(spec):
                    echo(f"      {line}")
    hours = sum(spec.nodes * float(spec.cluster.timeout_min) for spec in points) / 60
    echo(f"\nasked for: {hours:.4g} node-hour(s) at most (nodes x time limit, summed over {len(points)} point(s))")
