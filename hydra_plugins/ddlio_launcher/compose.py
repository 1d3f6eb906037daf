"""Composition at memory speed: Hydra composes once per distinct combination of config-group choices, and each
point's value overrides (``stripe=4``, ``+key=``, ``++key=``, ``~key``) are applied to a copy of that composition
with Hydra's own override code (``ConfigLoaderImpl._apply_overrides_to_config``: the same ``+``/``++``/``~``
semantics and the same errors). ``hydra.overrides.task`` and ``hydra.job.override_dirname`` are set as Hydra sets
them. An override that is not provably a value override (a config group, a package ``@``, a ``hydra.`` key, a
sweep, anything that does not parse) makes the point a full Hydra composition, so the errors stay Hydra's own.

:meth:`FastComposer.task` goes one step further for the launcher, which needs only a point's task config as plain
data: it applies the point's value overrides to one working copy of the composition (without Hydra's node) and
undoes them after reading it, so a point costs no copy at all (a copy of the composition costs ~6-10 ms here).
Points with the command line's own group choices need no composition either: Hydra has composed the sweep's config
(the launcher's ``master``) from the command line's overrides less its sweeps, and a point that repeats all of
them (every point of a grid does) starts from a copy of that (a run of one point: ~0.1 s saved).

tests/test_compose_fast.py holds both results equal to ``load_sweep_config``, key by key.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf, ValueNode, open_dict

from ddlio.plain import copy_plain

#: ``key=<int>`` (with ``+``/``++``): Hydra parses the integer as ``int`` (tests/test_compose_fast.py checks
#: the parse against Hydra's); its parse is a copy of the parse of ``key=0`` with the value and text replaced
_INT_OVERRIDE = re.compile(r"(\+{0,2}[A-Za-z_][A-Za-z0-9_.]*)=(-?(?:0|[1-9][0-9]*))")


def _canonical(o: Any) -> str:
    """A parsed value override as a sweeper writes it into a point's overrides (``dry_run=true`` on the command
    line is ``dry_run=True`` in the point's: Hydra's basic sweeper re-renders each value), so the master's and a
    point's compare by key and value, not by how they were typed."""
    return f"{o.get_key_element()}={o.get_value_element_as_str()}"


