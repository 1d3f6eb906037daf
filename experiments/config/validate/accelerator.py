"""The accelerator concern: which compute time per batch a workload preset's table gives (``accelerator``, from
``workload.compute_time_by_accelerator``: MLPerf Storage's presets, conf/workload/mlperf/), and how far a point
shrinks the preset's dataset (``workload.scale``). Times in seconds."""

from __future__ import annotations

import math
from typing import Any

from experiments.config.validate.values import fraction


def given(overrides: tuple[str, ...], key: str) -> bool:
    """Whether the command line set ``key`` (``key=``, ``+key=``, ``++key=``)."""
    return any(o.split("=", 1)[0].lstrip("+~") == key for o in overrides)


def _table(problems: list[str], w: dict[str, Any]) -> dict[str, float]:
    """``workload.compute_time_by_accelerator`` as {name: seconds > 0}; a value that is not is a problem."""
    raw = w.get("compute_time_by_accelerator") or {}
    out: dict[str, float] = {}
    for name, value in dict(raw).items():
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if isinstance(value, bool) or not (seconds > 0 and math.isfinite(seconds)):
            problems.append(f"workload.compute_time_by_accelerator.{name}={value!r} must be seconds per batch > 0")
            continue
        out[str(name)] = seconds
    return out


def check_accelerator(problems: list[str], cfg: dict[str, Any],
                      overrides: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """(``accelerator``'s name, the workload's keys with ``compute_time`` the preset's figure for it). Without an
    accelerator the workload is left as composed. An accelerator the preset has no figure for is a problem naming
    the ones it has; so is one on a workload with no table, and a ``workload.compute_time`` given on the command
    line that disagrees with the accelerator's figure (the preset's own ``compute_time`` is replaced)."""
    w = cfg["workload"]
    name = cfg.get("accelerator")
    name = "" if name is None else name
    table = _table(problems, w)
    if not isinstance(name, str):
        problems.append(f"accelerator={name!r} is not an accelerator's name: give one of {_choices(table)}")
        return "", w
    if not name:
        return "", w
    preset = w.get("name", "custom")
    if not table:
        problems.append(
            f"accelerator={name}: workload {preset!r} has no compute time by accelerator "
            "(workload.compute_time_by_accelerator is empty); use an MLPerf Storage preset (workload=mlperf/unet3d, "
            "resnet50, cosmoflow, retinanet, flux, dlrm) or give workload.compute_time in seconds per batch instead")
        return name, w
    name = next((k for k in table if k.lower() == name.lower()), name)  # H100 is h100
    if name not in table:
        problems.append(f"accelerator={name}: workload {preset!r} has no compute time for it; choose one of "
                        f"{_choices(table)}")
        return name, w
    figure = table[name]
    if given(overrides, "workload.compute_time"):
        try:
            disagrees = float(w["compute_time"]) != figure
        except (TypeError, ValueError):
            disagrees = True
        if disagrees:
            problems.append(
                f"workload.compute_time={w['compute_time']} disagrees with accelerator={name}'s {figure} s a batch "
                f"(workload {preset!r}): give only one of them")
    return name, dict(w, compute_time=figure)


def _choices(table: dict[str, float]) -> str:
    return ", ".join(f"{k} ({v} s)" for k, v in table.items()) if table else "none (the workload has no table)"


def check_scale(problems: list[str], w: dict[str, Any]) -> float:
    """``workload.scale``: a fraction in (0, 1] (1: the preset's whole dataset)."""
    return fraction(problems, "workload.scale", w.get("scale", 1.0), 1.0,
                    ": the share of the preset's samples a point reads, e.g. 0.01 (1 = the whole dataset)")


def scaled_samples(samples: Any, scale: float, ranks: int, access: str) -> Any:
    """The sample count ``samples`` × ``scale``, rounded down to a whole number, at least one per rank; with
    ``access=fpp`` a multiple of the rank count, so that each rank owns at least one file of samples (the files
    follow: ceil(samples / samples_per_file), a multiple of the ranks; the sample size never changes). A count that
    is not an int (already a problem) is returned as it is; ``scale`` 1 leaves it as it is."""
    if scale >= 1 or not isinstance(samples, int) or isinstance(samples, bool) or ranks < 1:
        return samples
    n = max(math.floor(samples * scale), ranks)
    if access == "fpp":
        n -= n % ranks
    return n
