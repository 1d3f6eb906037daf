"""The ddlio launcher: Hydra hands it a batch of points (override lists); it composes each, validates the whole
batch, measures it (:func:`experiments.run.batch.run_batch`) and returns one ``JobReturn`` per point whose
``return_value`` is the point's objective (``objective=``, e.g. bandwidth_mib_s), or None when the point failed,
is still running (wait=false) or was only planned (dry_run). Optuna records a None as a failed trial and goes on.

Exit statuses: bad input prints one message and raises ``SystemExit(2)`` before anything runs (Hydra's
``run_and_report`` catches only ``Exception``); Ctrl-C raises ``SystemExit(130)`` after saying what is kept;
failed points make :class:`DdlioSummary` (a Hydra callback) end the run with ``SystemExit(1)``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from ddlio.errors import ConfigError, DdlioError
from ddlio.signals import interrupt_code, interrupt_name


class DdlioLauncher(Launcher):
    """Runs each batch in this process: local points one at a time, Slurm points as jobs (equal resources share
    an array), every result stored as it lands."""

    def __init__(self) -> None:
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        #: point keys this run has measured or tried: a search proposing one again is answered from the store
        self.tried: set[str] = set()
        #: a point of this run has an objective (else the last batch of a search ends the run: nothing to compare)
        self.completed_any = False
        #: composes each point from a cached composition of its group choices (compose.py)
        self.composer: Any = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function
        problems = sweeper_problems(config)
        if problems:
            raise ConfigError(problems)  # sweep.py: one message, exit 2, before any trial is proposed
        # ddlio's lines say what each trial measured or why it failed; Optuna's (study created ...) and its Hydra
        # sweeper's (a failed point's None "must be float-castable ... max_failure_rate") would only repeat it
        logging.getLogger("optuna").setLevel(logging.WARNING)
        logging.getLogger("hydra_plugins.hydra_optuna_sweeper").setLevel(logging.CRITICAL)

    def _composer(self) -> Any:
        assert self.hydra_context is not None and self.config is not None
        if self.composer is None:
            from hydra_plugins.ddlio_launcher.compose import FastComposer  # lazy: plugin discovery stays cheap

            self.composer = FastComposer(self.hydra_context.config_loader, self.config)
        return self.composer

    def _compose(self, overrides: Sequence[str], idx: int) -> DictConfig:
        cfg = self._composer().compose(overrides)  # Hydra's composition once per set of group choices
        with open_dict(cfg):
            cfg.hydra.job.id = idx
            cfg.hydra.job.num = idx
        return cfg

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra.core.hydra_config import HydraConfig
        from hydra.core.utils import setup_globals

        from experiments.run.batch import run_batch  # lazy: Hydra imports this module to discover plugins

        assert self.hydra_context is not None and self.task_function is not None and self.config is not None
        setup_globals()
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)  # sweepers write there
        hydra_config = HydraConfig.instance()
        # with no callback but ddlio's own (which read a point's overrides and outcome only), a point is its task
        # config as plain data: no per-point copy of the composition (FastComposer.task); its Hydra config is
        # composed only if something reads its JobReturn's cfg
        eager = not all(isinstance(cb, DdlioSummary) for cb in self.hydra_context.callbacks.callbacks)
        configs: list[DictConfig | None] = []
        composed = []
        for i, o in enumerate(job_overrides):
            hydra_config.cfg = None  # type: ignore[assignment]  # a ${hydra:} value must not see another point's
            plain = None if eager else self._task(o)
            if plain is not None:
                configs.append(None)
                composed.append((plain, tuple(o)))
                continue
            cfg = self._compose(o, initial_job_idx + i)
            # a value may interpolate ${hydra:...}: then the point's own Hydra node must be set (a deep copy of it,
            # ~40 ms a point under load); unset, such a value fails to resolve and the point is resolved again
            OmegaConf.set_readonly(cfg.hydra, True)  # as set_config leaves it
            try:
                plain = task_dict(cfg)
            except Exception:
                hydra_config.set_config(cfg)
                plain = task_dict(cfg)
            configs.append(cfg)
            composed.append((plain, tuple(cfg.hydra.overrides.task)))
        # Hydra's own launcher leaves the last point's config set: so does this one where it composed it; else
        # the sweep's config is set again, as Hydra set it before the launch (composing the last point only for
        # this costs one composition a batch: ~0.1 s, a run of one point's tenth of its start-up)
        if job_overrides:
            last = configs[-1]
            hydra_config.set_config(last if last is not None else self.config)
        if eager:
            for cfg in configs:
                self.hydra_context.callbacks.on_job_start(config=cfg, task_function=self.task_function)
        try:
            outcomes = run_batch(composed, os.getcwd(), tried=self.tried)
        except DdlioError as e:
            print(f"error: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (ddlio.signals): exit 130 or 143
            print(f"interrupted ({interrupt_name(e)}): what finished is stored; run the same command again to "
                  "resume", file=sys.stderr)
            raise SystemExit(interrupt_code(e)) from None
        if outcomes and all(o.status == "planned" for o in outcomes) and not self._grid():
            print("dry run: an adaptive search proposes its later trials from measured objectives, so its first "
                  "batch is all a dry run can show")
            raise SystemExit(0)
        self.completed_any = self.completed_any or any(o.status == "completed" for o in outcomes)
        n_trials = OmegaConf.select(self.config, "hydra.sweeper.n_trials", default=None)
        last = isinstance(n_trials, int) and initial_job_idx + len(job_overrides) >= n_trials
        if last and not self.completed_any and not self._grid():
            # the sweeper would end on "no trials are completed" with a traceback: say it as ddlio says things
            print("error: every trial of the search failed, so there is no best configuration; their errors are "
                  "in the store (python -m analysis summary)", file=sys.stderr)
            raise SystemExit(1)
        returns: list[JobReturn] = []
        name, cwd = str(self.config.hydra.job.name), os.getcwd()
        for i, (cfg, (_, overrides), outcome) in enumerate(zip(configs, composed, outcomes, strict=True)):
            if cfg is None:
                ret: JobReturn = PlannedReturn(
                    partial(self._compose, job_overrides[i], initial_job_idx + i), overrides=list(overrides),
                    working_dir=cwd, task_name=name, status=JobStatus.COMPLETED, _return_value=outcome.value)
            else:
                task_cfg = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
                ret = JobReturn(overrides=list(overrides), cfg=task_cfg, hydra_cfg=cfg, working_dir=cwd,
                                task_name=name, status=JobStatus.COMPLETED, _return_value=outcome.value)
            self.hydra_context.callbacks.on_job_end(config=cfg, job_return=ret, ddlio_outcome=outcome)
            returns.append(ret)
        return returns

    def _task(self, overrides: Sequence[str]) -> dict[str, Any] | None:
        """The point's task config as plain data without composing it whole (FastComposer.task), or None."""
        return self._composer().task(overrides)


    def _grid(self) -> bool:
        """True when the sweeper is a grid (its batches do not depend on the objectives returned)."""
        target = str(OmegaConf.select(self.config, "hydra.sweeper._target_", default=""))
        return target.endswith((".DdlioSweeper", ".BasicSweeper"))


