"""The frozen point: :class:`PointSpec` and its sub-specs, one per concern (format, layout, workload, cluster), as
:func:`~experiments.config.validate` builds them from a composed config: sizes in bytes, times in seconds, paths
absolute; and its stored form and keys.

The stored form (:func:`to_stored`: the store's ``points.config`` column, run folders' records, the kernel's spec)
is flat, as ddlio stored it before the point was nested; :func:`stored_parts` reads it back, as this or any
earlier ddlio stored it. The keys hash what changes the bytes on disk (:func:`dataset_params`) and what changes the
measurement beyond them (:func:`measurement_params`); fields added after points were first stored stay out of the
stored form and the keys at their defaults, so that a point measured before keeps its stored bytes and its key.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from ddlio.plain import copy_plain
from experiments.config.fields import DERIVED_KEYS, KEYLESS_DEFAULTS, STORED_FORM  # noqa: F401  (DERIVED_KEYS: re-exported)
from experiments.config.schema import SlurmClusterConf
from experiments.formats import FORMATS
from lustre import Layout, describe

# ------------------------------------------------------------------------------------ stored form and keys
# STORED_FORM (the stored form of a point: stored key, part, field, in the stored order), KEYLESS_DEFAULTS (fields
# added later, left out of the stored form and the point key at these values) and DERIVED_KEYS (what the stored form
# adds) are derived from the one table of a point's fields, experiments.config.fields.FIELDS.
#: version of the key derivation, hashed into every point key
SCHEMA_VERSION = 1
#: the parts of a point: "" is the point itself, the others its sub-specs (PointSpec.format, .layout, .workload)
PARTS = ("", "format", "layout", "workload")


def digest(obj: Any) -> str:
    """The key of ``obj``: the first 20 hex digits of the SHA-256 of its canonical JSON."""
    import hashlib  # here: an MPI rank, which never computes a key, does not load OpenSSL's libcrypto

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:20]


def to_stored(point: PointSpec) -> dict[str, Any]:
    """The stored form of ``point`` (:data:`STORED_FORM`), with the derived ranks, num_files and keys."""
    d: dict[str, Any] = {}
    for key, part, name in STORED_FORM:
        value = getattr(getattr(point, part) if part else point, name)
        if key == "cluster":
            value = point.cluster.to_dict()
        elif key == "overrides":
            value = list(value)
        if key in KEYLESS_DEFAULTS and value == KEYLESS_DEFAULTS[key]:  # added later, at its default: the
            continue  # stored form stays as it was
        d[key] = copy.deepcopy(value)
    d["ranks"] = point.ranks
    d["num_files"] = point.num_files
    d["dataset_key"] = point.dataset_key
    d["point_key"] = point.point_key
    return d


def stored_parts(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The fields of a stored point by part (:data:`PARTS`), as this or any earlier ddlio stored it: keys a version
    did not store are left out (they take their defaults, so the keys of points measured before stay what they
    were); JSON's lists become the tuples of the specs; ``cluster`` stays the stored dict."""
    parts: dict[str, dict[str, Any]] = {part: {} for part in PARTS}
    for key, part, name in STORED_FORM:
        if key in d:
            parts[part][name] = d[key]
    if "sample_shape" in parts["workload"]:
        parts["workload"]["sample_shape"] = tuple(parts["workload"]["sample_shape"])  # a list, from JSON
    top = parts[""]
    top["cluster"] = top.get("cluster") or {}
    top["overrides"] = tuple(top.get("overrides", ()))
    return parts


def dataset_params(point: PointSpec) -> dict[str, Any]:
    """Everything that changes the bytes on disk or their layout (hashed into the dataset key)."""
    w, lay = point.workload, point.layout
    params: dict[str, Any] = {
        "format": point.format.name,
        "format_options": point.format.bytes_options(),
        "samples": w.samples,
        "sample_size": w.sample_size,
        "sample_size_stdev": w.sample_size_stdev,
        "payload": w.payload,
        "num_files": point.num_files,
        "seed": point.seed,
        "data_root": point.data_root,
        # added later: present only when given, so datasets generated before keep their keys
        **({"sample_shape": list(w.sample_shape)} if w.sample_shape else {}),
    }
    if lay.striping_applicable:  # off Lustre, points that differ only in striping share one dataset
        params["stripe_count"] = lay.stripe_count
        params["stripe_size"] = lay.stripe_size
        # added later: present only when given (refused where the backend does not apply them)
        params.update({k: getattr(lay, k) for k in ("object_size", "pool") if getattr(lay, k)})
    return params


