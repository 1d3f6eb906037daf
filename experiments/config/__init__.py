"""The configuration of a point: its schema (Hydra dataclasses, :mod:`.schema`), the frozen :class:`PointSpec` a
point runs from, its stored form and keys (:mod:`.point`), the one table of a point's fields that those views
are derived from or held to (:mod:`.fields`), and :func:`validate` (:mod:`.validate`,
one module per concern), which checks every value's meaning and reports every problem of a point at once.

Importers use the names re-exported here, ``from experiments.config import PointSpec``, each imported from its module
on first use: an MPI rank that needs a PointSpec does not load the validation. :func:`validate` itself is
``from experiments.config.validate import validate`` (the name here is the package).
"""

from __future__ import annotations

from ddlio.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("CLUSTERS", "SLURM_ONLY", "ClusterSpec", "FormatSpec", "LayoutSpec", "LocalCluster", "PointSpec",
                     "SlurmCluster", "WorkloadSpec"), ".point"),
    **dict.fromkeys(("ACCESS_MODES", "CACHE_POLICIES", "COMPUTE_MODES", "EXECUTORS", "FORMAT_SCHEMAS",
                     "MAX_COMPUTE_THREADS", "MAX_SAMPLE_SIZE", "MAX_TIMEOUT_MIN", "OBJECTIVES", "ORDERS",
                     "SHUFFLES", "TF_INSTALL_HINT", "TORCH_INSTALL_HINT", "AccessConf", "ClusterConf", "DdlioConf",
                     "SlurmClusterConf", "WorkloadConf", "register_configs"), ".schema"),
    **dict.fromkeys(("SCHEMA_VERSION",), ".point"),
    **dict.fromkeys(("DERIVED_KEYS", "FIELDS", "KEYLESS_DEFAULTS", "STORED_FORM"), ".fields"),
    **dict.fromkeys(("check_writable_dir", "tf_available"), ".validate"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = sorted(_EXPORTS, key=str.casefold)