class PlannedReturn(JobReturn):
    """A point's JobReturn whose ``hydra_cfg`` (and ``cfg``, the task part of it) is composed the first time it is
    read: a grid of 10,000 points reads none of them, and each would cost a composition."""

    def __init__(self, compose: Callable[[], DictConfig], **fields: Any) -> None:
        self._compose_point, self._hydra_cfg = compose, None
        super().__init__(**fields)

    @property  # type: ignore[override]
    def hydra_cfg(self) -> DictConfig:
        if self._hydra_cfg is None:
            self._hydra_cfg = self._compose_point()
        return self._hydra_cfg

    @hydra_cfg.setter
    def hydra_cfg(self, value: DictConfig | None) -> None:
        self._hydra_cfg = value

    @property  # type: ignore[override]
    def cfg(self) -> DictConfig:
        hydra_cfg = self.hydra_cfg
        return OmegaConf.masked_copy(hydra_cfg, [k for k in hydra_cfg if k != "hydra"])

    @cfg.setter
    def cfg(self, value: DictConfig | None) -> None:
        if value is not None:
            raise AttributeError("a planned point's cfg is its hydra_cfg without Hydra's node")


def sweeper_problems(config: DictConfig) -> list[str]:
    """What an adaptive sweeper (Optuna) would refuse only after its first batch, or with a traceback: its trial
    count and parallelism must be integers >= 1."""
    target = str(OmegaConf.select(config, "hydra.sweeper._target_", default=""))
    if not target.endswith(".OptunaSweeper"):
        return []
    problems = []
    for key in ("n_trials", "n_jobs"):
        value = OmegaConf.select(config, f"hydra.sweeper.{key}", default=None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"hydra.sweeper.{key}={value!r} is out of range: must be an integer >= 1")
    return problems


