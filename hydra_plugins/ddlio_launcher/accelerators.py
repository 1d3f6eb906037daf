"""``hydra/sweeper=accelerators``: the most accelerators (MPI ranks, one accelerator each) a configuration keeps at
AU ≥ a floor, found by galloping and bisection over the rank count (:mod:`ddlio.feeds`)
instead of a grid over every count. The rest of the command line fixes the configuration, or gives a grid of them
(comma lists): each is searched in turn. Every point goes through ddlio's launcher with ``objective=au``, so it is
stored, and a rerun answers from the store without measuring.

    python sweep.py -m hydra/sweeper=accelerators hydra.sweeper.max=64 workload.compute_time=0.1 format=hdf5,npz
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from functools import partial
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from ddlio.errors import ConfigError, DdlioError
from ddlio.secrets import driver_db

#: hydra.sweeper.axis: what the count grows: ranks of one node, nodes (of ``ppn`` ranks), or ranks of one node up
#: to ``per_node`` and then nodes of ``per_node`` ranks
AXES = ("ppn", "nodes", "ppn_then_nodes")
#: the keys each axis sets on every point (the command line may not set them)
AXIS_KEYS = {"ppn": ("ppn",), "nodes": ("nodes",), "ppn_then_nodes": ("ppn", "nodes")}


def settings_problems(axis: Any, most: Any, au: Any, repeats: Any, per_node: Any) -> list[str]:
    """Every problem of the sweeper's own settings (``hydra.sweeper.*``), each naming the valid values."""
    problems = []
    if axis not in AXES:
        problems.append(f"hydra.sweeper.axis={axis!r} is not one of {' | '.join(AXES)}")
    for key, value in (("max", most), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"hydra.sweeper.{key}={value!r} is out of range: must be an integer >= 1")
    if au is not None and (isinstance(au, bool) or not isinstance(au, (int, float)) or not 0 < au <= 1):
        problems.append(f"hydra.sweeper.au={au!r} is out of range: an accelerator utilisation in (0, 1], "
                        "or null for the workload's workload.au_floor")
    if axis == "ppn_then_nodes" and (isinstance(per_node, bool) or not isinstance(per_node, int) or per_node < 1):
        problems.append(f"hydra.sweeper.per_node={per_node!r}: axis=ppn_then_nodes needs the ranks a node holds "
                        "(an integer >= 1, e.g. its accelerators)")
    return problems


