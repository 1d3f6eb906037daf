"""Composition at memory speed: Hydra composes once per distinct combination of config-group choices, and each
point's value overrides (``stripe=4``, ``+key=``, ``++key=``, ``~key``) are applied to a copy of that composition
with Hydra's own override code (``ConfigLoaderImpl._apply_overrides_to_config``: the same ``+``/``++``/``~``
semantics and the same errors). ``hydra.overrides.task`` and ``hydra.job.override_dirname`` are set as Hydra sets
them. An override that is not provably a value override (a config group, a package ``@``, a ``hydra.`` key, a
sweep, anything that does not parse) makes the point a full Hydra composition, so the errors stay Hydra's own.

tests/test_compose_fast.py holds the result equal to ``load_sweep_config``, key by key.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict


class FastComposer:
    """Composes the points of one sweep: ``compose(overrides)`` equals Hydra's ``load_sweep_config``."""

    def __init__(self, config_loader: Any, master: DictConfig) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.loader, self.master = config_loader, master
        self.parser = OverridesParser.create()
        #: group-override tuple -> Hydra's composition of it (never handed out: points get copies)
        self.base: dict[tuple[str, ...], DictConfig] = {}
        self._is_group: dict[str, bool] = {}
        self._parsed: dict[str, Any] = {}
        #: points composed by copy + value overrides, and by a full Hydra composition (for the bench and tests)
        self.fast = self.full = 0

    def _group(self, key: str) -> bool:
        got = self._is_group.get(key)
        if got is None:
            got = self._is_group[key] = bool(self.loader.repository.group_exists(key))
        return got

    def parse(self, overrides: Sequence[str]) -> list[Any] | None:
        """Hydra's parse of each override (cached by its text: a sweep repeats them), or None when one fails."""
        out = []
        for line in overrides:
            got = self._parsed.get(line)
            if got is None:
                try:
                    [got] = self.parser.parse_overrides([line])
                except Exception:  # Hydra's own composition reports it as Hydra does
                    return None
                self._parsed[line] = got
            out.append(got)
        return out

    def split(self, overrides: Sequence[str]) -> tuple[tuple[str, ...], list[Any]] | None:
        """``(group overrides, parsed value overrides)``, or None when a full composition is needed."""
        parsed = self.parse(overrides)
        if parsed is None:
            return None
        groups: list[str] = []
        values = []
        for o in parsed:
            key = o.key_or_group
            if o.is_sweep_override() or o.package is not None or key == "hydra" or key.startswith("hydra"):
                return None
            if self._group(key) or self._group(key.replace(".", "/")):
                groups.append(o.input_line)
            else:
                values.append(o)
        return tuple(groups), values

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The point's composed config (a fresh object the caller may change)."""
        split = self.split(overrides)
        if split is None:
            self.full += 1
            return self.loader.load_sweep_config(self.master, list(overrides))
        groups, values = split
        base = self.base.get(groups)
        if base is None:
            base = self.base[groups] = self.loader.load_sweep_config(self.master, list(groups))
            self.full += 1
        else:
            self.fast += 1
        if not values:
            cfg = copy.deepcopy(base)
            OmegaConf.copy_cache(from_config=self.master, to_config=cfg)
            return cfg
        from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname

        cfg = copy.deepcopy(base)
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)  # Hydra's errors, Hydra's semantics
        app = self.parse(overrides)  # none is a hydra override here (they fall back above): all are the task's
        dirname_conf = cfg.hydra.job.config.override_dirname
        with open_dict(cfg.hydra):
            cfg.hydra.overrides.task = list(overrides)
            cfg.hydra.job.override_dirname = get_overrides_dirname(
                overrides=app, kv_sep=dirname_conf.kv_sep, item_sep=dirname_conf.item_sep,
                exclude_keys=dirname_conf.exclude_keys)
        OmegaConf.copy_cache(from_config=self.master, to_config=cfg)
        return cfg
