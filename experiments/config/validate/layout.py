"""The layout concern: how the ranks share the dataset (``access``), its striping, and the file system at
data_root (its type, whether striping applies there, whether the dataset fits). Sizes in bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddlio.units import format_size, parse_size
from experiments.config.schema import ACCESS_MODES
from experiments.config.validate.values import choice
from lustre import Layout, fs_info, striping_applies


def check_access(problems: list[str], cfg: dict[str, Any]) -> str:
    """``access``'s name: one of ACCESS_MODES."""
    return choice(problems, "access", cfg["access"]["name"], ACCESS_MODES)


def check_striping(problems: list[str], cfg: dict[str, Any]) -> dict[str, Any]:
    """The LayoutSpec's ``stripe_count`` and ``stripe_size`` (bytes), as ``lfs setstripe`` takes them."""
    stripe = cfg["stripe"]
    try:
        stripe_size = parse_size(cfg["stripe_size"])
    except ValueError as e:
        problems.append(f"stripe_size: {e}")
        stripe_size = 0
    if not isinstance(stripe, int) or isinstance(stripe, bool):
        problems.append(f"stripe={stripe!r} is not an integer: use -1 (all OSTs), 0 (default) or N >= 1")
        stripe = 1
    problems += Layout(stripe, stripe_size).problems()
    return {"stripe_count": stripe, "stripe_size": stripe_size}


def check_file_system(problems: list[str], data_root: Path, samples: Any, sample_size: int) -> dict[str, Any]:
    """The LayoutSpec's ``fs_type`` and ``striping_applicable`` of the file system at ``data_root`` (unknown when
    data_root has a problem), and whether the dataset's payload fits in that whole file system."""
    if any(p.startswith("data_root") for p in problems):
        return {"fs_type": "unknown", "striping_applicable": False}
    fs = fs_info(data_root)
    need = samples * sample_size if isinstance(samples, int) else 0
    if need > fs.total_bytes:
        problems.append(
            f"the dataset ({samples} samples x {format_size(sample_size)} = {format_size(need)}) is larger "
            f"than the whole file system at data_root ({format_size(fs.total_bytes)} on {fs.mount_point}): "
            "lower workload.samples or workload.sample_size"
        )
    return {"fs_type": fs.type, "striping_applicable": striping_applies(fs)}