def steps_of(axis: str, most: int, nodes: int, ppn: int, per_node: int) -> list[tuple[int, dict[str, int]]]:
    """The counts the search walks, increasing, each as (accelerators = nodes x ppn, the overrides that set it),
    up to ``most`` accelerators: ``ppn`` 1, 2, ... on ``nodes`` fixed nodes; ``nodes`` 1, 2, ... of ``ppn`` fixed
    ranks; ``ppn_then_nodes`` ppn 1..per_node on one node, then nodes 2, 3, ... of per_node ranks."""
    if axis == "ppn":
        return [(nodes * p, {"ppn": p}) for p in range(1, most // nodes + 1)]
    if axis == "nodes":
        return [(n * ppn, {"nodes": n}) for n in range(1, most // ppn + 1)]
    one = [(p, {"nodes": 1, "ppn": p}) for p in range(1, min(per_node, most) + 1)]
    return one + [(n * per_node, {"nodes": n, "ppn": per_node}) for n in range(2, most // per_node + 1)]


class AcceleratorsSweeper(Sweeper):
    """Searches, for each configuration of the command line, the most accelerators kept at AU ≥ ``au`` (see the
    module's docstring); ``max`` is the most accelerators (ranks in all) tried, ``repeats`` the repetitions at the
    boundary. ``params`` and ``direction`` are accepted as the grid's (``direction`` is ignored: AU is maximised)."""

    def __init__(self, axis: str = "ppn", max: int = 8, au: float | None = None, repeats: int = 3,
                 per_node: int = 0, params: dict[str, str] | None = None, direction: str = "maximize") -> None:
        self.axis, self.most, self.au, self.repeats, self.per_node = axis, max, au, repeats, per_node
        self.params = dict(params or {})
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Launcher | None = None
        self.job_idx = 0
        #: each configuration's :class:`ddlio.feeds.Answer`, once searched
        self.answers: list[Any] = []

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        problems = settings_problems(self.axis, self.most, self.au, self.repeats, self.per_node)
        if problems:
            raise ConfigError(problems)  # sweep.py: one message, exit 2, before anything runs
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.hydra_context is not None and self.launcher is not None
        configurations = self._configurations([*(f"{k}={v}" for k, v in self.params.items()), *arguments])
        composed = [self._compose(c) for c in configurations]
        plans = self._plans(configurations, composed)
        if bool(composed[0].get("dry_run")):
            return self._dry_run(plans)
        before = measurements(composed[0])
        returns = self._search_all(plans)
        self._report(plans, self.answers, before, measurements(composed[0]))
        self._quiet_best()
        return returns

    def _search_all(self, plans: list[tuple[list[str], list[tuple[int, dict[str, int]]], float]]) -> list[Any]:
        """Search every configuration at once: each round replays each unfinished search (:func:`search` is
        deterministic in the values it has seen) up to the point it needs that is not measured yet, and the
        launcher gets all those points as one batch (on Slurm, arrays of equal resources). Sets ``answers``."""
        from ddlio.feeds import search  # lazy: plugin discovery stays cheap

        assert self.launcher is not None
        seen: list[dict[tuple[int, int], float | None]] = [{} for _ in plans]
        answers: list[Any] = [None] * len(plans)
        returns: list[Any] = []
        while any(a is None for a in answers):
            wanted: list[tuple[int, int, int]] = []  # (configuration, step index, repetition)
            for c, (_, steps, floor) in enumerate(plans):
                if answers[c] is None:
                    try:
                        answers[c] = search([a for a, _ in steps], partial(_replay, seen[c]), floor, self.repeats)
                    except _Unmeasured as u:
                        wanted.extend((c, u.index, r) for r in u.repetitions)
            if not wanted:
                break
            batch = [[*plans[c][0], *(f"{k}={v}" for k, v in plans[c][1][i][1].items()), f"repeat={r}",
                      "objective=au"] for c, i, r in wanted]
            results = self.launcher.launch(batch, initial_job_idx=self.job_idx)
            self.job_idx += len(batch)
            returns.append(results)
            for (c, i, r), result in zip(wanted, results, strict=True):
                seen[c][(i, r)] = result.return_value
        self.answers = answers
        return returns

    def _quiet_best(self) -> None:
        """The search's lines are its answer: ddlio's end-of-run callback (``DdlioSummary``) keeps only the failed
        points (exit status 1), not a "best of N configurations" line that would rank the counts by AU."""
        assert self.hydra_context is not None
        for cb in self.hydra_context.callbacks.callbacks:
            # by name: Hydra's scan of hydra_plugins executes this package's modules once more, so the class
            # the callback was made from need not be the one imported here
            if type(cb).__name__ == "DdlioSummary" and isinstance(getattr(cb, "outcomes", None), list):
                cb.outcomes = [(ov, o) for ov, o in cb.outcomes if o.status == "failed"]

    def _configurations(self, arguments: list[str]) -> list[list[str]]:
        """The grid of the command line's other overrides (each a list of ``key=value``); refuses what the
        sweeper sets itself."""
        assert self.hydra_context is not None
        parsed = OverridesParser.create(config_loader=self.hydra_context.config_loader).parse_overrides(arguments)
        own = {*AXIS_KEYS[self.axis], "repeat"}
        lists: dict[str, list[str]] = {}
        problems = []
        for o in parsed:
            key = o.get_key_element()
            if key in own:
                problems.append(f"{key}= is set by hydra/sweeper=accelerators (axis={self.axis}, "
                                f"repeats={self.repeats}): drop it from the command line"
                                + (" or choose another hydra.sweeper.axis" if key != "repeat" else ""))
            elif key == "objective" and o.get_value_element_as_str() != "au":
                problems.append(f"objective={o.get_value_element_as_str()}: hydra/sweeper=accelerators searches "
                                "by AU (objective=au); drop it")
            elif o.is_sweep_override():
                if not o.is_discrete_sweep():
                    problems.append(f"{key}: hydra/sweeper=accelerators takes comma lists (a grid of "
                                    "configurations), not ranges or intervals")
                    continue
                lists[key] = [f"{key}={v}" for v in o.sweep_string_iterator()]
            elif key != "objective":
                lists[key] = [f"{key}={o.get_value_element_as_str()}"]
        if problems:
            raise ConfigError(problems)
        return [list(c) for c in itertools.product(*lists.values())]

    def _compose(self, overrides: list[str]) -> DictConfig:
        assert self.hydra_context is not None and self.config is not None
        return self.hydra_context.config_loader.load_sweep_config(self.config, [*overrides, "objective=au"])

    def _plans(self, configurations: list[list[str]],
               composed: list[DictConfig]) -> list[tuple[list[str], list[tuple[int, dict[str, int]]], float]]:
        """(overrides, steps, AU floor) of each configuration; refuses, all problems at once, a configuration
        with no AU (no compute time, a checkpoint) or a range with no count in it."""
        plans, problems = [], []
        for overrides, cfg in zip(configurations, composed, strict=True):
            name = shown(overrides)
            if str(cfg.get("kind", "train")) != "train":
                problems.append(f"{name}: kind={cfg.kind} has no accelerator utilisation; "
                                "hydra/sweeper=accelerators measures training points (kind=train)")
                continue
            if not float(cfg.workload.compute_time or 0) > 0:
                problems.append(f"{name}: workload.compute_time is 0, so AU is 0 by construction: set "
                                "workload.compute_time=<seconds of accelerator compute a batch>, or calibrate it "
                                "(python -m experiments.calibrate)")
                continue
            if not bool(cfg.get("wait", True)):
                problems.append(f"{name}: wait=false: hydra/sweeper=accelerators picks each count from the AU "
                                "measured before it, so it waits for every point (drop wait=false)")
                continue
            nodes, ppn = int(cfg.nodes), int(cfg.ppn)
            steps = steps_of(self.axis, self.most, nodes, ppn, self.per_node)
            if not steps:
                problems.append(f"{name}: hydra.sweeper.max={self.most} is below one step of axis={self.axis} "
                                f"(nodes={nodes} x ppn={ppn} accelerators)")
                continue
            if max(s[1].get("nodes", nodes) for s in steps) > 1 and str(cfg.cluster.executor) != "slurm":
                problems.append(f"{name}: axis={self.axis} up to hydra.sweeper.max={self.most} needs several "
                                "nodes, which only cluster=slurm runs (locally: axis=ppn)")
                continue
            floor = float(self.au if self.au is not None else cfg.workload.get("au_floor", 0.9))
            plans.append((overrides, steps, floor))
        if problems:
            raise ConfigError(problems)
        return plans

    def _dry_run(self, plans: list[tuple[list[str], list[tuple[int, dict[str, int]]], float]]) -> Any:
        """Say what the search would do, then hand the launcher its first batch (each configuration at one
        count) as a dry run: it shows those points and stops, as for any adaptive search."""
        from ddlio.feeds import grid_size  # lazy: plugin discovery stays cheap

        assert self.launcher is not None
        for overrides, steps, floor in plans:
            counts = [a for a, _ in steps]
            print(f"dry run: {shown(overrides)}: would search the most of {counts[0]}..{counts[-1]}"
                  f" accelerators (axis={self.axis}) at AU ≥ {floor:.2f}: galloping from {counts[0]}, bisection, "
                  f"{self.repeats} repetitions of the two counts at the boundary; the grid it replaces has "
                  f"{grid_size(counts, self.repeats)} points")
        batch = [[*o, *(f"{k}={v}" for k, v in s[0][1].items()), "repeat=0", "objective=au"] for o, s, _ in plans]
        return [self.launcher.launch(batch, initial_job_idx=0)]

    def _report(self, plans: Any, answers: list[Any], before: int | None, after: int | None) -> None:
        """One line per configuration, then the points asked for against the grid's."""
        for (overrides, _, _), answer in zip(plans, answers, strict=True):
            print(f"{shown(overrides)}: {answer.line()}")
        asked, grid = sum(a.evaluations for a in answers), sum(a.grid for a in answers)
        now = "" if before is None or after is None else f"; {after - before} measured now, the rest from the store"
        n = len(answers)
        print(f"accelerators sweeper: {asked} points for {n} configuration{'s' if n > 1 else ''}, where a grid over "
              f"the same counts with {self.repeats} repetitions has {grid}{now}")


class _Unmeasured(Exception):
    """Raised by :func:`_replay` out of a search: it needs these repetitions of step ``index``, not measured yet."""

    def __init__(self, index: int, repetitions: list[int]) -> None:
        super().__init__(f"step {index}: repetitions {repetitions}")
        self.index, self.repetitions = index, repetitions


def _replay(seen: dict[tuple[int, int], float | None], index: int,
            repetitions: Sequence[int]) -> list[float | None]:
    """A search's ``measure`` answered from ``seen`` ((step index, repetition) -> AU); raises
    :class:`_Unmeasured` with what is missing."""
    missing = [r for r in repetitions if (index, r) not in seen]
    if missing:
        raise _Unmeasured(index, missing)
    return [seen[(index, r)] for r in repetitions]


def shown(overrides: Sequence[str]) -> str:
    """A configuration as its lines name it: its overrides without where things are kept (data_root, db)."""
    return " ".join(o for o in overrides if not o.startswith(("data_root=", "db=", "db_url_file=", "dry_run=")))\
        or "(defaults)"


def measurements(cfg: DictConfig) -> int | None:
    """How many outcomes the store of ``cfg`` holds (rows of its measurements table; 0: no store yet), or None
    where it cannot be read: the difference over a search is what it measured."""
    try:
        from sqlalchemy import func, select  # lazy: the store's libraries only once a search has run

        from ddlio.store.models import Measurement  # lazy: as above
        from ddlio.store.reader import open_store_for_reading  # lazy: as above

        db = driver_db({"db": cfg.db, "db_url_file": cfg.get("db_url_file", "")}, os.getcwd())
        if "://" not in db and not os.path.exists(db):
            return 0
        store = open_store_for_reading(db)
        try:
            with store.session() as s:
                return int(s.scalar(select(func.count(Measurement.id))) or 0)
        finally:
            store.close()
    except (DdlioError, OSError, ImportError):
        return None
