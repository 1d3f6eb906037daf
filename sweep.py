#!/usr/bin/env python
"""ddlio's entry point: compose points from ``conf/`` with Hydra overrides, validate all of them, then measure.

    python sweep.py                                        # one default point
    python sweep.py -m format=hdf5,tfrecord stripe=1,4,16  # a sweep: the Cartesian product, 6 points

Hydra composes one config per point (multirun = every combination). ddlio first validates every point (so a bad
value is reported before any job is submitted or byte written), then hands them to ``experiments.launch`` with
the results store, which skips what is already measured and records everything else as it finishes.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from experiments.config import register_configs

register_configs()


def _scratch() -> str:
    """Hydra's own scratch directory, private to the user: in a multirun Hydra saves the composed config there
    (multirun.yaml), a db password included."""
    path = os.path.join(tempfile.gettempdir(), f"ddlio-hydra-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


OmegaConf.register_new_resolver("ddlio_scratch", _scratch, replace=True)

def _compose_each_point_once() -> None:
    """Hydra's sweeper composes every point once to check it, then its launcher composes it again to run it,
    because a launcher may compose on another machine. Here the launcher is Hydra's in-process one and the task
    only collects, so its composition checks just as early (a bad override still stops the sweep before anything
    runs). Skipping the first halves the time to compose a sweep (~85 ms per point here)."""
    from hydra.plugins.sweeper import Sweeper

    Sweeper.validate_batch_is_legal = lambda self, batch: None  # type: ignore[method-assign]


_compose_each_point_once()

#: (composed config, its overrides) for every point Hydra composed in this run
_COMPOSED: list[tuple[dict[str, Any], tuple[str, ...]]] = []


@hydra.main(version_base=None, config_path="conf", config_name="config")
def _compose(cfg: DictConfig) -> None:
    """Called by Hydra once per point; only collects: nothing runs until every point has been validated."""
    from hydra.core.hydra_config import HydraConfig

    overrides = tuple(HydraConfig.get().overrides.task)
    _COMPOSED.append((OmegaConf.to_container(cfg, resolve=True), overrides))  # type: ignore[arg-type]


def _validate_all(cwd: str) -> list[Any]:
    """Validate every composed point; raise one ConfigError naming each distinct problem (and its points)."""
    from experiments.config import validate
    from experiments.errors import ConfigError

    specs, seen = [], {}
    for cfg, overrides in _COMPOSED:
        try:
            specs.append(validate(cfg, cwd, overrides))
        except ConfigError as e:
            for p in e.problems:
                seen.setdefault(p, []).append(" ".join(overrides) or "(defaults)")
    if seen:
        problems = []
        for p, where in seen.items():
            problems.append(p if len(where) == len(_COMPOSED) else f"{p}  [in: {'; '.join(where[:3])}" +
                            (f" and {len(where) - 3} more]" if len(where) > 3 else "]"))
        raise ConfigError(problems)
    seen_keys: dict[str, Any] = {}
    unique = []
    for s, (_, overrides) in zip(specs, _COMPOSED, strict=True):
        first = seen_keys.setdefault(s.point_key, overrides)
        if first is overrides:
            unique.append(s)
        else:
            print(f"note: [{' '.join(overrides)}] is the same measurement as [{' '.join(first)}]: measured once "
                  "(the overrides that differ do not change what is measured)", file=sys.stderr)
    specs = unique
    dbs = {s.db for s in specs}
    if len(dbs) > 1:
        raise ConfigError(
            f"all points of a sweep go to one store, but db takes {len(dbs)} values: {', '.join(sorted(dbs))}"
        )
    _check_free_space(specs)
    return specs


def _check_free_space(specs: list[Any]) -> None:
    """The new datasets of the sweep (those without a manifest yet) and flush files must fit in the free space."""
    from experiments.dataset import DatasetPlan, load_manifest
    from experiments.errors import ConfigError
    from experiments.kernel import flush_path
    from experiments.units import format_size
    from lustre.fs import fs_info

    need: dict[str, int] = {}
    for s in specs:
        plan = DatasetPlan.from_point(s)
        if plan.key not in need and load_manifest(plan) is None:
            need[plan.key] = s.planned_bytes()
        flush = flush_path(s.to_dict())
        if flush is not None and not flush[0].exists():
            need[str(flush[0])] = flush[1]  # the storage_cold flush file, written once
    total = sum(need.values())
    if total:
        fs = fs_info(specs[0].data_root)
        if total > fs.free_bytes:
            raise ConfigError(
                f"the sweep's {len(need)} new datasets need {format_size(total)}, "
                f"but only {format_size(fs.free_bytes)} "
                f"is free on {fs.mount_point} (data_root={specs[0].data_root}): lower workload.samples or "
                "workload.sample_size, sweep fewer points, or use another data_root"
            )


def _warn_striping(specs: list[Any]) -> None:
    off = [s for s in specs if not s.striping_applicable]
    if off and len({(s.stripe_count, s.stripe_size) for s in off}) > 1:
        print(
            f"warning: data_root is on {off[0].fs_type}, not Lustre: stripe/stripe_size are recorded but not applied, "
            "and points that differ only in striping share one dataset",
            file=sys.stderr,
        )


def main() -> int:
    from experiments.errors import DdlioError

    cwd = os.getcwd()
    _compose()
    if not _COMPOSED:  # --help, --cfg, --info ...: Hydra already answered
        return 0
    try:
        specs = _validate_all(cwd)
    except DdlioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    _warn_striping(specs)
    driver = _COMPOSED[0][0]
    from analysis.store import check_store
    from experiments.secrets import driver_db, mask

    db = driver_db(driver, cwd)  # the points carry it masked; only this process sees the password
    try:
        check_store(db, write=True)  # dialect, driver, server, writable, schema version: before anything is written
    except DdlioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if driver.get("order") == "random":  # seeded, so a rerun keeps the order; nothing measured depends on it
        import random

        random.Random(int(driver.get("seed", 0))).shuffle(specs)
    unrunnable = ""
    if any(s.cluster["executor"] == "slurm" for s in specs):
        from experiments.slurm import check_available, check_runnable

        try:
            if not driver.get("dry_run"):
                check_available()
            unrunnable = check_runnable(specs, print if driver.get("dry_run") else lambda m: print(m, file=sys.stderr),
                                        dry_run=bool(driver.get("dry_run")))
        except DdlioError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    if driver.get("dry_run"):
        from analysis.store import store_id
        from experiments.launch import dry_run

        dry_run(specs, print, store_id(specs[0].db))
        if unrunnable:  # the plan is shown, and so is why it would be refused
            print(f"error: {unrunnable}", file=sys.stderr)
            return 2
        return 0

    from analysis.store import Store
    from experiments.launch import launch, new_sweep_id

    try:
        store = Store(db)
    except DdlioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    force = any(s.force for s in specs)
    done = set() if force else {s.point_key for s in specs if store.is_done(s.point_key)}
    store.begin_sweep(new_sweep_id(), sys.argv, [s.to_dict() for s in specs], done)
    print(f"ddlio: {len(specs)} point{'s' if len(specs) != 1 else ''} -> {mask(db)}")
    try:
        report = launch(specs, store, force=force, wait=bool(driver.get("wait", True)),
                        retry_failed=bool(driver.get("retry_failed", True)))
    except DdlioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: what finished is stored; run the same command again to resume", file=sys.stderr)
        return 130
    store.end_sweep(report.completed, report.failed)
    if report.failed_points:
        print(f"{len(report.failed_points)} point(s) failed; their errors are in the store "
              "(python -m analysis summary). A rerun retries them.", file=sys.stderr)
        return 1
    return 0


def run() -> int:
    """``main()`` as a command: no traceback reaches the user unless ``DDLIO_TRACEBACK=1`` asks for it."""
    try:
        return main()
    except BrokenPipeError:  # output piped into head & co.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if os.environ.get("DDLIO_TRACEBACK") == "1":
            raise
        from experiments.errors import DdlioError

        if isinstance(e, DdlioError):
            print(f"error: {e}", file=sys.stderr)
            return 2
        from experiments.secrets import mask

        print(mask(f"error: {type(e).__name__}: {e}".splitlines()[0][:500]), file=sys.stderr)
        print("(an unexpected error in ddlio; set DDLIO_TRACEBACK=1 to see the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(run())
