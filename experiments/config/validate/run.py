"""The run concern: what a sweep returns and in which order it runs its points, the reader, the repetition and
the seed."""

from __future__ import annotations

import importlib.util
from typing import Any

from experiments.config.schema import OBJECTIVES, ORDERS
from experiments.config.validate.values import int_range
from experiments.formats import FORMATS
from experiments.formats.image import ImageFormat
from experiments.registry import KINDS, LOADER_NEEDS, LOADER_OPTIONS, LOADERS, needs_of, unknown


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
    if reader not in LOADERS:
        problems.append(unknown(LOADERS, "reader", reader))
    else:
        needs = needs_of(LOADERS, LOADER_NEEDS, reader)
        if needs is not None and not needs.met():
            problems.append(needs.hint)
    w = cfg.get("workload") or {}
    for owner, options in LOADER_OPTIONS.items():
        off = [k for k, v in options.items() if k in w and w[k] != v]
        if reader != owner and off:
            problems.append(f"workload.{', workload.'.join(off)} appl{'ies' if len(off) == 1 else 'y'} only to "
                            f"reader={owner} (reader={reader!r}): leave {'it' if len(off) == 1 else 'them'} at the "
                            f"default or set reader={owner}")
    check_reader_format(problems, reader, cfg)
    kind = cfg.get("kind", "train")
    if kind not in KINDS:
        problems.append(unknown(KINDS, "kind", kind))
    return {"reader": reader, "kind": kind, "repeat": int_range(problems, "repeat", cfg["repeat"], 0),
            "seed": int_range(problems, "seed", cfg["seed"], 0, 2**63 - 1)}


def check_reader_format(problems: list[str], reader: str, cfg: dict[str, Any]) -> None:
    """What a reader cannot hand on: ``reader=tf`` hands an image format's samples on as the encoded images
    (tf.data's generator over ddlio's readers; no decode step), which ``workload.sample_shape`` cannot shape
    (tests/test_reader_matrix.py runs every reader on every format validation accepts)."""
    fmt = (cfg.get("format") or {}).get("name")
    shape = list((cfg.get("workload") or {}).get("sample_shape") or [])
    if reader == "tf" and shape and fmt in FORMATS and issubclass(FORMATS[fmt], ImageFormat):
        problems.append(f"reader=tf hands format={fmt}'s samples on as encoded images, which "
                        f"workload.sample_shape={shape} cannot shape: leave workload.sample_shape=[] or choose "
                        "reader=torch (it decodes each image) or reader=native")

