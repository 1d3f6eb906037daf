"""The launcher's and the sweepers' (the grid, accelerators) typed configs, registered in Hydra's ConfigStore."""


from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class DdlioLauncherConf:
    _target_: str = "hydra_plugins.ddlio_launcher.launcher.DdlioLauncher"


@dataclass
class DdlioSweeperConf:
    _target_: str = "hydra_plugins.ddlio_launcher.sweeper.DdlioSweeper"
    # points per batch handed to the launcher; null = the whole grid at once (validated before anything runs)
    max_batch_size: Any = None
    # sweep parameters set in a config file (as the basic sweeper's hydra.sweeper.params)
    params: Any = field(default_factory=dict)
    # the objective's direction for an adaptive sweeper chosen instead (conf/config.yaml sets it for Optuna);
    # a grid measures every point whatever it says
    direction: str = "maximize"


@dataclass
class AcceleratorsSweeperConf:
    """``hydra/sweeper=accelerators`` (accelerators.py): the most accelerators kept at AU >= ``au``."""

    _target_: str = "hydra_plugins.ddlio_launcher.accelerators.AcceleratorsSweeper"
    # what the count grows: ppn (ranks of one node) | nodes (nodes of ppn ranks) | ppn_then_nodes (ppn up to
    # per_node on one node, then nodes of per_node ranks)
    axis: str = "ppn"
    # the most accelerators (ranks in all: nodes x ppn) tried
    max: int = 8
    # the AU floor (0-1]; null = the workload's workload.au_floor (0.90 unless it says)
    au: float | None = None
    # repetitions (repeat=0..N-1) of the last fed and the first starved counts, decided by their bootstrap interval
    repeats: int = 3
    # ranks a node holds (its accelerators): where axis=ppn_then_nodes turns from ppn to nodes
    per_node: int = 0
    # overrides set in a config file (as the grid's hydra.sweeper.params): the configurations searched
    params: Any = field(default_factory=dict)
    # accepted as every ddlio sweeper's (conf/config.yaml sets it); AU is maximised whatever it says
    direction: str = "maximize"


#: Hydra plug-ins ddlio works with that are installed apart (found by Hydra's scan of the ``hydra_plugins``
#: namespace package): a choice of one that is not installed -> the line that installs it
PLUGIN_EXTRAS: dict[str, str] = {
    "hydra/sweeper=optuna": "hydra/sweeper=optuna needs the Optuna sweeper (hydra-optuna-sweeper): "
                            "pip install -e '.[tune]'",
    "hydra/launcher=submitit_local": "hydra/launcher=submitit_local needs hydra-submitit-launcher: "
                                     "pip install hydra-submitit-launcher",
    "hydra/launcher=submitit_slurm": "hydra/launcher=submitit_slurm needs hydra-submitit-launcher: "
                                     "pip install hydra-submitit-launcher",
}


cs = ConfigStore.instance()
cs.store(group="hydra/launcher", name="ddlio", node=DdlioLauncherConf, provider="ddlio")
cs.store(group="hydra/sweeper", name="ddlio", node=DdlioSweeperConf, provider="ddlio")
cs.store(group="hydra/sweeper", name="accelerators", node=AcceleratorsSweeperConf, provider="ddlio")
