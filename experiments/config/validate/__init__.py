"""Validation: :func:`validate` checks one composed config, concern by concern (format, workload, compute,
cluster, Slurm, run, layout, paths: one module each), reports every problem of the point at once, naming the
valid choices, and freezes the checked values into a :class:`~experiments.config.point.PointSpec`.

Each concern's check returns the fields it normalised, by the spec they belong to (:func:`point_fields`); the
point is built from exactly those (tests/test_point_fields.py holds every view of a field to one table).

Import the function as ``from experiments.config.validate import validate`` (``experiments.config.validate`` is this
package). Reach a concern's module with ``from experiments.config.validate import run`` and monkeypatch the module
object, e.g. ``monkeypatch.setattr(run, "LOADERS", ...)``.
"""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path
from typing import Any

from ddlio.errors import ConfigError
from ddlio.secrets import mask
from ddlio.shell import control_problems
from experiments.config.point import CLUSTERS, FormatSpec, LayoutSpec, PointSpec, WorkloadSpec
from experiments.config.validate.accelerator import check_accelerator, check_scale, scaled_samples
from experiments.config.validate.cluster import (
    check_env,
    check_executor,
    check_launch,
    check_limits,
    check_resources,
    resolve_command,
)
from experiments.config.validate.compute import check_compute, check_fits
from experiments.config.validate.format import check_format
from experiments.config.validate.keys import check_keys, missing_keys
from experiments.config.validate.kind import check_kind_options
from experiments.config.validate.layout import check_access, check_file_system, check_striping
from experiments.config.validate.paths import check_data_root, check_db, check_writable_dir
from experiments.config.validate.run import check_run, tf_available
from experiments.config.validate.slurm import check_slurm, check_slurm_only, with_defaults
from experiments.config.validate.workload import check_cache, check_loop, check_shares, check_sizes


def _check_cluster(problems: list[str], cfg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The executor and the PointSpec's ``nodes`` and ``ppn``, every cluster key checked."""
    cl = with_defaults(cfg["cluster"])
    executor = check_executor(problems, cl)
    check_slurm_only(problems, cl, executor)
    resources = check_resources(problems, cfg, executor)
    check_limits(problems, cl)
    check_env(problems, cl)
    check_slurm(problems, cl)
    check_launch(problems, cl, executor)
    return executor, resources


def point_fields(cfg: dict[str, Any], cwd: str | os.PathLike | None = None,
                 overrides: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """The checked fields of one composed config (a plain dict) by the spec they go to: ``format``, ``layout``,
    ``workload`` and ``""`` (the PointSpec itself, ``cluster`` still the composed dict).

    Raises :class:`ConfigError` listing every problem found, each with the valid choices.
    """
    base = Path(cwd or os.getcwd())
    missing = missing_keys(cfg)
    if missing:  # every later check reads these keys
        raise ConfigError(missing)
    problems: list[str] = list(control_problems(cfg))
    check_keys(problems, cfg)
    fmt, shape = check_format(problems, cfg)
    access = check_access(problems, cfg)
    accelerator, w = check_accelerator(problems, cfg, overrides)  # w: compute_time the accelerator's figure
    sizes = check_sizes(problems, w, shape, overrides)
    scale = check_scale(problems, w)
    loop = check_loop(problems, w)
    workload = {**sizes, **loop, **check_compute(problems, w), **check_cache(problems, w), "scale": scale}
    executor, resources = _check_cluster(problems, cfg)
    ranks = resources["nodes"] * resources["ppn"]
    workload["samples"] = sizes["samples"] = scaled_samples(sizes["samples"], scale, ranks, access)
    check_shares(problems, sizes, loop["batch_size"], access, ranks, bool(w.get("drop_last")))
    check_fits(problems, workload, ranks, cfg["cluster"].get("timeout_min"))
    run = check_run(problems, cfg)
    striping = check_striping(problems, cfg)
    data_root = check_data_root(problems, cfg, base)
    db = check_db(problems, cfg, base)
    fs = check_file_system(problems, data_root, sizes["samples"], sizes["sample_size"], striping)
    options = check_kind_options(problems, cfg, run["kind"], access, resources["nodes"], resources["ppn"],
                                 None if any(p.startswith("data_root") for p in problems) else data_root,
                                 run["seed"], executor, overrides)
    if problems:
        raise ConfigError(problems)
    cluster = dict(with_defaults(cfg["cluster"]), executor=executor)
    top = {**resources, **run, "cluster": cluster, "data_root": str(data_root),
           "db": mask(db),  # the password stays in the driver (sweep.py opens the store with driver_db)
           "force": bool(cfg.get("force", False)), "overrides": tuple(mask(o) for o in overrides),
           "checkpoint": options, "accelerator": accelerator}
    return {"format": fmt, "layout": {"access": access, **striping, **fs}, "workload": workload, "": top}


def freeze(parts: dict[str, dict[str, Any]]) -> PointSpec:
    """The PointSpec of checked fields (:func:`point_fields`); the cluster's class by its executor."""
    top = dict(parts[""])
    cl = top.pop("cluster")
    cls = CLUSTERS[cl["executor"]]
    return PointSpec(format=FormatSpec(**parts["format"]), layout=LayoutSpec(**parts["layout"]),
                     workload=WorkloadSpec(**parts["workload"]),
                     cluster=cls(**{f.name: cl[f.name] for f in fields(cls)}), **top)


def validate(cfg: dict[str, Any], cwd: str | os.PathLike | None = None, overrides: tuple[str, ...] = ()) -> PointSpec:
    """Check one composed config (a plain dict) and freeze it into a :class:`PointSpec`.

    Raises :class:`ConfigError` listing every problem found, each with the valid choices.
    """
    return freeze(point_fields(cfg, cwd, overrides))


__all__ = ["check_writable_dir", "freeze", "point_fields", "resolve_command", "tf_available", "validate"]
