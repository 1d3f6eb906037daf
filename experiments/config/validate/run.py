"""The run concern: what a sweep returns and in which order it runs its points, the reader, the repetition and
the seed."""

from __future__ import annotations

import importlib.util
from typing import Any

from experiments.config.schema import OBJECTIVES, ORDERS, READERS, TF_INSTALL_HINT, TORCH_INSTALL_HINT
from experiments.config.validate.values import int_range
from experiments.registry import KINDS, unknown


def tf_available(module: str = "tensorflow") -> bool:
    """True when TensorFlow (or ``module``) can be imported (without importing it: that takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: blocked in sys.modules
        return False



def check_run(problems: list[str], cfg: dict[str, Any]) -> dict[str, Any]:
    """The PointSpec's ``reader``, ``repeat`` and ``seed``; ``objective`` and ``order`` are checked (they are
    not part of a point)."""
    if cfg.get("objective", OBJECTIVES[0]) not in OBJECTIVES:
        problems.append(f"objective={cfg.get('objective')!r} is unknown: choose one of {', '.join(OBJECTIVES)}")
    if cfg.get("order", "given") not in ORDERS:
        problems.append(f"order={cfg.get('order')!r} is unknown: choose one of {', '.join(ORDERS)}")
    reader = cfg.get("reader", "native")
    if reader not in READERS:
        problems.append(f"reader={reader!r} is unknown: choose one of {', '.join(READERS)}")
    elif reader == "tf" and not tf_available():
        problems.append(TF_INSTALL_HINT)
    elif reader == "torch" and not tf_available("torch"):
        problems.append(TORCH_INSTALL_HINT)
    w = cfg.get("workload") or {}
    torch_knobs = {"persistent_workers": False, "pin_memory": False, "start_method": "fork"}
    off = [k for k, v in torch_knobs.items() if k in w and w[k] != v]
    if reader != "torch" and off:
        problems.append(f"workload.{', workload.'.join(off)} appl{'ies' if len(off) == 1 else 'y'} only to "
                        f"reader=torch (reader={reader!r}): leave {'it' if len(off) == 1 else 'them'} at the default "
                        "or set reader=torch")
    kind = cfg.get("kind", "train")
    if kind not in KINDS:
        problems.append(unknown(KINDS, "kind", kind))
    return {"reader": reader, "kind": kind, "repeat": int_range(problems, "repeat", cfg["repeat"], 0),
            "seed": int_range(problems, "seed", cfg["seed"], 0, 2**63 - 1)}
