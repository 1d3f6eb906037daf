"""A batch of composed points, checked as one before anything runs.

Hydra composes one config per point; :func:`validate_batch` checks them all and reports every distinct problem
once (naming the points it occurs in), folds points that are the same measurement into one, and checks that the
new datasets fit in the free space. Nothing is submitted or written until the whole batch passes.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddlio.errors import ConfigError
from ddlio.evidence import objective_of
from ddlio.secrets import driver_db, mask
from ddlio.store import check_store, open_store_for_writing, store_id
from ddlio.units import format_size
from experiments.config import PointSpec
from experiments.config.validate import validate
from experiments.dataset import DatasetPlan, load_manifest
from experiments.kernel import flush_path
from experiments.kernel.cache import flush_file_problem
from experiments.run.driver import dry_run, launch, new_sweep_id
from lustre.fs import facts_held, fs_info


@dataclass
class Batch:
    """The validated batch: ``specs[i]`` is composed point ``i``; ``unique`` holds each measurement once."""

    specs: list[PointSpec]
    unique: list[PointSpec]


def validate_batch(composed: Sequence[tuple[dict[str, Any], tuple[str, ...]]], cwd: str,
                   echo: Any = None) -> Batch:
    """Validate every ``(config, overrides)``; raise one :class:`ConfigError` naming each distinct problem (and
    the points it occurs in, unless all). Points that are the same measurement are measured once (a note says
    so on ``echo``, stderr by default)."""
    note = echo or (lambda m: print(m, file=sys.stderr))
    specs: list[PointSpec] = []
    seen: dict[str, list[str]] = {}
    with facts_held():  # file-system facts asked once per path for the whole batch
        for cfg, overrides in composed:
            try:
                specs.append(validate(cfg, cwd, overrides))
            except ConfigError as e:
                for p in e.problems:
                    seen.setdefault(p, []).append(" ".join(overrides) or "(defaults)")
    if seen:
        problems = []
        for p, where in seen.items():
            problems.append(p if len(where) == len(composed) else f"{p}  [in: {'; '.join(where[:3])}" +
                            (f" and {len(where) - 3} more]" if len(where) > 3 else "]"))
        raise ConfigError(problems)
    first_of: dict[str, tuple[str, ...]] = {}
    unique = []
    for s, (_, overrides) in zip(specs, composed, strict=True):
        first = first_of.setdefault(s.point_key, overrides)
        if first is overrides:
            unique.append(s)
        else:
            note(f"note: [{' '.join(overrides)}] is the same measurement as [{' '.join(first)}]: measured once "
                 "(the overrides that differ do not change what is measured)")
    dbs = {s.db for s in unique}
    if len(dbs) > 1:
        raise ConfigError(
            f"all points of a sweep go to one store, but db takes {len(dbs)} values: {', '.join(sorted(dbs))}"
        )
    with facts_held():
        check_free_space(unique)
    return Batch(specs, unique)


def check_free_space(specs: Sequence[PointSpec]) -> None:
    """The new datasets of the sweep (those without a manifest yet) and flush files must fit in the free space;
    the message names what does not fit (the storage_cold flush file by its key, workload.flush_size)."""
    datasets: dict[str, int] = {}
    flushes: dict[str, int] = {}
    for s in specs:
        plan = DatasetPlan.from_point(s)
        if plan.key not in datasets and load_manifest(plan) is None:
            datasets[plan.key] = s.planned_bytes()
        flush = flush_path(s)
        problem = flush_file_problem(*flush) if flush is not None else None
        if problem is not None:
            raise ConfigError(problem)  # before any job: a flush file ddlio did not write is never replaced
        if flush is not None and not flush[0].exists():
            flushes[str(flush[0])] = flush[1]  # the storage_cold flush file, written once
    total = sum(datasets.values()) + sum(flushes.values())
    if not total:
        return
    fs = fs_info(specs[0].data_root)
    if total <= fs.free_bytes:
        return
    free = f"only {format_size(fs.free_bytes)} is free on {fs.mount_point} (data_root={specs[0].data_root})"
    parts = []
    if datasets:
        parts.append(f"the sweep's {len(datasets)} new datasets need {format_size(sum(datasets.values()))}")
    if flushes:
        sizes = ", ".join(sorted({format_size(n) for n in flushes.values()}))
        parts.append(f"the storage_cold flush file{'s' if len(flushes) > 1 else ''} (workload.flush_size={sizes}) "
                     f"need{'' if len(flushes) > 1 else 's'} {format_size(sum(flushes.values()))}")
    fixes = []
    flush_alone, data_alone = sum(flushes.values()) > fs.free_bytes, sum(datasets.values()) > fs.free_bytes
    if flushes and not data_alone:
        fixes.append("lower workload.flush_size (it must still exceed the caches below the client)")
    if datasets and not flush_alone:
        fixes.append("lower workload.samples or workload.sample_size, sweep fewer points")
    raise ConfigError(f"{' and '.join(parts)}, but {free}: {', or '.join(fixes)}, or use another data_root")


def warn_striping(specs: Sequence[PointSpec]) -> None:
    """Say once that striping is recorded but not applied when data_root is not on Lustre."""
    off = [s for s in specs if not s.layout.striping_applicable]
    if off and len({(s.layout.stripe_count, s.layout.stripe_size) for s in off}) > 1:
        print(
            f"warning: data_root is on {off[0].layout.fs_type}, not Lustre: stripe/stripe_size are recorded but not "
            "applied, and points that differ only in striping share one dataset",
            file=sys.stderr,
        )


@dataclass
class Outcome:
    """What one composed point came to: ``status`` is completed | failed | pending (its job is still out,
    wait=false) | planned (dry_run); ``value`` is its objective when completed."""

    spec: PointSpec
    status: str
    value: float | None = None
    #: the store it is in, unmasked (``spec.db`` is masked): for the evidence printed at the end of a search
    db: str = ""
    #: its timed I/O, seconds (the slowest rank's, ``io_time_slowest_s``; None where not stored): a point under
    #: :data:`ddlio.evidence.MIN_IO_S` is invalid and counts in no "best"
    io_s: float | None = None
    #: the objective ``value`` is (``objective=auto`` resolved: ``au`` with a compute time, else
    #: ``bandwidth_mib_s``; :func:`ddlio.evidence.objective_of`)
    objective: str = ""
    #: its read bandwidth (MiB/s) and accelerator utilisation (0-1), whatever the objective: AU ties are broken by
    #: bandwidth, and a point with a compute time is said fed or starved
    bandwidth: float | None = None
    au: float | None = None


def run_batch(composed: Sequence[tuple[dict[str, Any], tuple[str, ...]]], cwd: str,
              echo: Any = print, tried: set[str] | None = None) -> list[Outcome]:
    """Validate the whole batch, then measure it: skip what the store holds, measure every other point once
    (locally, or on Slurm with equal resources sharing an array), store each result as it lands, and return
    one :class:`Outcome` per composed point, in order. A point already measured returns its stored objective.
    ``tried`` holds the point keys measured (or attempted) earlier in the same run, e.g. by an earlier batch of a
    search: they are answered from the store, a failed one is not measured again until the next run; the keys
    this batch measures are added to it.

    Raises :class:`~ddlio.errors.DdlioError` for bad input (nothing has run then) and lets
    ``KeyboardInterrupt`` through (what finished is stored)."""
    tried = set() if tried is None else tried
    batch = validate_batch(composed, cwd)
    specs, driver = batch.unique, composed[0][0]
    asked = [str(cfg.get("objective", "auto")) for cfg, _ in composed]
    # a training step's compute time makes AU the answer (objective=auto); a checkpoint point has no AU
    objectives = [objective_of(o, s.workload.compute_time if s.kind == "train" else 0)
                  for o, s in zip(asked, batch.specs, strict=True)]
    warn_striping(specs)
    db = driver_db(driver, cwd)  # the points carry it masked; only this process sees the password
    check_store(db, write=True)  # dialect, driver, server, writable, schema version: before anything is written
    if driver.get("order") == "random":  # seeded, so a rerun keeps the order; nothing measured depends on it
        specs = list(specs)
        random.Random(int(driver.get("seed", 0))).shuffle(specs)
    dry = bool(driver.get("dry_run"))
    unrunnable = ""
    if any(s.cluster.executor == "slurm" for s in specs):
        from experiments.executors.slurm import check_available, check_runnable  # lazy: Slurm points only

        if not dry:
            check_available()
        unrunnable = check_runnable(specs, echo if dry else lambda m: print(m, file=sys.stderr), dry_run=dry)
    if dry:
        dry_run(specs, echo, store_id(specs[0].db))
        if unrunnable:  # the plan is shown, and so is why it would be refused
            raise ConfigError(unrunnable)
        return [Outcome(s, "planned") for s in batch.specs]

    store = open_store_for_writing(db)
    try:
        fresh = [s for s in specs if s.point_key not in tried]
        earlier: dict[str, tuple[str, str]] = {}
        if fresh:
            force = any(s.force for s in fresh)
            if not force and not driver.get("remeasure_earlier"):
                earlier = measured_earlier(store, fresh)
            measure = [s for s in fresh if s.point_key not in earlier]
            done = set() if force else {s.point_key for s in measure if store.is_done(s.point_key)}
            points = [dict(s.to_dict(), point_key=earlier[s.point_key][0]) if s.point_key in earlier else s.to_dict()
                      for s in fresh]  # a point skipped as measured earlier is that stored point
            store.begin_sweep(new_sweep_id(), sys.argv, points, done | {k for k, _ in earlier.values()})
            echo(f"ddlio: {len(fresh)} point{'s' if len(fresh) != 1 else ''} -> {mask(db)}")
            tried.update(s.point_key for s in fresh)
            if earlier:
                say_earlier(earlier, len(fresh), echo)
            report = launch(measure, store, force=force, wait=bool(driver.get("wait", True)),
                            retry_failed=bool(driver.get("retry_failed", True)), echo=echo)
            store.end_sweep(report.completed, report.failed)
            if report.failed_points:
                print(f"{len(report.failed_points)} point(s) failed; their errors are in the store "
                      "(python -m analysis summary). A rerun retries them.", file=sys.stderr)
        if len(fresh) < len(specs):
            echo(f"{len(specs) - len(fresh)} point(s) already tried in this run: answered from the store")
        key_of = {s.point_key: earlier.get(s.point_key, (s.point_key, ""))[0] for s in specs}
        stored = store.totals(set(key_of.values()), {*objectives, "io_time_slowest_s", "bandwidth_mib_s", "au"})
        out = []
        for s, objective in zip(batch.specs, objectives, strict=True):
            status, totals = stored.get(key_of.get(s.point_key, s.point_key), ("", {}))
            if status == "completed" and totals.get(objective) is not None:
                io, bw, au = (totals.get(c) for c in ("io_time_slowest_s", "bandwidth_mib_s", "au"))
                out.append(Outcome(s, "completed", float(totals[objective]), db=db,
                                   io_s=None if io is None else float(io), objective=objective,
                                   bandwidth=None if bw is None else float(bw), au=None if au is None else float(au)))
            else:
                out.append(Outcome(s, "failed" if status == "failed" else "pending", db=db, objective=objective))
        return out
    finally:
        store.close()


def measured_earlier(store: Any, specs: Sequence[PointSpec]) -> dict[str, tuple[str, str]]:
    """``{point_key: (stored key, how its method differs)}`` for the points the store does not hold under today's
    key but holds, completed, under the key an earlier ddlio gave the same measurement by an earlier method
    (:meth:`PointSpec.earlier_keys`): such a point is skipped, as any measured point is."""
    out: dict[str, tuple[str, str]] = {}
    for s in specs:
        if store.lookup(s.point_key) is not None:
            continue  # today's key is in the store (completed, failed or claimed): the driver's to handle
        for key, how in s.earlier_keys().items():
            if store.is_done(key):
                out[s.point_key] = (key, how)
                break
    return out


def say_earlier(earlier: dict[str, tuple[str, str]], total: int, echo: Any) -> None:
    """The lines a sweep prints for points skipped as measured by an earlier method: how many, how the method
    differs, and how to re-measure them."""
    n = len(earlier)
    echo(f"{n} of {total} points already measured: skipped (force=true re-measures)")
    for how in sorted({h for _, h in earlier.values()}):
        k = sum(1 for _, h in earlier.values() if h == how)
        echo(f"  {k} of them measured by an earlier method: {how}")
    echo("  remeasure_earlier=true measures them again by today's method (force=true: every point); the earlier "
         "measurements stay in the store, told apart by their settle column (python -m analysis summary)")

