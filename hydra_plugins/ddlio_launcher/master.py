"""The sweep's own composition when a swept config group's option is overridden: ``-m format=npz,npy
format.load=whole``.

Before a multirun, Hydra composes the sweep's config (the "master": Hydra's node, the sweeper's and launcher's
settings) from the command line less its sweeps. A swept group then takes its *default* option there
(``format=hdf5``), and an override of a key only the swept options have (``format.load``, npz's and npy's) is
refused before any point is composed (Hydra's issue #2888: "expected multirun staging behavior"), though every
point of the sweep has that key. Each point is composed on its own later (Hydra's ``load_sweep_config``, in run
mode), with its own option, and refused there if its option lacks the key.

:func:`swept_groups_master` lets the master compose with one of the sweep's own combinations of group options in
place of the sweeps (the first that composes, in the sweep's order), and puts the command line's overrides back
in ``hydra.overrides.task``: the sweeper still expands the sweep as given. Nothing of the master's task keys
reaches a point (each point is composed whole), so which combination composed it changes no point. When no
combination composes, the first combination's error is raised: it names an option the sweep really has.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterator
from typing import Any

#: at most this many combinations of the swept groups' options are tried for the master (each a composition)
MAX_TRIES = 32
#: a group option that can be written back as a plain override value
_PLAIN = re.compile(r"[A-Za-z0-9_./-]+")


def _swept_groups(loader: Any, overrides: list[str]) -> list[tuple[int, str, list[str]]] | None:
    """``(index, key element, options)`` per swept config-group override of ``overrides``, in order; None when
    one does not parse or a swept group's options cannot be listed as plain values."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # lazy: only after a refusal

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # Hydra's own composition has reported it already
        return None
    out = []
    for i, o in enumerate(parsed):
        if not o.is_sweep_override() or o.is_hydra_override():
            continue
        if not loader.repository.group_exists(o.key_or_group):
            continue
        o.config_loader = loader  # a glob(...) sweep lists the group's options through it
        try:
            options = list(o.sweep_string_iterator())
        except Exception:
            return None
        if not options or not all(_PLAIN.fullmatch(x) for x in options):
            return None
        out.append((i, o.get_key_element(), options))
    return out


def combinations(loader: Any, overrides: list[str]) -> Iterator[list[str]]:
    """The command line ``overrides`` with each swept config group set to one of its options, combination by
    combination in the sweep's order (at most :data:`MAX_TRIES`); nothing when no group is swept."""
    swept = _swept_groups(loader, overrides)
    if not swept:
        return
    choices = itertools.product(*(options for _, _, options in swept))
    for combo in itertools.islice(choices, MAX_TRIES):
        lines = list(overrides)
        for (i, key, _), option in zip(swept, combo, strict=True):
            lines[i] = f"{key}={option}"
        yield lines


@contextlib.contextmanager
def swept_groups_master() -> Iterator[None]:
    """While Hydra's main runs: a multirun's master composition that Hydra refuses is retried with the sweep's
    own combinations of swept group options (see the module); every other composition is Hydra's, unchanged."""
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl  # the composition to retry is inside it
        from hydra.errors import ConfigCompositionException
        from hydra.types import RunMode
    except ImportError:  # pragma: no cover - a Hydra laid out otherwise: its own composition runs
        yield
        return
    real = ConfigLoaderImpl.load_configuration

    def load_configuration(self: Any, config_name: str | None, overrides: list[str], run_mode: Any,
                           *args: Any, **kwargs: Any) -> Any:
        try:
            return real(self, config_name, overrides, run_mode, *args, **kwargs)
        except ConfigCompositionException:
            if run_mode != RunMode.MULTIRUN:
                raise
            first: BaseException | None = None
            for lines in combinations(self, list(overrides)):
                try:
                    cfg = real(self, config_name, lines, run_mode, *args, **kwargs)
                except ConfigCompositionException as e:
                    first = first or e
                    continue
                _restore_task(cfg, list(overrides), lines)
                return cfg
            if first is not None:
                raise first from first.__cause__  # the first point's own refusal (sweep.py reads its cause)
            raise

    ConfigLoaderImpl.load_configuration = load_configuration  # type: ignore[method-assign]
    try:
        yield
    finally:
        ConfigLoaderImpl.load_configuration = real  # type: ignore[method-assign]


def _restore_task(cfg: Any, given: list[str], used: list[str]) -> None:
    """Put the command line's own override lines back in ``hydra.overrides.task`` (the sweeper expands those)."""
    from omegaconf import open_dict  # lazy: as Hydra

    back = dict(zip(used, given, strict=True))
    with open_dict(cfg.hydra):
        cfg.hydra.overrides.task = [back.get(str(x), str(x)) for x in cfg.hydra.overrides.task]