def measurement_params(point: PointSpec) -> dict[str, Any]:
    """What changes the measurement beyond the dataset (hashed with the dataset key into the point key)."""
    w, lay = point.workload, point.layout
    return {
        "access": lay.access,
        "read_options": point.format.read_options(),
        "stripe_count": lay.stripe_count,
        "stripe_size": lay.stripe_size,
        **{k: getattr(lay, k) for k in ("object_size", "pool") if getattr(lay, k)},  # added later: when given
        "nodes": point.nodes,
        "ppn": point.ppn,
        "batch_size": w.batch_size,
        "epochs": w.epochs,
        "compute_time": w.compute_time,
        "compute_time_stdev": w.compute_time_stdev,
        # added later: present only at compute=cpu, so points measured before keep their keys
        **({"compute": w.compute, "compute_threads": w.compute_threads} if w.compute != "sleep" else {}),
        "cache": w.cache,
        # added later: present only where they apply, so points measured before keep their keys
        **({"settle": True} if w.cache == "cold" and w.settle else {}),
        **({"flush_size": w.flush_size} if w.cache == "storage_cold" else {}),
        "shuffle": w.shuffle,
        "drop_last": w.drop_last,
        "read_threads": w.read_threads,
        "prefetch": w.prefetch,
        "reader": point.reader,
        # added later: present only away from train, the kind every earlier point measured
        **({"kind": point.kind} if point.kind != KEYLESS_DEFAULTS["kind"] else {}),
        **({"checkpoint": point.checkpoint} if point.checkpoint else {}),
        # added later (reader=torch's DataLoader knobs): present only away from their defaults
        **{k: getattr(w, k) for k in ("persistent_workers", "pin_memory", "start_method", "device")
           if getattr(w, k) != KEYLESS_DEFAULTS[k]},
        "trace": w.trace,
        # the MPI launch line and the ranks' environment decide which MPI library and PMI run the kernel
        "launch": point.cluster.launch,
        "env": dict(sorted(point.cluster.env.items())),
        "repeat": point.repeat,
        "cluster": point.cluster.name,
    }


def dataset_key(point: PointSpec) -> str:
    """The key of the point's dataset (:func:`dataset_params`)."""
    return digest(dataset_params(point))


def point_key(point: PointSpec) -> str:
    """The key of the point: its dataset key, :func:`measurement_params` and :data:`SCHEMA_VERSION`."""
    return digest({"dataset": dataset_key(point), **measurement_params(point), "schema": SCHEMA_VERSION})


#: How a point measured by an earlier method differs from one measured today, by the knob whose arrival changed the
#: method: before b63f0f0 a cold point's dataset was not settled (no untimed read before its first measured epoch),
#: and the point key held no ``settle``. Such a point keeps its key; :func:`earlier_point_keys` finds it.
EARLIER_METHODS = {
    "settle": "cold cache without settling (no untimed read of a fresh dataset before its first measured epoch; "
              "ddlio before b63f0f0)",
}


def earlier_point_keys(point: PointSpec) -> dict[str, str]:
    """The keys an earlier ddlio gave this measurement when it measured it by an earlier method, each with how
    that method differs (:data:`EARLIER_METHODS`); empty when today's method is the only one it ever had.

    A sweep that finds the point under one of these keys skips it and says so (``force=true`` measures it by
    today's method, under :func:`point_key`): keys never change under stored points, and a stored point's method
    is what its key implies."""
    out: dict[str, str] = {}
    params = measurement_params(point)
    if params.pop("settle", False):  # a settled cold point: before settling, the same command gave this key
        out[digest({"dataset": dataset_key(point), **params, "schema": SCHEMA_VERSION})] = EARLIER_METHODS["settle"]
    return out


