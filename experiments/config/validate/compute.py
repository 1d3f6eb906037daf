"""The compute concern: the emulated training step per batch (its time and spread in seconds, and how it is
emulated: sleep or CPU work in threads; see experiments.kernel.compute)."""

from __future__ import annotations

from typing import Any

from experiments.config.schema import COMPUTE_MODES, MAX_COMPUTE_THREADS
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
