"""Hydra's run mode without a composition of its own.

Hydra's main composes the whole config once (``Hydra.get_mode``) only to read ``hydra.mode`` from it, and then
composes it again for the multirun: ~0.1 s of every ``python sweep.py`` here, a twentieth of a small point's wall
time. ddlio's configs never set ``hydra.mode`` (``tests/test_hydra_mode.py`` holds it over every preset), so for a
multirun whose overrides and config directories cannot set it either, Hydra's answer is known without composing:
``None`` ("not set", after which Hydra adds ``hydra.mode=MULTIRUN`` itself, as it does now). Anything else (an
override of ``hydra.mode`` or of a whole ``hydra`` node, a ``--config-dir``, ``--run``) asks Hydra's own
``get_mode``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any


def mode_is_unset(args: Sequence[str]) -> bool:
    """True when Hydra's ``get_mode`` would find ``hydra.mode`` unset for this command line (``sys.argv[1:]`` of
    ``sweep.py``, ``--multirun`` included): a multirun of ddlio's own configs whose overrides touch neither
    ``hydra.mode`` nor the ``hydra`` node as a whole, with no config directory or search path of the user's."""
    if "--multirun" not in args and "-m" not in args:
        return False
    for arg in args:
        if arg.startswith("-"):
            if arg in ("--multirun", "-m"):
                continue
            return False  # --config-dir, --config-path, --config-name ...: configs ddlio does not know
        key = arg.split("=", 1)[0].lstrip("+~")
        if key in ("hydra", "hydra.mode") or key.startswith(("hydra.mode@", "hydra/", "hydra.searchpath")):
            if key.startswith("hydra/") and key.split("/", 1)[1].split("@", 1)[0] in ("sweeper", "launcher"):
                continue  # hydra/sweeper=optuna, hydra/launcher=basic: their configs set no mode
            return False
    return True


@contextlib.contextmanager
def known_mode(args: Sequence[str]) -> Iterator[None]:
    """While Hydra's main runs: its ``get_mode`` answers ``None`` without composing when
    :func:`mode_is_unset` says that is its answer for ``args``; unchanged otherwise (and on a Hydra without a
    ``get_mode``)."""
    try:
        from hydra._internal.hydra import Hydra  # Hydra's own class: the call to spare is inside its main
    except ImportError:  # pragma: no cover - a Hydra laid out otherwise: its own get_mode runs
        yield
        return
    real = getattr(Hydra, "get_mode", None)
    if real is None or not mode_is_unset(args):
        yield
        return

    def get_mode(self: Any, config_name: str | None, overrides: list[str]) -> None:
        return None

    Hydra.get_mode = get_mode  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode = real  # type: ignore[method-assign]
