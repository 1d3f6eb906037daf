"""Packing short points into array tasks: one task measures ``k`` points one after the other, each with its own
time limit, run folder and record, so a task's start (Slurm's scheduling of the task, the job's Python start-up,
submitit unpickling) is paid once per ``k`` points instead of once per point, and a failing point does not sink
the others of its task. ``cluster.points_per_task`` chooses ``k`` (0: :func:`points_per_task` picks it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: with points_per_task=0, every slot runs about this many tasks: enough for the last round to end evenly
ROUNDS = 4
#: with points_per_task=0, at most this many points per task
MAX_AUTO = 16
#: with points_per_task=0, a task's time limit (k × cluster.timeout_min) stays within this many minutes, so a site's
#: scheduler does not see a job asking for hours where each point asks for minutes
MAX_AUTO_MIN = 8 * 60


def points_per_task(group: Sequence[Any], max_time_min: float | None = None) -> int:
    """How many points of ``group`` (points with equal resources, going out as one job array) each array task
    measures: ``cluster.points_per_task`` when set, else enough that each of the ``array_parallelism`` slots runs
    about :data:`ROUNDS` tasks (1 for sweeps too small to gain), at most :data:`MAX_AUTO`, and with the task's
    time limit (``k × cluster.timeout_min``, minutes) within :data:`MAX_AUTO_MIN` and the partition's MaxTime
    (``max_time_min``, None when unknown or unlimited). A set value is also kept within ``max_time_min``."""
    if not group:
        return 1
    c = group[0].cluster
    timeout = max(1.0, float(c.timeout_min))
    fixed = int(getattr(c, "points_per_task", 0) or 0)
    if fixed:
        k = fixed
    else:
        slots = max(1, int(getattr(c, "array_parallelism", 1)))
        k = min(len(group) // (slots * ROUNDS), MAX_AUTO, int(MAX_AUTO_MIN // timeout))
    if max_time_min is not None:
        k = min(k, int(max_time_min // timeout))
    return max(1, min(k, len(group)))


def task_minutes(spec: Any, k: int) -> int:
    """The time limit of a task measuring ``k`` points (whole minutes, at least 1): each point's own limit."""
    return max(1, math.ceil(float(spec.cluster.timeout_min) * k))


def packs(n: int, k: int) -> list[range]:
    """The indices of ``n`` points cut into tasks of ``k`` (the last may hold fewer)."""
    return [range(i, min(i + k, n)) for i in range(0, n, max(1, k))]
