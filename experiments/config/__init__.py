"""The configuration of a point: its schema (Hydra dataclasses, :mod:`.schema`), the frozen :class:`PointSpec` a
point runs from (:mod:`.point`), its stored form and keys (:mod:`.stored`), and :func:`validate` (:mod:`.validate`,
one module per concern), which checks every value's meaning and reports every problem of a point at once.

Importers use the names re-exported here: ``from experiments.config import PointSpec, validate``.
"""

from __future__ import annotations

from experiments.config.point import (
    CLUSTERS,
    SLURM_ONLY,
    ClusterSpec,
    FormatSpec,
    LayoutSpec,
    LocalCluster,
    PointSpec,
    SlurmCluster,
    WorkloadSpec,
)
from experiments.config.schema import (
    ACCESS_MODES,
    CACHE_POLICIES,
    COMPUTE_MODES,
    EXECUTORS,
    FORMAT_SCHEMAS,
    MAX_COMPUTE_THREADS,
    MAX_SAMPLE_SIZE,
    MAX_TIMEOUT_MIN,
    OBJECTIVES,
    ORDERS,
    READERS,
    SHUFFLES,
    TF_INSTALL_HINT,
    TORCH_INSTALL_HINT,
    AccessConf,
    ClusterConf,
    DdlioConf,
    WorkloadConf,
    register_configs,
)
from experiments.config.stored import KEYLESS_DEFAULTS, SCHEMA_VERSION, STORED_FORM
from experiments.config.validate import check_writable_dir, resolve_command, tf_available, validate
from experiments.formats.base import FormatConf

__all__ = [
    "ACCESS_MODES", "CACHE_POLICIES", "CLUSTERS", "COMPUTE_MODES", "EXECUTORS", "FORMAT_SCHEMAS", "KEYLESS_DEFAULTS",
    "MAX_COMPUTE_THREADS", "MAX_SAMPLE_SIZE", "MAX_TIMEOUT_MIN", "OBJECTIVES", "ORDERS", "READERS", "SCHEMA_VERSION",
    "SHUFFLES", "SLURM_ONLY", "STORED_FORM", "TF_INSTALL_HINT", "TORCH_INSTALL_HINT",
    "AccessConf", "ClusterConf", "ClusterSpec",
    "DdlioConf", "FormatConf", "FormatSpec", "LayoutSpec", "LocalCluster", "PointSpec", "SlurmCluster",
    "WorkloadConf", "WorkloadSpec", "check_writable_dir", "register_configs", "resolve_command", "tf_available",
    "validate",
]
