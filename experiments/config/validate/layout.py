"""The layout concern: how the ranks share the dataset (``access``), its striping, and the file system at
data_root (its type, whether striping applies there, whether the dataset fits). Sizes in bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddlio.units import format_size, parse_size
from experiments.config.schema import ACCESS_MODES
from experiments.config.validate.values import choice
from lustre import Layout, backend_of, fs_info, validate_at, validate_request


def check_access(problems: list[str], cfg: dict[str, Any]) -> str:
    """``access``'s name: one of ACCESS_MODES."""
    return choice(problems, "access", cfg["access"]["name"], ACCESS_MODES)


def _size(problems: list[str], cfg: dict[str, Any], key: str) -> int:
    try:
        return parse_size(cfg.get(key, 0))
    except ValueError as e:
        problems.append(f"{key}: {e}")
        return 0


def check_striping(problems: list[str], cfg: dict[str, Any]) -> dict[str, Any]:
    """The LayoutSpec's ``stripe_count``, ``stripe_size``, ``object_size`` (bytes) and ``pool``, parsed; whether
    the file system at data_root can apply them is its backend's word (:func:`check_file_system`)."""
    stripe = cfg["stripe"]
    stripe_size = _size(problems, cfg, "stripe_size")
    object_size = _size(problems, cfg, "object_size")
    pool = cfg.get("pool") or ""
    if not isinstance(stripe, int) or isinstance(stripe, bool):
        problems.append(f"stripe={stripe!r} is not an integer: use -1 (all OSTs), 0 (default) or N >= 1")
        stripe = 1
    if not isinstance(pool, str):
        problems.append(f"pool={pool!r} is not a pool name: give the name of a data pool, or leave it empty")
        pool = ""
    return {"stripe_count": stripe, "stripe_size": stripe_size, "object_size": object_size, "pool": pool}


def _request(striping: dict[str, Any]) -> Layout:
    return Layout(striping["stripe_count"], striping["stripe_size"], striping["object_size"], striping["pool"])


def check_file_system(problems: list[str], data_root: Path, samples: Any, sample_size: int,
                      striping: dict[str, Any] | None = None) -> dict[str, Any]:
    """The LayoutSpec's ``fs_type`` (the storage backend's name where it stripes: ``ceph`` for ceph-fuse's
    ``fuse``) and ``striping_applicable`` of the file system at ``data_root`` (unknown when data_root has a
    problem); whether the layout request (``striping``, from :func:`check_striping`) can be applied there, by its
    backend's rules; whether the dataset's payload fits in that whole file system."""
    request = _request(striping) if striping is not None else None
    if any(p.startswith("data_root") for p in problems):
        if request is not None:
            problems += validate_request(request)  # by the default rules: the request's own mistakes are still named
        return {"fs_type": "unknown", "striping_applicable": False}
    fs = fs_info(data_root)
    chosen = backend_of(fs)
    if request is not None:
        problems += validate_at(request, fs)
    need = samples * sample_size if isinstance(samples, int) else 0
    if need > fs.total_bytes:
        problems.append(
            f"the dataset ({samples} samples x {format_size(sample_size)} = {format_size(need)}) is larger "
            f"than the whole file system at data_root ({format_size(fs.total_bytes)} on {fs.mount_point}): "
            "lower workload.samples or workload.sample_size"
        )
    return {"fs_type": chosen.name if chosen.stripes else fs.type, "striping_applicable": chosen.stripes}
