"""The kind concern: a workload kind's own options (``checkpoint.*`` for ``kind=checkpoint``), checked by the kind's
own check (:data:`experiments.registry.KIND_CHECKS`, imported only for a point of that kind), and the knobs given
on the command line that do not apply to the point's kind, refused: a checkpoint option on a train point would
measure nothing different, and a format, workload or reader knob on a checkpoint point neither."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from experiments.registry import KIND_CHECKS, KIND_GROUPS

#: the knobs only ``kind=train`` reads (its dataset and loader), as given on the command line
TRAIN_ONLY = ("format", "workload", "reader")
_SLURM_MEM = re.compile(r"^\s*(\d+)\s*([KMGT]?)B?\s*$", re.IGNORECASE)


def _given(overrides: tuple[str, ...], group: str) -> list[str]:
    """The overrides that set ``group`` or one of its keys (``checkpoint=x``, ``checkpoint.size=y``, ``+...``)."""
    out = []
    for o in overrides:
        key = o.lstrip("+~").split("=", 1)[0]
        if key == group or key.startswith(group + "."):
            out.append(o)
    return out


def slurm_memory(cluster: dict[str, Any]) -> int | None:
    """Bytes a Slurm job asks for per node (``cluster.sbatch.mem``, Slurm's units: megabytes by default), None when
    it asks for none or for all of it (0)."""
    mem = (cluster.get("sbatch") or {}).get("mem")
    m = _SLURM_MEM.match(str(mem)) if mem is not None else None
    if not m or int(m.group(1)) == 0:
        return None
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or "M")


def available_memory() -> int | None:
    """This host's available memory (``MemAvailable`` of /proc/meminfo, bytes), None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_kind_options(problems: list[str], cfg: dict[str, Any], kind: str, access: str, nodes: int, ppn: int,
                       data_root: Path | None, seed: int, executor: str, overrides: tuple[str, ...]
                       ) -> dict[str, Any]:
    """The PointSpec's ``checkpoint`` (the kind's options, checked; {} for a kind without any), and one problem
    per command-line knob the kind does not read."""
    own = KIND_GROUPS.get(kind)
    for k, group in KIND_GROUPS.items():
        given = _given(overrides, group) if k != kind else []
        if given:
            problems.append(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to kind={k} only (this "
                            f"point is kind={kind}): drop {'it' if len(given) == 1 else 'them'}, or set kind={k}")
    if own is None:
        return {}
    given = [o for g in TRAIN_ONLY for o in _given(overrides, g)]
    if given:
        problems.append(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to kind=train only (kind={kind} "
                        f"writes the files {own}.layout and access say): drop {'it' if len(given) == 1 else 'them'}")
    options = cfg.get(own)
    if not isinstance(options, dict):
        problems.append(f"{own} must be a config group (e.g. {own}=... naming one of conf/{own}/), not {options!r}")
        return {}
    memory = available_memory() if executor == "local" else slurm_memory(cfg.get("cluster") or {})
    return KIND_CHECKS[kind](problems, options, nodes * ppn, ppn, access, data_root, seed, memory)