class FastComposer:
    """Composes the points of one sweep: ``compose(overrides)`` equals Hydra's ``load_sweep_config``."""

    def __init__(self, config_loader: Any, master: DictConfig) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.loader, self.master = config_loader, master
        self.parser = OverridesParser.create()
        #: group-override tuple -> Hydra's composition of it (never handed out: points get copies)
        self.base: dict[tuple[str, ...], DictConfig] = {}
        #: group-override tuple -> the working copy :meth:`task` applies value overrides to (every key but hydra)
        self.work: dict[tuple[str, ...], DictConfig] = {}
        #: group-override tuple -> {top-level key: its resolved value} for the keys holding no interpolation
        #: (their value is theirs alone: a point that overrides none of them reads them from here)
        self.resolved: dict[tuple[str, ...], dict[str, Any]] = {}
        self._is_group: dict[str, bool] = {}
        self._parsed: dict[str, Any] = {}
        #: points composed by copy + value overrides, and by a full Hydra composition (for the bench and tests)
        self.fast = self.full = 0
        #: the master's own group overrides and value overrides (input lines), its sweeps left out; None when its
        #: overrides are not all plain group or value overrides (its composition then serves no point)
        self.master_split = self._master_split()

    def _master_split(self) -> tuple[tuple[str, ...], frozenset[str]] | None:
        lines = OmegaConf.select(self.master, "hydra.overrides.task", default=None)
        if lines is None:
            return None
        parsed = self.parse([str(x) for x in lines])
        if parsed is None:
            return None
        split = self.split([o.input_line for o in parsed if not o.is_sweep_override()])
        if split is None or any(o.is_delete() or o.is_add() for o in split[1]):  # re-applied, they would fail
            return None
        return split[0], frozenset(_canonical(o) for o in split[1])

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
                got = self._parse_int(line)
            if got is None:
                try:
                    [got] = self.parser.parse_overrides([line])
                except Exception:  # Hydra's own composition reports it as Hydra does
                    return None
                self._parsed[line] = got
            out.append(got)
        return out

    def _parse_int(self, line: str) -> Any:
        """Hydra's parse of ``key=<int>`` without Hydra's parser (~2 ms an override here: a sweep over
        ``repeat=range(10000)`` parses 10,000 of them), or None for any other form."""
        m = _INT_OVERRIDE.fullmatch(line)
        if m is None:
            return None
        template_line = f"{m.group(1)}=0"
        template = self._parsed.get(template_line)
        if template is None:
            [template] = self.parser.parse_overrides([template_line])
            self._parsed[template_line] = template
        got = dataclasses.replace(template, _value=int(m.group(2)), input_line=line)
        self._parsed[line] = got
        return got

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

    def _base(self, groups: tuple[str, ...]) -> DictConfig:
        """Hydra's composition of the group overrides ``groups`` (composed once, counted in ``full``/``fast``)."""
        base = self.base.get(groups)
        if base is None:
            base = self.base[groups] = self.loader.load_sweep_config(self.master, list(groups))
            self.full += 1
        else:
            self.fast += 1
        return base

    def task(self, overrides: Sequence[str]) -> dict[str, Any] | None:
        """The point's task config (every key but ``hydra``) as plain resolved data, equal to
        ``task_dict(compose(overrides))``; or None when it needs more than value overrides on a composition (a
        group or ``hydra.`` override, a deletion ``~key``, a value interpolating Hydra's node, a bad override):
        the caller then composes the point whole, with Hydra's result or Hydra's error."""
        split = self.split(overrides)
        if split is None:
            return None
        groups, values = split
        if any(o.is_delete() for o in values):  # undoing a deletion would move the key to the end of its parent
            return None
        # the master as the composition: its group choices, and all of its value overrides applied again here
        ms = self.master_split
        mastered = ms is not None and ms[0] == groups and ms[1] <= {_canonical(o) for o in values}
        key = (*groups, "<master>") if mastered else groups
        work = self.work.get(key)
        if work is None:
            if key is groups:
                try:
                    base = self._base(groups)
                except Exception:  # Hydra refuses the group choices: the caller's composition says how
                    return None
            else:
                base = self.master
                self.fast += 1
            work = copy.deepcopy(base)
            with open_dict(work):
                del work["hydra"]  # a value interpolating Hydra's node then fails to resolve: the point falls back
            OmegaConf.copy_cache(from_config=self.master, to_config=work)
            self.work[key] = work
            raw = OmegaConf.to_container(work, resolve=False)
            assert isinstance(raw, dict)
            self.resolved[key] = {str(k): v for k, v in raw.items() if not _interpolates(v)}
        else:
            self.fast += 1
        cached = self.resolved[key]
        from hydra._internal.config_loader_impl import ConfigLoaderImpl

        undo: list[tuple[DictConfig, Any, Any, Any]] = []
        try:
            for o in values:
                undo.append(_snapshot(work, o.key_or_group))
                ConfigLoaderImpl._apply_overrides_to_config([o], work)  # Hydra's semantics, one at a time
            touched = {o.key_or_group.split(".", 1)[0] for o in values}
            out: dict[str, Any] = {}
            for k in work:
                k = str(k)
                if k in cached and k not in touched:
                    out[k] = copy_plain(cached[k])
                else:
                    node = work._get_node(k)
                    out[k] = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else work[k]
            for parent, key, node, value in reversed(undo):
                content = parent.__dict__["_content"]
                if node is None:
                    content.pop(key, None)  # the override added it
                    continue
                content[key] = node  # the node the override found there (it may have put another)
                node._set_parent(parent)
                if value is not _CONTAINER:
                    node.__dict__["_val"] = value  # a leaf: its value as it was (the override may set it in place)
        except Exception:  # an override Hydra refuses, a list index, an interpolation of hydra.*: compose whole
            del self.work[key]  # it may be changed part way: the next point copies the composition again
            return None
        return out

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The point's composed config (a fresh object the caller may change)."""
        split = self.split(overrides)
        if split is None:
            self.full += 1
            return self.loader.load_sweep_config(self.master, list(overrides))
        groups, values = split
        base = self._base(groups)
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


class _Unsafe(Exception):
    """An override's key goes through a node :meth:`FastComposer.task` cannot undo (a list, an interpolation)."""


def _snapshot(root: DictConfig, key: str) -> tuple[DictConfig, Any, Any, Any]:
    """What undoes an override of ``key`` (dotted) on ``root``: ``(parent, name, node, value)`` for the outermost
    node the override can change: a leaf with its raw value (an interpolation stays one), a container as a copy
    (value ``_CONTAINER``); ``(parent, name, None, None)`` when the override adds ``name``."""
    node: Any = root
    names = key.split(".")
    for i, name in enumerate(names):
        if not isinstance(node, DictConfig) or node._is_none() or node._is_missing() or node._is_interpolation():
            raise _Unsafe(key)
        try:
            name = node._validate_and_normalize_key(name)  # the key as its parent's content holds it
        except Exception as e:
            raise _Unsafe(key) from e
        child = node.__dict__["_content"].get(name)
        if child is None:
            return node, name, None, None
        if isinstance(child, ValueNode):
            return node, name, child, child._value()
        if i == len(names) - 1 or not isinstance(child, DictConfig):
            return node, name, copy.deepcopy(child), _CONTAINER
        node = child
    raise _Unsafe(key)  # an empty key


#: :func:`_snapshot`'s mark of a container node (restored as the copy taken, not by value)
_CONTAINER = object()


def _interpolates(value: Any) -> bool:
    """True when the unresolved plain ``value`` holds an interpolation or resolver (``${...}``) anywhere."""
    if isinstance(value, dict):
        return any(_interpolates(v) for v in value.values())
    if isinstance(value, list):
        return any(_interpolates(v) for v in value)
    return isinstance(value, str) and "${" in value