# ------------------------------------------------------------------------------------------------ the specs
@dataclass(frozen=True)
class FormatSpec:
    """The file format and its options (the format's config group minus ``name``; see experiments/formats)."""

    # one of experiments.formats.FORMATS
    name: str
    # the format's options as composed, in the conf's order (FORMATS[name].conf)
    options: dict[str, Any] = field(default_factory=dict)

    def bytes_options(self) -> dict[str, Any]:
        """The options that change the bytes written (read-only options such as decode are left out)."""
        fmt = FORMATS[self.name]
        return {k: v for k, v in sorted(self.options.items())
                if k not in fmt.read_options and not fmt.at_default(k, v)}

    def read_options(self) -> dict[str, Any]:
        """The options that change only how files are read (options at a keyless default left out, so that adding
        a knob leaves the keys of existing points unchanged)."""
        fmt = FORMATS[self.name]
        return {k: v for k, v in sorted(self.options.items())
                if k in fmt.read_options and not fmt.at_default(k, v)}


@dataclass(frozen=True)
class LayoutSpec:
    """How the dataset lies on the file system and how the ranks share it."""

    # shared | fpp (ACCESS_MODES)
    access: str
    # Lustre stripe count as `lfs setstripe -c` takes it (-1 all OSTs, 0 the default, N >= 1)
    stripe_count: int
    # Lustre stripe size, bytes (0: the file system's default)
    stripe_size: int
    # the file system at data_root when the point was validated (lustre.fs.fs_info(...).type)
    fs_type: str = "unknown"
    # whether striping is applied there: the storage backend of its file system stripes (lustre.striping_applies)
    striping_applicable: bool = False
    # CephFS object size, bytes (0: the directory's), and the layout's data pool ("" the directory's)
    object_size: int = 0
    pool: str = ""


@dataclass(frozen=True)
class WorkloadSpec:
    """The dataset and the training loop that reads it: sizes in bytes, times in seconds."""

    # samples in the dataset
    samples: int
    # mean sample size and its standard deviation, bytes
    sample_size: int
    sample_size_stdev: int
    # samples per file (fpp: at most this many)
    samples_per_file: int
    # samples per rank per training step, and passes over the dataset
    batch_size: int
    epochs: int
    # emulated compute per batch, seconds
    compute_time: float
    # cold | warm | storage_cold (CACHE_POLICIES)
    cache: str
    # the preset's name (informational)
    name: str = "custom"
    # random | zeros | a compressibility ratio as a float string (experiments.formats.base.parse_payload)
    payload: str = "random"
    # standard deviation of the compute time per batch, seconds
    compute_time_stdev: float = 0.0
    # none | file | sample (SHUFFLES)
    shuffle: str = "none"
    drop_last: bool = False
    # reader threads per rank (0: read in the training loop) and batches read ahead
    read_threads: int = 0
    prefetch: int = 2
    # write every rank's operations to trace files in the run folder
    trace: bool = False
    # cache=cold: settle a fresh dataset with untimed reads before its first measured epoch
    settle: bool = False
    # cache=storage_cold: bytes of the flush file read before each epoch (0 otherwise)
    flush_size: int = 0
    # every sample a uint8 array of this shape (() = samples of sample_size bytes)
    sample_shape: tuple[int, ...] = ()
    # sleep | cpu (COMPUTE_MODES): how a batch's compute is emulated (experiments.kernel.compute)
    compute: str = "sleep"
    # compute=cpu: threads per rank that do the work (0: the node's CPUs / ranks per node); 0 with a sleep
    compute_threads: int = 0
    # reader=torch: keep the DataLoader's workers across epochs, pin batches, the workers' start method, the device
    persistent_workers: bool = False
    pin_memory: bool = False
    start_method: str = "fork"
    device: str = "auto"
    # the accelerator utilisation (0-1) at or above which a point's accelerators count as fed (in no key)
    au_floor: float = 0.9
    # the fraction of the preset's samples the point reads (samples is already the scaled count; in no key)
    scale: float = 1.0


