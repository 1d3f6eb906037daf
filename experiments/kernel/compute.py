"""The emulated compute of a training step, per batch: ``workload.compute=sleep`` (the default) or ``cpu``.

- ``sleep``: the step sleeps ``compute_time`` seconds. It occupies no core and holds no lock, which is the right
  model of a step that runs on an accelerator (the host's cores stay with the input pipeline).
- ``cpu``: the step does a *fixed amount of CPU work*, the amount that takes ``compute_time`` seconds on an
  otherwise idle node, split among ``compute_threads`` threads, as a CPU-only training step does. When the input
  pipeline takes cores from it, the step stretches, as a real one does.

The work is counted in *units*: one unit is ``np.matmul`` of a stack of :data:`STACK` float32 matrices of
:data:`SIZE` x :data:`SIZE` (about 7 million floating-point operations). Each matrix product is small enough
that OpenBLAS computes it on the calling thread (below its threshold for using its own threads), and numpy
releases the GIL while it runs, so ``threads`` burners occupy ``threads`` cores and leave the GIL to the reader.
:meth:`CpuBurner.calibrate` measures, once per rank before anything is timed, the units per *CPU* second of each
burner thread while all of them run at once (``time.thread_time``: what a thread does when it has a core, so
other processes on a shared node do not lower it as they would a rate per wall second); their sum is the rate of
the idle node, and a batch of ``c`` seconds then runs ``round(c * units_per_s)`` units.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from experiments.config import PointSpec

from experiments.config import COMPUTE_MODES

#: one unit of work: matmul of a stack of STACK float32 matrices of SIZE x SIZE (below OpenBLAS's threading threshold)
SIZE, STACK = 48, 32


def node_cpus() -> int:
    """CPUs this process may run on (its affinity mask: what Slurm or a cgroup gave the job)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def resolve_threads(threads: int, ranks_per_node: int) -> int:
    """Burner threads per rank: ``threads``, or with 0 the node's CPUs divided among its ranks (at least 1)."""
    return threads if threads > 0 else max(1, node_cpus() // max(1, ranks_per_node))


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class CpuBurner:
    """``threads`` threads that do a number of work units together (each its share), returning when all are
    done; the calling thread is one of them."""

    def __init__(self, threads: int) -> None:
        import numpy as np  # here, not at import: the config's validation imports this module

        self.threads = max(1, int(threads))
        self._matmul = np.matmul
        rng = np.random.default_rng(0)
        # each thread its own operands and output: no false sharing, no allocation in the loop
        self._ops = [(rng.random((STACK, SIZE, SIZE), dtype=np.float32),
                      rng.random((STACK, SIZE, SIZE), dtype=np.float32),
                      np.empty((STACK, SIZE, SIZE), dtype=np.float32)) for _ in range(self.threads)]
        self._pool = (ThreadPoolExecutor(self.threads - 1, thread_name_prefix="ddlio-compute")
                      if self.threads > 1 else None)
        self.units_per_s = 0.0
        self.calibration: dict[str, Any] = {}

    def _burn(self, i: int, units: int) -> tuple[int, float]:
        """Thread ``i``'s share: ``units`` units; returns (units, CPU seconds of this thread)."""
        a, b, out = self._ops[i]
        mm = self._matmul
        c0 = time.thread_time()
        for _ in range(units):
            mm(a, b, out=out)
        return units, time.thread_time() - c0

    def work(self, units: int) -> list[tuple[int, float]]:
        """Do ``units`` units, split as evenly as can be among the threads; returns when every share is done, with
        each share's (units, thread CPU seconds)."""
        n = self.threads
        shares = [units // n + (i < units % n) for i in range(n)]
        futures = [self._pool.submit(self._burn, i, shares[i]) for i in range(1, n) if shares[i]] if self._pool else []
        done = [self._burn(0, shares[0])]
        return done + [f.result() for f in futures]

    def calibrate(self, trial_s: float = 0.1, trials: int = 5) -> float:
        """Measure the idle node's work rate of all threads burning at once (units per second): per trial of about
        ``trial_s`` seconds, the sum over threads of units per thread CPU second; the median of ``trials`` after a
        warm-up. Sets and returns :attr:`units_per_s`. Also keeps the rate per wall second (lower than it when
        other work shared the cores) and the process's CPU seconds per wall second of the trials (about
        ``threads`` on an idle node; well above it would mean BLAS used threads of its own)."""
        self.work(self.threads * 4)  # warm-up: first calls, page faults
        t = time.perf_counter()
        probe = self.threads * 8
        self.work(probe)
        rate = probe / max(time.perf_counter() - t, 1e-6)
        units = max(self.threads, round(rate * trial_s))
        rates, wall_rates, cpu, wall = [], [], 0.0, 0.0
        for _ in range(trials):
            c0, t0 = _cpu_s(), time.perf_counter()
            shares = self.work(units)
            dt = max(time.perf_counter() - t0, 1e-9)
            cpu += _cpu_s() - c0
            wall += dt
            rates.append(sum(u / max(c, 1e-9) for u, c in shares if u))
            wall_rates.append(units / dt)
        self.units_per_s = statistics.median(rates)
        self.calibration = {"mode": "cpu", "threads": self.threads, "units_per_s": self.units_per_s,
                            "unit": f"matmul of {STACK} float32 {SIZE}x{SIZE} matrices",
                            "trial_units": units, "trials": trials, "rate_min": min(rates),
                            "rate_max": max(rates), "wall_units_per_s": statistics.median(wall_rates),
                            "cores_busy": cpu / wall, "node_cpus": node_cpus()}
        return self.units_per_s

    def units_for(self, seconds: float) -> int:
        """The units that take ``seconds`` on the calibrated (idle) node."""
        return max(0, round(seconds * self.units_per_s))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class Compute:
    """A rank's emulated compute per batch: :meth:`run` (seconds planned) does it and returns its wall time (s)."""

    def __init__(self, mode: str = "sleep", threads: int = 0, ranks_per_node: int = 1) -> None:
        self.mode = mode
        self.burner: CpuBurner | None = None
        if mode == "cpu":
            self.burner = CpuBurner(resolve_threads(threads, ranks_per_node))
        elif mode != "sleep":
            raise ValueError(f"compute mode {mode!r} is unknown: choose one of {', '.join(COMPUTE_MODES)}")

    @classmethod
    def of(cls, point: PointSpec, ranks_per_node: int | None = None) -> Compute:
        """The compute a point asks for, with ``ranks_per_node`` ranks sharing the node (default the point's ppn);
        points stored before the knob existed sleep (the stored form's default)."""
        w = point.workload
        return cls(w.compute, int(w.compute_threads), int(ranks_per_node or point.ppn))

    def calibrate(self) -> dict[str, Any]:
        """Calibrate the burner (``cpu``; untimed, before any epoch); returns what to record with the result."""
        if self.burner is None:
            return {"mode": self.mode}
        self.burner.calibrate()
        return dict(self.burner.calibration)

    def run(self, seconds: float) -> float:
        """The batch's compute; returns its wall time in seconds (0 when ``seconds`` is 0)."""
        if seconds <= 0:
            return 0.0
        t = time.perf_counter_ns()
        if self.burner is None:
            time.sleep(seconds)
        else:
            self.burner.work(self.burner.units_for(seconds))
        return (time.perf_counter_ns() - t) / 1e9

    def close(self) -> None:
        if self.burner is not None:
            self.burner.close()