def task_dict(cfg: DictConfig) -> dict[str, Any]:
    """The point's config as plain data (resolved), without Hydra's own node."""
    out: dict[str, Any] = {}
    for key in cfg:  # key by key: resolving Hydra's own node (help templates, logging) cost most of the time
        if key == "hydra":
            continue
        value = cfg._get_node(key)
        out[str(key)] = (OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value)
                         else cfg[key])
    return out


class DdlioSummary(Callback):
    """A Hydra callback (``hydra.callbacks.ddlio`` in conf/config.yaml): collects what each point came to, and at
    the end of a run of several configurations prints the best one, its objective and the evidence
    (repetitions stored for it, a bootstrap interval when there are several); a failed point makes the exit
    status 1."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[list[str], Any]] = []

    def on_job_end(self, config: DictConfig, job_return: JobReturn, ddlio_outcome: Any = None,
                   **kwargs: Any) -> None:
        if ddlio_outcome is not None:
            self.outcomes.append((job_return.overrides or [], ddlio_outcome))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        failed = {o.spec.point_key for _, o in self.outcomes if o.status == "failed"}
        done = [(ov, o) for ov, o in self.outcomes if o.status == "completed"]
        if len({o.spec.point_key for _, o in done}) > 1:
            print_best(done, str(config.get("objective", "auto")))
        if failed:
            raise SystemExit(1)


def print_best(done: list[tuple[list[str], Any]], objective: str, echo: Any = print) -> None:
    """Print the best configuration of ``done`` ((overrides, Outcome) pairs) by the mean of its repetitions
    (:mod:`ddlio.evidence`), with its interval, the configurations whose intervals overlap it ("cannot decide"),
    and its label among the others (:func:`ddlio.identity.labels`). Counts configurations, not runs. By AU (what
    ``objective=auto`` ranks by where a step time is known), AU ties are broken by bandwidth and the best is said
    fed or starved against the workload's ``au_floor``, with how many of the configurations are."""
    from ddlio.evidence import AU_TIE, MIN_IO_S, best_of, stripe_unapplied, too_short  # lazy: discovery stays cheap
    from ddlio.identity import config_key, labels  # lazy: plugin discovery stays cheap

    def unapplied(o: Any) -> bool:  # invalid, as analysis.validity says: counted by neither best nor the guidelines
        lay = o.spec.layout
        return stripe_unapplied(lay.stripe_count, lay.stripe_size, lay.striping_applicable)

    def short(o: Any) -> bool:  # invalid too: timed I/O under the floor
        return too_short(getattr(o, "io_s", None))

    dropped = sorted({f"stripe={o.spec.layout.stripe_count} on {o.spec.layout.fs_type}" for _, o in done
                      if o.value is not None and unapplied(o)})
    n_short = sum(1 for _, o in done if o.value is not None and not unapplied(o) and short(o))
    if n_short:
        dropped.append(f"{n_short} point{'s' if n_short > 1 else ''} with timed I/O under {MIN_IO_S} s")
    per_point = {o.spec.point_key: (ov, o) for ov, o in done
                 if o.value is not None and not unapplied(o) and not short(o)}
    if dropped and len(per_point) < 2:
        echo(f"no best: {', '.join(dropped)}: invalid points count nowhere (a stripe layout that was not applied, "
             "or too little timed I/O to trust)")
        return
    objective, value_of = _ranked_by(objective, [o for _, o in per_point.values()])
    configs = {k: o.spec.to_dict() for k, (_, o) in per_point.items()}
    key_of = {k: config_key(c) for k, c in configs.items()}
    groups: dict[str, list[float]] = {}
    first: dict[str, tuple[list[str], Any]] = {}
    bandwidths: dict[str, list[float]] = {}
    for k, (ov, o) in per_point.items():
        groups.setdefault(key_of[k], []).append(value_of(o))
        bandwidths.setdefault(key_of[k], []).append(o.bandwidth if o.bandwidth is not None else float("nan"))
        first.setdefault(key_of[k], (ov, o))
    by_au = objective == "au"
    result = best_of(groups, tiebreak={k: sum(v) / len(v) for k, v in bandwidths.items()} if by_au else None,
                     near=AU_TIE)
    if result is None:
        return
    shown_configs = {key_of[k]: c for k, c in configs.items()}
    label = dict(zip(shown_configs, labels(list(shown_configs.values())), strict=True))
    b = result.best
    overrides, o = first[b.key]
    shown = [x for x in overrides if not x.startswith(("data_root=", "db=", "repeat="))]
    how = f"(maximised, AU within {AU_TIE} of the best ranked by bandwidth_mib_s)" if by_au else "(maximised)"
    echo(f"best of {result.configurations} configurations by {objective} {how}: {b.mean:.4g} = mean of "
         f"{b.n} repetition{'s' if b.n > 1 else ''}" + (f", 95% bootstrap interval [{b.lo:.4g}, {b.hi:.4g}]"
                                                        if b.n > 1 else " (no interval: add repeat=0,1,2)"))
    echo(f"  {' '.join(shown) or '(defaults)'}    ({label[b.key]}, configuration {b.key})")
    if by_au:
        for line in _fed_lines(groups, b.key, {k: oc for k, (_, oc) in first.items()}):
            echo(line)
    if dropped:
        echo(f"  left out, as the guidelines leave them out: {', '.join(dropped)} (invalid)")
    if result.tied:
        echo("  cannot decide: the intervals of these overlap the best's: "
             + "; ".join(f"{label[e.key]} {e.text()}" for e in result.tied))
    elif len(result.ranked) > 1:
        nxt = result.ranked[1]
        echo(f"  separated from the next, {label[nxt.key]} {nxt.text()}" if b.n > 1 else
             f"  next: {label[nxt.key]} {nxt.text()}")