#: cluster keys added after points were first stored: at these values they are left out of the stored cluster
#: (a point measured before them keeps its stored bytes)
CLUSTER_KEYLESS_DEFAULTS: dict[str, Any] = {"points_per_task": 0}


@dataclass(frozen=True)
class ClusterSpec:
    """Where and how a point's MPI steps run; :class:`LocalCluster` or :class:`SlurmCluster` by ``executor``."""

    #: local | slurm (EXECUTORS): which class, not a field
    executor: ClassVar[str]
    # configuration name (informational; part of the point key)
    name: str
    # MPI launch line; {ranks}, {nodes} and {ppn} are filled in per point
    launch: str
    # wall-clock limit per point, minutes
    timeout_min: float = 30.0
    # extra environment variables for the MPI ranks
    env: dict[str, str] = field(default_factory=dict)
    # seconds a rank may wait at a barrier for the others before the kernel aborts the step
    hang_timeout_s: float = 600.0

    def to_dict(self) -> dict[str, Any]:
        """The stored form: every key of :class:`SlurmClusterConf` in its order (:class:`ClusterConf`'s, then
        Slurm's), a local cluster's Slurm keys at their defaults (as earlier ddlio stored them)."""
        out = {}
        for f in fields(SlurmClusterConf):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            value = getattr(self, f.name, default)
            if f.name in CLUSTER_KEYLESS_DEFAULTS and value == CLUSTER_KEYLESS_DEFAULTS[f.name]:
                continue  # added later, at its default: the stored form stays as earlier ddlio wrote it
            out[f.name] = copy.deepcopy(value)
        return out

    @staticmethod
    def from_dict(d: dict[str, Any]) -> LocalCluster | SlurmCluster:
        """The cluster of a stored point (keys this version does not know, or a local cluster's Slurm keys, are
        dropped; keys an older version did not store take their defaults)."""
        executor = d.get("executor", "local")
        if executor not in CLUSTERS:
            raise ValueError(f"cluster.executor={executor!r} is unknown: choose one of {', '.join(CLUSTERS)}")
        cls = CLUSTERS[executor]
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class LocalCluster(ClusterSpec):
    """This host: submitit's local executor, one point at a time."""

    executor: ClassVar[str] = "local"
    name: str = "local"
    launch: str = "mpiexec -n {ranks}"


@dataclass(frozen=True)
class SlurmCluster(ClusterSpec):
    """A Slurm cluster: one job per point (equal resources share a job array)."""

    executor: ClassVar[str] = "slurm"
    # partition, account, qos and node constraint ("" = the site's default)
    partition: str = ""
    account: str = ""
    qos: str = ""
    constraint: str = ""
    # extra sbatch options (option name -> value)
    sbatch: dict[str, Any] = field(default_factory=dict)
    # shell lines run in the job before the driver starts
    setup: list[str] = field(default_factory=list)
    # at most this many points of one job array at the same time
    array_parallelism: int = 4
    # seconds a job may be unknown to both squeue and sacct before it counts as gone
    vanish_after_s: float = 120.0
    # cancel a point pending for a reason only an administrator can clear
    cancel_unrunnable: bool = True
    # points one array task measures in sequence (0: chosen from the sweep's size, see executors.slurm.packing)
    points_per_task: int = 0


CLUSTERS: dict[str, type[LocalCluster] | type[SlurmCluster]] = {"local": LocalCluster, "slurm": SlurmCluster}
#: the keys only a Slurm cluster has (SlurmClusterConf beyond ClusterConf)
SLURM_ONLY = tuple(f.name for f in fields(SlurmCluster) if f.name not in {g.name for g in fields(LocalCluster)})

