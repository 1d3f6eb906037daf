"""The compute concern: the emulated training step per batch (its time and spread in seconds, and how it is
emulated: sleep or CPU work in threads; see experiments.kernel.compute)."""

from __future__ import annotations

import math
from typing import Any

from experiments.config.schema import COMPUTE_MODES, MAX_COMPUTE_THREADS, MAX_TIMEOUT_MIN
from experiments.config.validate.values import choice, int_range, seconds

_MODES_WHY = (" (sleep: the step occupies no core, as on an accelerator; cpu: it burns the CPU for compute_time, "
              "as a CPU-only training step)")
_THREADS_WHAT = " (threads per rank that do compute=cpu's work; 0 = the node's CPUs divided by the ranks per node)"


def check_compute(problems: list[str], w: dict[str, Any]) -> dict[str, Any]:
    """The compute WorkloadSpec fields: compute_time and compute_time_stdev (seconds), compute and
    compute_threads (0 unless compute=cpu)."""
    cstdev = seconds(problems, "workload.compute_time_stdev", w["compute_time_stdev"])
    compute_time = seconds(problems, "workload.compute_time", w["compute_time"])
    mode = choice(problems, "workload.compute", w.get("compute", "sleep"), COMPUTE_MODES, _MODES_WHY)
    threads = int_range(problems, "workload.compute_threads", w.get("compute_threads", 0), 0, MAX_COMPUTE_THREADS,
                        _THREADS_WHAT)
    return {"compute_time": compute_time, "compute_time_stdev": cstdev, "compute": mode,
            "compute_threads": threads if mode == "cpu" else 0}


def check_fits(problems: list[str], workload: dict[str, Any], ranks: int, timeout_min: Any) -> None:
    """The emulated compute alone (``compute_time`` s × the batches of the smallest rank's share × epochs) must fit
    in the point's time limit (``cluster.timeout_min``, minutes): a point that cannot finish is refused up front
    instead of failing at its limit."""
    compute, samples, batch, epochs = (workload.get(k) for k in ("compute_time", "samples", "batch_size", "epochs"))
    numbers = (compute, samples, batch, epochs, timeout_min)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
        return  # a bad value is its own problem
    if not (compute > 0 and batch >= 1 and epochs >= 1 and ranks >= 1 and 0 < timeout_min < math.inf):
        return
    share = int(samples) // ranks
    batches = share // batch if workload.get("drop_last") else math.ceil(share / batch)
    need = compute * batches * epochs
    if need > timeout_min * 60:
        fix = (f"or raise cluster.timeout_min to at least {math.ceil(need / 60)}" if need / 60 <= MAX_TIMEOUT_MIN
               else "no time limit fits it (cluster.timeout_min is at most a year)")
        problems.append(
            f"workload.compute_time={compute:g} s x {batches} batches per rank x {epochs} epochs is {need:.4g} s of "
            f"compute alone, more than the point's time limit cluster.timeout_min={timeout_min:g} "
            f"({timeout_min * 60:.4g} s): lower workload.compute_time or workload.epochs, {fix}"
        )
