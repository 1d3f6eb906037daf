"""Planning a sweep round by the life cycle (:mod:`experiments.run.lifecycle`): skip the measured; claim the
others in the store (a point another live driver holds is followed, not measured); under the claim start from the
state the store holds: harvest or re-attach to a job that went out (its executor's :meth:`harvest`), and measure
what is new, failed or lost (or forced). And :func:`dry_run`: what a sweep would submit."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddlio.records import FailureRecord, ResultRecord, read_record
from ddlio.runpaths import RunPaths
from experiments.config import PointSpec
from experiments.executors import EXECUTORS, Executor, Harvest, Pending, executor_for
from experiments.run.lifecycle import Action, Event, State, stored_state
from experiments.run.records import job_info, run_dir_for

if TYPE_CHECKING:
    from experiments.run.driver import Driver


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
            echo(f"  - {spec.label}  key {spec.point_key}  [{' '.join(spec.overrides) or 'defaults'}]")
            kernel = RunPaths.of(spec.data_root, spec.point_key, store_id).kernel_spec
            echo(f"      kernel: {step} python -m experiments.kernel {kernel}")