@dataclass(frozen=True)
class PointSpec:
    """One validated, normalised experiment point, by concern: sizes in bytes, times in seconds, paths absolute."""

    format: FormatSpec
    layout: LayoutSpec
    workload: WorkloadSpec
    cluster: LocalCluster | SlurmCluster
    # nodes per point and MPI ranks per node
    nodes: int
    ppn: int
    # repetition index and the seed of everything random
    repeat: int
    seed: int
    # where datasets/ and runs/ live (absolute), and the store (a path or a URL, password masked)
    data_root: str
    db: str
    # re-measure even if stored
    force: bool = False
    # the Hydra overrides that made the point (passwords masked)
    overrides: tuple[str, ...] = ()
    # the loader: native | tf | torch, or a plug-in's (experiments.registry.LOADERS)
    reader: str = "native"
    # the workload kind: what the point measures (experiments.registry.KINDS)
    kind: str = "train"
    # the kind's own options (kind=checkpoint: checkpoint.*, sizes in bytes); {} for train
    checkpoint: dict[str, Any] = field(default_factory=dict)
    # the accelerator whose compute time per batch the workload's table gave (informational: compute_time carries it)
    accelerator: str = ""

    # ----------------------------------------------------------------------------------------- derived
    @property
    def ranks(self) -> int:
        return self.nodes * self.ppn

    @property
    def num_files(self) -> int:
        """Files in the dataset: shared, ceil(samples / samples_per_file); fpp, at least one per rank and a
        multiple of the rank count, so every rank owns the same number of files."""
        base = math.ceil(self.workload.samples / self.workload.samples_per_file)
        if self.layout.access == "fpp":
            return math.ceil(max(base, self.ranks) / self.ranks) * self.ranks
        return base

    @property
    def label(self) -> str:
        """The paper's configuration label, e.g. ``hdf5/shared 1N-4P-1OST`` (the layout's part in the words of the
        storage backend of its file system: :func:`lustre.describe`)."""
        layout = describe(Layout(stripe_count=self.layout.stripe_count), self.layout.fs_type)
        what = self.checkpoint.get("name", "custom") if self.checkpoint else self.format.name  # a checkpoint's preset
        return f"{what}/{self.layout.access} {self.nodes}N-{self.ranks}P-{layout}"

    def planned_bytes(self) -> int:
        """Approximate dataset size on disk in bytes (payload only), for the free-space check."""
        return self.workload.samples * self.workload.sample_size

    # ------------------------------------------------------------------------ keys and stored form
    def dataset_params(self) -> dict[str, Any]:
        """Everything that changes the bytes on disk or their layout (hashed into :attr:`dataset_key`)."""
        return dataset_params(self)

    def measurement_params(self) -> dict[str, Any]:
        """What changes the measurement beyond the dataset (hashed with it into :attr:`point_key`)."""
        return measurement_params(self)

    @property
    def dataset_key(self) -> str:
        return self._memo("dataset_key", dataset_key)

    @property
    def point_key(self) -> str:
        return self._memo("point_key", point_key)

    def _memo(self, name: str, compute: Any) -> Any:
        """``compute(self)``, worked out once: the spec is frozen (a sweep asks a point's keys and stored form
        dozens of times; each is a canonical JSON dump and a SHA-256)."""
        memo = self.__dict__.setdefault("_memos", {})
        if name not in memo:
            memo[name] = compute(self)
        return memo[name]

    def earlier_keys(self) -> dict[str, str]:
        """The keys an earlier ddlio gave this measurement by an earlier method, each with how that method differs
        (:func:`~experiments.config.point.earlier_point_keys`)."""
        return earlier_point_keys(self)

    def to_dict(self) -> dict[str, Any]:
        """The stored form (:data:`~experiments.config.point.STORED_FORM`), with the derived ranks, num_files and
        keys (a fresh copy each call: the caller may change it)."""
        return copy_plain(self._memo("stored", to_stored))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PointSpec:
        """A point from its stored form, as this or any earlier ddlio stored it (keys a version did not store take
        their defaults: the keys of points measured before stay what they were)."""
        parts = stored_parts(d)
        top = parts[""]
        top["cluster"] = ClusterSpec.from_dict(top["cluster"])
        return cls(format=FormatSpec(**parts["format"]), layout=LayoutSpec(**parts["layout"]),
                   workload=WorkloadSpec(**parts["workload"]), **top)
