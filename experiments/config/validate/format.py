"""The format concern: ``format`` is a known format, its options are valid, and its layout can hold the samples'
shape (the checks are the format's own: ``Format.problems`` in experiments/formats)."""

from __future__ import annotations

from typing import Any

from experiments.config.validate.values import choice
from experiments.config.validate.workload import sample_shape
from experiments.formats import FORMATS


def check_format(problems: list[str], cfg: dict[str, Any]) -> tuple[dict[str, Any], tuple[int, ...]]:
    """The FormatSpec's fields (``name``, ``options``: the group's values minus ``name``, in the conf's order) and
    ``workload.sample_shape`` as a tuple (the format's layout is checked against it)."""
    options = dict(cfg["format"])
    name = options.pop("name")
    choice(problems, "format", name, tuple(sorted(FORMATS)))
    shape = sample_shape(problems, cfg["workload"].get("sample_shape") or [])
    if name in FORMATS:
        problems += FORMATS[name].problems(options, shape)
    return {"name": name, "options": options}, shape
