"""The workload concern: the dataset's sizes (samples, sample size and shape, files, payload), the training loop
(batches, epochs, shuffling, read-ahead), the page-cache policy, and whether the ranks' shares hold a sample and
a batch. Sizes in bytes, times in seconds."""

from __future__ import annotations

import math
from typing import Any

from ddlio.units import format_size
from experiments.config.schema import CACHE_POLICIES, DEVICES, MAX_SAMPLE_SIZE, SHUFFLES, START_METHODS
from experiments.config.validate.values import choice, fraction, int_range, size
from experiments.formats.base import parse_payload


def sample_shape(problems: list[str], value: Any) -> tuple[int, ...]:
    """``workload.sample_shape`` as a tuple of dimensions >= 1 (``()`` when not given)."""
    dims = list(value) if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        problems.append(f"workload.sample_shape={value!r} must be a list of whole dimensions >= 1, e.g. [512,512,3] "
                        "(or [] for samples of workload.sample_size bytes)")
        return ()
    if dims and math.prod(dims) > MAX_SAMPLE_SIZE:
        problems.append(f"workload.sample_shape={dims} holds {format_size(math.prod(dims))} per sample, more than "
                        f"the largest sample ({format_size(MAX_SAMPLE_SIZE)})")
        return ()
    return tuple(dims)


def _shaped_size(problems: list[str], shape: tuple[int, ...], w: dict[str, Any], sample_size: int, stdev: int,
                 overrides: tuple[str, ...]) -> int:
    """The sample size of uint8 samples of ``shape`` (bytes): its product. A sample_size given on the command line
    that disagrees is a problem (a preset's is replaced), and so is a size spread (every sample has the shape)."""
    derived = math.prod(shape)
    given = any(o.split("=", 1)[0].lstrip("+~") == "workload.sample_size" for o in overrides)
    if given and sample_size != derived:
        problems.append(
            f"workload.sample_size={w['sample_size']} ({sample_size} bytes) disagrees with workload.sample_shape="
            f"{list(shape)} ({derived} bytes of uint8): give only the shape (the size follows from it), or a size "
            "that agrees"
        )
    if stdev:
        problems.append(
            f"workload.sample_size_stdev={w['sample_size_stdev']} cannot vary the size of samples of "
            f"workload.sample_shape={list(shape)}: every sample has the shape; set workload.sample_size_stdev=0"
        )
    return derived


def check_sizes(problems: list[str], w: dict[str, Any], shape: tuple[int, ...],
                overrides: tuple[str, ...]) -> dict[str, Any]:
    """The dataset's WorkloadSpec fields: samples, sample_size and sample_size_stdev (bytes), sample_shape,
    samples_per_file and payload."""
    samples = int_range(problems, "workload.samples", w["samples"], 1)
    sample_size = size(problems, "workload.sample_size", w["sample_size"], 1, MAX_SAMPLE_SIZE)
    stdev = size(problems, "workload.sample_size_stdev", w["sample_size_stdev"], 0, MAX_SAMPLE_SIZE)
    if shape:
        sample_size = _shaped_size(problems, shape, w, sample_size, stdev, overrides)
    if stdev and sample_size and stdev >= sample_size:
        problems.append(
            f"workload.sample_size_stdev={w['sample_size_stdev']} must be smaller than workload.sample_size="
            f"{w['sample_size']}, so that sample sizes stay positive"
        )
    spf = int_range(problems, "workload.samples_per_file", w["samples_per_file"], 1)
    try:
        payload = parse_payload(w["payload"])
    except ValueError as e:
        problems.append(str(e))
        payload = "random"
    return {"samples": samples, "sample_size": sample_size, "sample_size_stdev": stdev, "sample_shape": shape,
            "samples_per_file": spf, "payload": payload}


def check_loop(problems: list[str], w: dict[str, Any]) -> dict[str, Any]:
    """The training loop's WorkloadSpec fields: batch_size, epochs, shuffle, drop_last, read_threads, prefetch,
    trace and the preset's name."""
    return {
        "batch_size": int_range(problems, "workload.batch_size", w["batch_size"], 1),
        "shuffle": choice(problems, "workload.shuffle", w["shuffle"], SHUFFLES),
        "read_threads": int_range(problems, "workload.read_threads", w["read_threads"], 0, 256),
        "prefetch": int_range(problems, "workload.prefetch", w["prefetch"], 1, 4096, " batches"),
        "epochs": int_range(problems, "workload.epochs", w["epochs"], 1),
        "drop_last": bool(w["drop_last"]),
        "trace": bool(w["trace"]),
        "name": str(w["name"]),
        "persistent_workers": bool(w.get("persistent_workers", False)),
        "pin_memory": bool(w.get("pin_memory", False)),
        "start_method": choice(problems, "workload.start_method", w.get("start_method", "fork"), START_METHODS),
        "device": choice(problems, "workload.device", w.get("device", "auto"), DEVICES),
        "au_floor": au_floor(problems, w.get("au_floor", 0.9)),
    }


def au_floor(problems: list[str], value: Any) -> float:
    """``workload.au_floor``: a fraction in (0, 1] (accelerator utilisation, compute time over wall time)."""
    return fraction(problems, "workload.au_floor", value, 0.9,
                    ", e.g. 0.9 (MLPerf Storage's floor) or 0.7 (CosmoFlow's)")


def check_cache(problems: list[str], w: dict[str, Any]) -> dict[str, Any]:
    """The page-cache WorkloadSpec fields: cache, settle, and flush_size (bytes; 0 unless cache=storage_cold)."""
    cache = choice(problems, "workload.cache", w["cache"], CACHE_POLICIES)
    flush_size = size(problems, "workload.flush_size", w["flush_size"], 1 << 20, 1 << 50)
    return {"cache": cache, "settle": bool(w["settle"]), "flush_size": flush_size if cache == "storage_cold" else 0}


def check_shares(problems: list[str], sizes: dict[str, Any], batch: Any, access: str, ranks: int,
                 drop_last: bool) -> None:
    """Every rank gets a sample; fpp's files (a multiple of the rank count) are not empty; with drop_last every
    rank reads at least one batch."""
    samples, spf = sizes["samples"], sizes["samples_per_file"]
    if isinstance(samples, int) and samples < ranks:
        problems.append(f"workload.samples={samples} is fewer than the {ranks} ranks: every rank needs a sample")
    elif isinstance(samples, int) and isinstance(spf, int) and spf >= 1 and access == "fpp":
        files = math.ceil(max(math.ceil(samples / spf), ranks) / ranks) * ranks
        if files > samples:
            problems.append(
                f"access=fpp with {ranks} ranks needs {files} files (a multiple of the rank count), more than the "
                f"{samples} samples: some files would be empty; use workload.samples as a multiple of {ranks} "
                "or a larger workload.samples_per_file"
            )
    if drop_last and isinstance(samples, int) and isinstance(batch, int) and ranks and samples >= ranks:
        smallest = samples // ranks  # the smallest share any rank gets (fpp: about the same)
        if smallest < batch:
            problems.append(
                f"workload.drop_last=true with workload.batch_size={batch}: a rank's share is about {smallest} "
                f"samples, less than one batch, so every rank would read nothing; lower the batch size or "
                "set drop_last=false"
            )