def _ranked_by(objective: str, outcomes: list[Any]) -> tuple[str, Any]:
    """The objective the points of a sweep are ranked by and how to read it off an Outcome: the one their
    ``objective=`` resolved to (``auto``: au with a compute time), or bandwidth_mib_s where they resolved to
    different ones (points with and without a compute time: their AUs are not comparable)."""
    resolved = {o.objective for o in outcomes if o.objective}
    if len(resolved) == 1:
        return resolved.pop(), lambda o: float(o.value)
    if len(resolved) > 1:
        return "bandwidth_mib_s", lambda o: float(o.bandwidth if o.bandwidth is not None else "nan")
    return (objective if objective != "auto" else "bandwidth_mib_s"), lambda o: float(o.value)


def _fed_lines(groups: dict[str, list[float]], best: str, outcomes: dict[str, Any]) -> list[str]:
    """Whether the best configuration keeps its accelerators (its ranks) fed, against its workload's AU floor,
    and how many of the configurations ranked do, each against its own floor (``groups``: configuration key -> its
    AU repetitions; ``outcomes``: configuration key -> one of its Outcomes)."""
    from ddlio.evidence import AU_FLOOR, fed  # lazy: plugin discovery stays cheap

    floors = {k: float(getattr(o.spec.workload, "au_floor", AU_FLOOR)) for k, o in outcomes.items()}
    verdicts = {k: fed(v, floors[k]) for k, v in groups.items()}
    floor = floors[best]
    ranks = outcomes[best].spec.ranks
    word = verdicts[best]
    lines = [f"  {word.text()}, with {ranks} accelerator{'s' if ranks > 1 else ''} (one a rank)"] if word else []
    counts = {w: sum(1 for v in verdicts.values() if v and v.word == w) for w in ("fed", "starved", "undecided")}
    if len(groups) > 1:
        lines.append(f"  of {len(groups)} configurations: {counts['fed']} fed, {counts['starved']} starved"
                     + (f", {counts['undecided']} undecided" if counts["undecided"] else "")
                     + f" at AU ≥ {floor:.2f} (workload.au_floor)")
    return lines
