"""The grid sweeper ddlio uses by default: Hydra's basic sweeper without its second composition of every point."""

from __future__ import annotations

from collections.abc import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

from hydra_plugins.ddlio_launcher.launcher import DdlioLauncher


class DdlioSweeper(BasicSweeper):
    """Hydra's basic sweeper (every combination of the comma-separated values), with one change: it skips its
    check that every point composes when the launcher is ddlio's, which composes and validates every point of
    the batch before anything runs anyway; composing twice cost ~85 ms per point. ``direction`` is accepted (and
    ignored) so that the same config selects the direction of an adaptive sweeper."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None,
                 direction: str = "maximize") -> None:
        super().__init__(max_batch_size=max_batch_size, params=params)

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        if not isinstance(self.launcher, DdlioLauncher):
            super().validate_batch_is_legal(batch)
