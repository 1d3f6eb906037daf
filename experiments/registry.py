"""The run side's registries of implementations: loaders by ``reader`` and workload kinds by ``kind``, each a name
mapped to ``"module:Class"`` and imported on first use (as fsspec's ``known_implementations``; the formats'
registry is :mod:`experiments.formats`, the storage backends' :mod:`lustre.registry`, the executors'
:mod:`experiments.executors`).

This module imports nothing of the rooms: validation (in :mod:`experiments.config`) asks it whether a name exists
and whether what its implementation needs is installed, without importing the implementation, and the kernel and
the runner look the implementation up here. A plug-in outside the product adds a name through an entry point of
the registry's group (``ddlio.loaders``, ``ddlio.kinds``): see docs/contributing.md.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from ddlio.lazy import LazyRegistry

#: reader name -> its :class:`~experiments.kernel.loaders.base.Loader` (what reads the dataset every epoch)
LOADERS: LazyRegistry = LazyRegistry({
    "native": "experiments.kernel.loaders.native:NativeLoader",
    "tf": "experiments.kernel.loaders.tf:TfLoader",
    "torch": "experiments.kernel.loaders.torch:TorchLoader",
}, group="ddlio.loaders")

#: kind name -> its :class:`~experiments.kinds.base.WorkloadKind` (what a point measures, and how)
KINDS: LazyRegistry = LazyRegistry({
    "train": "experiments.kinds.train:TrainKind",
    "checkpoint": "experiments.kinds.checkpoint:CheckpointKind",
}, group="ddlio.kinds")

#: the analyses of the store's points a kind's :attr:`~experiments.kinds.base.WorkloadKind.analyses` may name: the
#: figures, the guideline scenarios and the diagnose findings
ANALYSES = ("figures", "guidelines", "diagnose")
#: a built-in kind's analyses (None: all of them), read without importing the kind (a plug-in's are its class's
#: ``analyses``); tests/test_kind_seam.py holds each to its class
KIND_ANALYSES: dict[str, frozenset[str] | None] = {"train": None, "checkpoint": frozenset()}
#: a built-in kind's own conf group (its options, ``checkpoint.*``), and the check validation runs on them (read
#: without importing the kind: :func:`experiments.kinds.checkpoint.plan.check_options`)
KIND_GROUPS: dict[str, str] = {"checkpoint": "checkpoint"}
KIND_CHECKS: LazyRegistry = LazyRegistry({"checkpoint": "experiments.kinds.checkpoint.plan:check_options"})


@dataclass(frozen=True)
class Needs:
    """What an implementation needs beyond ddlio's own dependencies: a module to import, and how to install it."""

    module: str
    hint: str

    def met(self) -> bool:
        """True when :attr:`module` can be imported (found without importing it: TensorFlow takes seconds)."""
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):  # ValueError: blocked in sys.modules
            return False


#: the built-in loaders' needs, read without importing the loader (a plug-in's are its class's ``needs``)
LOADER_NEEDS: dict[str, Needs] = {
    "tf": Needs("tensorflow", "reader=tf needs TensorFlow: pip install -e '.[tf]' (or pip install tensorflow-cpu)"),
    "torch": Needs("torch", "reader=torch needs PyTorch: pip install -e '.[torch]'"),
}


#: workload knobs only one built-in loader takes, at their defaults: another loader refuses them away from these
LOADER_OPTIONS: dict[str, dict[str, object]] = {
    "torch": {"persistent_workers": False, "pin_memory": False, "start_method": "fork", "device": "auto"},
}


def needs_of(registry: LazyRegistry, builtin: dict[str, Needs], name: str) -> Needs | None:
    """What ``name``'s implementation needs: a built-in's from ``builtin``, a plug-in's from its class's ``needs``
    attribute (importing the plug-in); None when it needs nothing more."""
    if name in builtin:
        return builtin[name]
    if name not in registry or registry.path(name).startswith("experiments."):
        return None
    return getattr(registry[name], "needs", None)


def unknown(registry: LazyRegistry, key: str, value: str) -> str:
    """The message for a name the registry does not have, naming every one it has."""
    return f"{key}={value!r} is unknown: choose one of {', '.join(registry)}"


def kinds_for(analysis: str, stored: list[str]) -> list[str]:
    """Which of the ``stored`` kind names (as the store's ``points.kind`` holds them, train as ``"train"``) the
    analysis ``analysis`` (one of :data:`ANALYSES`) applies to, by each kind's declaration: a built-in's from
    :data:`KIND_ANALYSES`, a plug-in's from its class (imported); a kind no longer installed has none."""
    out = []
    for name in stored:
        if name in KIND_ANALYSES:
            applies = KIND_ANALYSES[name]
        else:
            try:
                applies = KINDS[name].analyses
            except (KeyError, ImportError):  # the plug-in that measured it is not installed here
                applies = frozenset()
        if applies is None or analysis in applies:
            out.append(name)
    return out
