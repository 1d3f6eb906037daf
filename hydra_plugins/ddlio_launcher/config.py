"""The launcher's and the grid sweeper's typed configs, registered in Hydra's ConfigStore."""


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
