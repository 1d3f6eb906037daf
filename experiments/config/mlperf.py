"""A point of MLPerf Storage's presets (``workload=mlperf/<name>``) in MLPerf's terms, for the dry run: the dataset,
the batch, the accelerator's compute time, the AU floor, and where the point stands against MLPerf's dataset-size
rule (:mod:`ddlio.mlperf`) on this node's memory. Sizes in bytes, times in seconds."""

from __future__ import annotations

from ddlio.env import memory_bytes
from ddlio.mlperf import MIN_STEPS_PER_EPOCH, size_shortfalls, steps_per_epoch
from ddlio.units import format_size
from experiments.config.point import PointSpec


def describe(spec: PointSpec, node_memory: float | None = None) -> list[str]:
    """Lines that say what ``spec`` reads in MLPerf's terms. ``node_memory`` (bytes; None: this node's, as a
    local point runs here; a Slurm point's nodes are judged when it ran) for the dataset-size rule."""
    w = spec.workload
    spread = f" ± {format_size(w.sample_size_stdev)}" if w.sample_size_stdev else ""
    scaled = f" (workload.scale={w.scale:g} of the preset's)" if w.scale < 1 else ""
    compute = (f"{w.compute_time:g} s compute a batch ({spec.accelerator})" if spec.accelerator
               else f"{w.compute_time:g} s compute a batch (no accelerator chosen)")
    lines = [
        f"{w.name}: {w.samples} samples{scaled} x {format_size(w.sample_size)}{spread}, {w.samples_per_file} a file, "
        f"{spec.format.name}; batch {w.batch_size}, {w.epochs} epoch(s), {compute}; fed at AU >= {w.au_floor:g}",
    ]
    steps = steps_per_epoch(w.samples, w.batch_size, spec.ranks)
    if node_memory is None and spec.cluster.executor == "local":
        node_memory = float(memory_bytes()) or None
    short = size_shortfalls(w.samples, w.sample_size, w.batch_size, spec.ranks, spec.nodes, node_memory)
    if short:
        lines.append("not an MLPerf-sized run (its verdict will say so): " + "; ".join(short))
    else:
        lines.append(f"MLPerf-sized: {steps} steps an epoch (>= {MIN_STEPS_PER_EPOCH})"
                     + ("" if node_memory else "; the nodes' memory is judged when the point has run"))
    return lines
