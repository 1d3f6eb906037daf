"""The configuration schema (dataclasses registered in Hydra's ConfigStore), its validation, and the frozen
:class:`PointSpec` that one experiment point runs from.

The values live in ``conf/``; this module is the schema. Hydra rejects unknown keys and wrong types while it
composes; :func:`validate` then checks every value's meaning (ranges, choices, paths, commands) and reports every
problem of a point at once, naming the valid choices.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import MISSING

from ddlio.errors import ConfigError
from ddlio.secrets import driver_db, mask
from ddlio.shell import ENV_NAME, SBATCH_OPTION, control_problems
from ddlio.units import format_size, parse_size
from experiments.kernel.compute import COMPUTE_MODES, MAX_COMPUTE_THREADS

ACCESS_MODES = ("shared", "fpp")
SHUFFLES = ("none", "file", "sample")
READERS = ("native", "tf")
ORDERS = ("given", "random")
CACHE_POLICIES = ("cold", "warm", "storage_cold")
EXECUTORS = ("local", "slurm")
#: what a point returns to a Hydra sweeper (a stored total; every one is higher-is-better)
OBJECTIVES = ("bandwidth_mib_s", "samples_per_s", "au", "iops")
#: Largest sample the kernel will hold in one buffer (bytes).
MAX_SAMPLE_SIZE = 2 * 1024**3
#: Longest time limit a point may ask for (minutes): a year
MAX_TIMEOUT_MIN = 366 * 24 * 60
SCHEMA_VERSION = 1
#: PointSpec fields added after points were first stored: at these values they are left out of the stored form
#: (and of the point key), so that a point measured before them keeps its stored form and key
KEYLESS_DEFAULTS: dict[str, Any] = {"compute": "sleep", "compute_threads": 0}


# ----------------------------------------------------------------------------------------------------- schema
@dataclass
class FormatConf:
    # file format, one of experiments.formats.FORMATS (hdf5, tfrecord, npz, npy, bin, jpeg, png)
    name: str = MISSING


@dataclass
class HDF5Conf(FormatConf):
    name: str = "hdf5"
    # bytes: a 1-D uint8 stream + offsets | array: an N-d uint8 dataset `images` (n, *workload.sample_shape)
    # chunked by image, with int64 `labels` (as DeepGalaxy, CosmoFlow write HDF5; needs workload.sample_shape)
    layout: str = "bytes"
    # samples per HDF5 chunk; 0 = contiguous storage (no chunking)
    chunk_samples: int = 0
    # none | gzip | lzf (needs chunk_samples >= 1)
    compression: str = "none"
    # --- HDF5's own knobs (in a key only when not at their default; see experiments/formats/hdf5.py)
    # data sieve buffer, bytes (reading): a read smaller than it fills it with one read of its size
    sieve_buf_size: int = 65536
    # raw-data chunk cache per dataset: bytes and hash slots (reading; chunked storage)
    rdcc_nbytes: int = 1048576
    rdcc_nslots: int = 521
    # file driver for reading: sec2 (pread) | stdio (buffered fread) | core (whole file into memory at open)
    driver: str = "sec2"
    # file space strategy (bytes on disk): default | page (paged aggregation, pages of fs_page_size bytes)
    fs_strategy: str = "default"
    fs_page_size: int = 4096
    # page buffer, bytes (reading; needs fs_strategy=page; 0 = none)
    page_buf_size: int = 0
    # H5Pset_alignment (bytes on disk): objects of at least alignment_threshold bytes start at a multiple of
    # alignment (e.g. the stripe size); 1 = no alignment
    alignment: int = 1
    alignment_threshold: int = 1


@dataclass
class TFRecordConf(FormatConf):
    name: str = "tfrecord"
    # check each record's masked crc32c (length and payload) as it is read, as TensorFlow's reader does
    verify_crc: bool = True
    # raw: each record is a sample's bytes | example: a serialized tf.train.Example {image: bytes, label: int64}
    layout: str = "raw"


@dataclass
class NPZConf(FormatConf):
    name: str = "npz"
    # samples: `data` (1-D uint8) + `offsets` | array: `x` (k, *workload.sample_shape) uint8 + `y` labels, as DLIO
    layout: str = "samples"
    # reading: sample (one positioned read per sample) | whole (np.load of the whole array on a file's first read)
    load: str = "sample"


@dataclass
class NPYConf(FormatConf):
    name: str = "npy"
    # samples: a 1-D uint8 array + a sidecar index | array: an N-d (k, *workload.sample_shape) uint8 array, as DLIO
    layout: str = "samples"
    # reading: sample (one positioned read per sample) | whole (np.load of the whole file on its first read)
    load: str = "sample"


@dataclass
class BinConf(FormatConf):
    name: str = "bin"


@dataclass
class ImageConf(FormatConf):
    # also decode every image (Pillow, fully) inside the timed read, as a loader's decode step
    decode: bool = False


@dataclass
class JPEGConf(ImageConf):
    name: str = "jpeg"


@dataclass
class PNGConf(ImageConf):
    name: str = "png"


@dataclass
class AccessConf:
    # shared: every rank reads from the same file(s); fpp: file per process, each rank reads only its own files
    name: str = MISSING


@dataclass
class WorkloadConf:
    # preset name (informational)
    name: str = "custom"
    # total samples in the dataset
    samples: int = 1024
    # mean sample size: bytes or a unit string (4096, 64KiB, 1MiB); derived from sample_shape when that is given
    sample_size: str = "256KiB"
    # shape of every sample as a uint8 array, e.g. [512,512,3]; [] = samples are sample_size bytes. Needed by the
    # N-d layouts (format.layout=array); with it every sample has prod(shape) bytes
    sample_shape: list[int] = field(default_factory=list)
    # standard deviation of the sample size (bytes or units); 0 = every sample the same size
    sample_size_stdev: str = "0"
    # samples per file (fpp: at most this many, and at least one file per rank)
    samples_per_file: int = 1024
    # sample bytes: random (incompressible) | zeros | a compressibility ratio > 1 (2.0 = gzip compresses ~2:1)
    payload: str = "random"
    # samples per rank per training step
    batch_size: int = 8
    # passes over the dataset
    epochs: int = 2
    # emulated compute per batch, seconds (what the training step takes on an otherwise idle node)
    compute_time: float = 0.0
    # how a batch's compute is emulated: sleep (occupies no core: a step on an accelerator) | cpu (a fixed amount
    # of CPU work that takes compute_time on an idle node, in compute_threads threads: a CPU-only training step,
    # which the input pipeline slows down by taking cores from it)
    compute: str = "sleep"
    # compute=cpu: threads per rank that do the work; 0 = the node's CPUs divided by the ranks per node
    compute_threads: int = 0
    # cold: evict the dataset from the page cache before each epoch; warm: leave it cached; storage_cold: also read
    # a flush file of flush_size bytes before each epoch, untimed, to push the dataset out of the caches below
    # the client (storage controller, OSS, VM host), then evict as cold does
    cache: str = "cold"
    # cold: read a freshly generated dataset once, untimed, before its first measured epoch, so that the first
    # repetition is not the only one the device serves (every later read is served by a cache below the client)
    settle: bool = True
    # storage_cold: bytes of the flush file read before each epoch (units accepted); larger than the caches below
    # the client, whose size the client cannot know
    flush_size: str = "8GiB"
    # standard deviation of the compute time per batch, seconds (0 = constant); drawn per batch, seeded
    compute_time_stdev: float = 0.0
    # none | file (permute the file order) | sample (a seeded global permutation); new order every epoch
    shuffle: str = "none"
    # each rank reads only whole batches, the same number on every rank (the rest of the epoch is dropped)
    drop_last: bool = False
    # reader threads per rank that read ahead while compute runs; 0 = read in the training loop itself
    read_threads: int = 0
    # batches read ahead per rank when read_threads >= 1
    prefetch: int = 2
    # write every rank's operations (start, duration, file, offset, size, op) to trace-rank<N>.csv
    trace: bool = False


@dataclass
class ClusterConf:
    # configuration name (informational)
    name: str = "local"
    # local: submitit's local executor (one point at a time); slurm: one Slurm job per point
    executor: str = "local"
    # MPI launch line; {ranks}, {nodes} and {ppn} are filled in per point
    launch: str = "mpiexec -n {ranks}"
    # wall-clock limit per point, minutes (the job and its MPI steps are killed after it)
    timeout_min: float = 30.0
    # extra environment variables for the MPI ranks (e.g. MPI4PY_LIBMPI to pick the site's MPI library)
    env: dict[str, str] = field(default_factory=dict)
    # seconds a rank may wait at a barrier for the others before the kernel aborts the step (a hung rank)
    hang_timeout_s: float = 600.0
    # Slurm: partition, account, qos and node constraint ("" = the site's default)
    partition: str = ""
    account: str = ""
    qos: str = ""
    constraint: str = ""
    # Slurm: extra sbatch options, e.g. {exclusive: true, mem: 0} -> --exclusive --mem=0
    sbatch: dict[str, Any] = field(default_factory=dict)
    # shell lines run in the job before the driver starts (module loads, venv activation)
    setup: list[str] = field(default_factory=list)
    # Slurm: at most this many points of one job array run at the same time
    array_parallelism: int = 4
    # Slurm: seconds a job may be unknown to both squeue and sacct before it counts as gone (VANISHED); a queued
    # job stays queued however long it waits. Not part of the point key.
    vanish_after_s: float = 120.0
    # Slurm: cancel a point pending for a reason only an administrator can clear (PartitionNodeLimit ...) and store
    # it as failed with the reason; false keeps waiting. Not part of the point key.
    cancel_unrunnable: bool = True


@dataclass
class DdlioConf:
    format: FormatConf = MISSING
    access: AccessConf = MISSING
    workload: WorkloadConf = MISSING
    cluster: ClusterConf = MISSING
    # Lustre stripe count as `lfs setstripe -c` takes it: -1 = all OSTs, 0 = file-system default, N >= 1
    stripe: int = 1
    # Lustre stripe size: bytes or units, a multiple of 64KiB (0 = file-system default)
    stripe_size: str = "1MiB"
    # nodes per point
    nodes: int = 1
    # MPI ranks per node
    ppn: int = 1
    # repetition index: repeat=0,1,2 measures the same point three times, as separate points
    repeat: int = 0
    # seed of everything random: sample sizes, payloads
    seed: int = 42
    # directory under which datasets (datasets/) and run folders (runs/) live
    data_root: str = "ddlio-data"
    # results store: a SQLite file path or a SQLAlchemy URL (postgresql://user@host:5432/db)
    db: str = "results.db"
    # a file (mode 600) holding the store's URL, password included; replaces db when set
    db_url_file: str = ""
    # re-measure points that are already in the store
    force: bool = False
    # native: ddlio's own reader; tf: TensorFlow's tf.data (TFRecordDataset, or from_generator for other formats)
    reader: str = "native"
    # wait for the jobs and store each result as it lands (false: submit and return; rerun to harvest)
    wait: bool = True
    # print what would be submitted (points, resources, sbatch lines) and submit nothing
    dry_run: bool = False
    # rerun points stored as failed
    retry_failed: bool = True
    # order in which points run: given (as composed) | random (seeded shuffle: drift cannot pose as an effect)
    order: str = "given"
    # what each point returns to a Hydra sweeper (Optuna maximises it): bandwidth_mib_s | samples_per_s | au |
    # iops. Not part of the point key: the same measurement answers every objective.
    objective: str = "bandwidth_mib_s"


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore (``conf/`` files extend these nodes)."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    cs.store(name="ddlio_schema", node=DdlioConf)
    for name, node in FORMAT_SCHEMAS.items():
        cs.store(group="schema/format", name=name, node=node)
    cs.store(group="schema", name="access", node=AccessConf)
    cs.store(group="schema", name="workload", node=WorkloadConf)
    cs.store(group="schema", name="cluster", node=ClusterConf)


FORMAT_SCHEMAS: dict[str, type[FormatConf]] = {
    "hdf5": HDF5Conf, "tfrecord": TFRecordConf, "npz": NPZConf, "npy": NPYConf, "bin": BinConf, "jpeg": JPEGConf,
    "png": PNGConf,
}


# ------------------------------------------------------------------------------------------------- the point
@dataclass(frozen=True)
class FormatSpec:
    """The file format and its options (the format's config group minus ``name``; see experiments/formats)."""

    # one of experiments.formats.FORMATS
    name: str
    # the format's options as composed, in the schema's order (FORMAT_SCHEMAS[name])
    options: dict[str, Any] = field(default_factory=dict)

    def bytes_options(self) -> dict[str, Any]:
        """The options that change the bytes written (read-only options such as decode are left out)."""
        from experiments.formats import FORMATS

        fmt = FORMATS[self.name]
        return {k: v for k, v in sorted(self.options.items())
                if k not in fmt.read_options and not fmt.at_default(k, v)}

    def read_options(self) -> dict[str, Any]:
        """The options that change only how files are read (options at a keyless default left out, so that adding
        a knob leaves the keys of existing points unchanged)."""
        from experiments.formats import FORMATS

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
    # whether striping is applied there: the file system is Lustre (lustre.fs.FsInfo.is_lustre)
    striping_applicable: bool = False


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
        """The stored form: every key of :class:`ClusterConf` in its order, a local cluster's Slurm keys at their
        defaults (as earlier ddlio stored them)."""
        out = {}
        for f in fields(ClusterConf):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            out[f.name] = copy.deepcopy(getattr(self, f.name, default))
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


CLUSTERS: dict[str, type[LocalCluster] | type[SlurmCluster]] = {"local": LocalCluster, "slurm": SlurmCluster}
#: the keys of ClusterConf that only a Slurm cluster has
SLURM_ONLY = tuple(f.name for f in fields(SlurmCluster) if f.name not in {g.name for g in fields(LocalCluster)})

#: The stored form of a point (:meth:`PointSpec.to_dict`: the store's ``points.config`` column, run folders' records,
#: the kernel's spec) is flat, as ddlio stored it before the point was nested: (stored key, part, field) in the stored
#: order; part "" is the point itself. A new field goes at the end (existing stored points keep their bytes).
STORED_FORM: tuple[tuple[str, str, str], ...] = (
    ("format", "format", "name"), ("format_options", "format", "options"),
    ("access", "layout", "access"), ("stripe_count", "layout", "stripe_count"),
    ("stripe_size", "layout", "stripe_size"),
    ("nodes", "", "nodes"), ("ppn", "", "ppn"), ("repeat", "", "repeat"), ("seed", "", "seed"),
    ("samples", "workload", "samples"), ("sample_size", "workload", "sample_size"),
    ("sample_size_stdev", "workload", "sample_size_stdev"), ("samples_per_file", "workload", "samples_per_file"),
    ("batch_size", "workload", "batch_size"), ("epochs", "workload", "epochs"),
    ("compute_time", "workload", "compute_time"), ("cache", "workload", "cache"), ("workload_name", "workload", "name"),
    ("data_root", "", "data_root"), ("db", "", "db"), ("cluster", "", "cluster"),
    ("fs_type", "layout", "fs_type"), ("striping_applicable", "layout", "striping_applicable"),
    ("force", "", "force"), ("overrides", "", "overrides"), ("payload", "workload", "payload"),
    ("compute_time_stdev", "workload", "compute_time_stdev"), ("shuffle", "workload", "shuffle"),
    ("drop_last", "workload", "drop_last"), ("read_threads", "workload", "read_threads"),
    ("prefetch", "workload", "prefetch"), ("trace", "workload", "trace"), ("reader", "", "reader"),
    ("settle", "workload", "settle"), ("flush_size", "workload", "flush_size"),
    ("sample_shape", "workload", "sample_shape"),
    ("compute", "workload", "compute"), ("compute_threads", "workload", "compute_threads"),
)


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
    # native | tf (READERS)
    reader: str = "native"

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

    def dataset_params(self) -> dict[str, Any]:
        """Everything that changes the bytes on disk or their layout (hashed into :attr:`dataset_key`)."""
        w, lay = self.workload, self.layout
        params: dict[str, Any] = {
            "format": self.format.name,
            "format_options": self.format.bytes_options(),
            "samples": w.samples,
            "sample_size": w.sample_size,
            "sample_size_stdev": w.sample_size_stdev,
            "payload": w.payload,
            "num_files": self.num_files,
            "seed": self.seed,
            "data_root": self.data_root,
            # added later: present only when given, so datasets generated before keep their keys
            **({"sample_shape": list(w.sample_shape)} if w.sample_shape else {}),
        }
        if lay.striping_applicable:  # off Lustre, points that differ only in striping share one dataset
            params["stripe_count"] = lay.stripe_count
            params["stripe_size"] = lay.stripe_size
        return params

    def measurement_params(self) -> dict[str, Any]:
        """What changes the measurement beyond the dataset (hashed with it into :attr:`point_key`)."""
        w, lay = self.workload, self.layout
        return {
            "access": lay.access,
            "read_options": self.format.read_options(),
            "stripe_count": lay.stripe_count,
            "stripe_size": lay.stripe_size,
            "nodes": self.nodes,
            "ppn": self.ppn,
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
            "reader": self.reader,
            "trace": w.trace,
            # the MPI launch line and the ranks' environment decide which MPI library and PMI run the kernel
            "launch": self.cluster.launch,
            "env": dict(sorted(self.cluster.env.items())),
            "repeat": self.repeat,
            "cluster": self.cluster.name,
        }

    @property
    def dataset_key(self) -> str:
        return _digest(self.dataset_params())

    @property
    def point_key(self) -> str:
        return _digest({"dataset": self.dataset_key, **self.measurement_params(), "schema": SCHEMA_VERSION})

    @property
    def label(self) -> str:
        """The paper's configuration label, e.g. ``hdf5/shared 1N-4P-1OST``."""
        return f"{self.format.name}/{self.layout.access} {self.nodes}N-{self.ranks}P-{self.layout.stripe_count}OST"

    def planned_bytes(self) -> int:
        """Approximate dataset size on disk in bytes (payload only), for the free-space check."""
        return self.workload.samples * self.workload.sample_size

    def to_dict(self) -> dict[str, Any]:
        """The stored form (:data:`STORED_FORM`), with the derived ranks, num_files and keys."""
        d: dict[str, Any] = {}
        for key, part, name in STORED_FORM:
            value = getattr(getattr(self, part) if part else self, name)
            if key == "cluster":
                value = self.cluster.to_dict()
            elif key == "overrides":
                value = list(value)
            if key in KEYLESS_DEFAULTS and value == KEYLESS_DEFAULTS[key]:  # added later, at its default: the
                continue  # stored form stays as it was
            d[key] = copy.deepcopy(value)
        d["ranks"] = self.ranks
        d["num_files"] = self.num_files
        d["dataset_key"] = self.dataset_key
        d["point_key"] = self.point_key
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PointSpec:
        """A point from its stored form, as this or any earlier ddlio stored it (keys a version did not store take
        their defaults: the keys of points measured before stay what they were)."""
        parts: dict[str, dict[str, Any]] = {"": {}, "format": {}, "layout": {}, "workload": {}}
        for key, part, name in STORED_FORM:
            if key in d:
                parts[part][name] = d[key]
        if "sample_shape" in parts["workload"]:
            parts["workload"]["sample_shape"] = tuple(parts["workload"]["sample_shape"])  # a list, from JSON
        top = parts[""]
        top["cluster"] = ClusterSpec.from_dict(top.get("cluster") or {})
        top["overrides"] = tuple(top.get("overrides", ()))
        return cls(format=FormatSpec(**parts["format"]), layout=LayoutSpec(**parts["layout"]),
                   workload=WorkloadSpec(**parts["workload"]), **top)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:20]


# ------------------------------------------------------------------------------------------------ validation
def _int_range(problems: list[str], key: str, value: Any, lo: int, hi: int | None = None, what: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(f"{key}={value!r} is not an integer{what}")
        return lo
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        problems.append(f"{key}={value} is out of range: must be {rng}{what}")
    return value


def _positive(problems: list[str], key: str, value: Any, unit: str, hi: float) -> float:
    """A finite number > 0 and at most ``hi`` (NaN and infinities are refused: they reach sbatch and time-outs)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        problems.append(f"{key}={value!r} must be a finite number of {unit} > 0")
        return 1.0
    if value > hi:
        problems.append(f"{key}={value:g} is out of range: at most {hi:g} {unit}")
    return float(value)


def _size(problems: list[str], key: str, value: Any, lo: int, hi: int) -> int:
    try:
        n = parse_size(value)
    except ValueError as e:
        problems.append(f"{key}: {e}")
        return lo
    if n < lo or n > hi:
        problems.append(
            f"{key}={value} ({n} bytes) is out of range: must be {format_size(lo)} .. {format_size(hi)}"
            + (" (at least one byte per sample)" if lo == 1 else "")
        )
    return n


def _sample_shape(problems: list[str], value: Any) -> tuple[int, ...]:
    """``workload.sample_shape`` as a tuple of dimensions >= 1 (``()`` when not given)."""
    dims = list(value) if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims):
        problems.append(f"workload.sample_shape={value!r} must be a list of whole dimensions >= 1, e.g. [512,512,3] "
                        "(or [] for samples of workload.sample_size bytes)")
        return ()
    if dims and math.prod(dims) > MAX_SAMPLE_SIZE:
        problems.append(f"workload.sample_shape={dims} holds {format_size(math.prod(dims))} per sample, more than "
                        f"the largest sample ({format_size(MAX_SAMPLE_SIZE)})")
        return ()
    return tuple(dims)


def _shaped_size(problems: list[str], shape: tuple[int, ...], w: dict[str, Any], sample_size: int, stdev: int,
                 overrides: tuple[str, ...]) -> int:
    """The sample size of uint8 samples of ``shape`` (bytes): its product. A sample_size given on the command line
    that disagrees is a problem (a preset's is replaced), and so is a size spread (every sample has the shape)."""
    derived = math.prod(shape)
    given = any(o.split("=", 1)[0].lstrip("+~") == "workload.sample_size" for o in overrides)
    if given and sample_size != derived:
        problems.append(
            f"workload.sample_size={w['sample_size']} ({sample_size} bytes) disagrees with workload.sample_shape="
            f"{list(shape)} ({derived} bytes of uint8): give only the shape (the size follows from it), or a size "
            "that agrees"
        )
    if stdev:
        problems.append(
            f"workload.sample_size_stdev={w['sample_size_stdev']} cannot vary the size of samples of "
            f"workload.sample_shape={list(shape)}: every sample has the shape; set workload.sample_size_stdev=0"
        )
    return derived


def check_writable_dir(problems: list[str], key: str, path: Path) -> None:
    """Add a problem unless ``path`` is, or can be created as, a writable directory on a real file system."""
    from lustre.fs import PSEUDO_FS, existing_ancestor, fs_info

    if path.exists() and not path.is_dir():
        problems.append(f"{key}={path} exists and is not a directory: give a directory path")
        return
    anc = existing_ancestor(path)
    if not anc.is_dir():
        problems.append(f"{key}={path}: {anc} is a file, so {path} cannot be created; give a directory path")
        return
    fs = fs_info(anc)
    if fs.type in PSEUDO_FS:
        problems.append(
            f"{key}={path} is on {fs.type} ({fs.mount_point}), a virtual file system that holds no data: "
            "give a directory on a real file system (a local disk, /tmp, or a Lustre scratch directory)"
        )
    elif not os.access(anc, os.W_OK | os.X_OK):
        problems.append(f"{key}={path} is not writable ({anc} denies writing): give a directory you can write")


def resolve_command(word: str) -> str | None:
    """Find a launcher command: this interpreter's bin directory first (the venv's mpich), then PATH."""
    local = Path(sys.executable).parent / word
    if os.sep not in word and local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(word)


def tf_available() -> bool:
    """True when TensorFlow can be imported (without importing it: that takes seconds)."""
    import importlib.util

    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):  # ValueError: blocked in sys.modules
        return False


def validate(cfg: dict[str, Any], cwd: str | os.PathLike | None = None, overrides: tuple[str, ...] = ()) -> PointSpec:
    """Check one composed config (a plain dict) and freeze it into a :class:`PointSpec`.

    Raises :class:`ConfigError` listing every problem found, each with the valid choices.
    """
    from experiments.formats import FORMATS
    from experiments.formats.base import parse_payload
    from lustre import Layout, fs_info

    base = Path(cwd or os.getcwd())
    problems: list[str] = list(control_problems(cfg))
    fmt = dict(cfg["format"])
    fmt_name = fmt.pop("name")
    if fmt_name not in FORMATS:
        problems.append(f"format={fmt_name!r} is unknown: choose one of {', '.join(sorted(FORMATS))}")
    w = cfg["workload"]
    shape = _sample_shape(problems, w.get("sample_shape") or [])
    if fmt_name in FORMATS:
        problems += FORMATS[fmt_name].problems(fmt, shape)

    access = cfg["access"]["name"]
    if access not in ACCESS_MODES:
        problems.append(f"access={access!r} is unknown: choose one of {', '.join(ACCESS_MODES)}")

    samples = _int_range(problems, "workload.samples", w["samples"], 1)
    sample_size = _size(problems, "workload.sample_size", w["sample_size"], 1, MAX_SAMPLE_SIZE)
    stdev = _size(problems, "workload.sample_size_stdev", w["sample_size_stdev"], 0, MAX_SAMPLE_SIZE)
    if shape:
        sample_size = _shaped_size(problems, shape, w, sample_size, stdev, overrides)
    if stdev and sample_size and stdev >= sample_size:
        problems.append(
            f"workload.sample_size_stdev={w['sample_size_stdev']} must be smaller than workload.sample_size="
            f"{w['sample_size']}, so that sample sizes stay positive"
        )
    spf = _int_range(problems, "workload.samples_per_file", w["samples_per_file"], 1)
    try:
        payload = parse_payload(w["payload"])
    except ValueError as e:
        problems.append(str(e))
        payload = "random"
    batch = _int_range(problems, "workload.batch_size", w["batch_size"], 1)
    if w["shuffle"] not in SHUFFLES:
        problems.append(f"workload.shuffle={w['shuffle']!r} is unknown: choose one of {', '.join(SHUFFLES)}")
    threads = _int_range(problems, "workload.read_threads", w["read_threads"], 0, 256)
    prefetch = _int_range(problems, "workload.prefetch", w["prefetch"], 1, 4096, " batches")
    cstdev = w["compute_time_stdev"]
    if not isinstance(cstdev, (int, float)) or cstdev < 0 or not math.isfinite(cstdev):
        problems.append(f"workload.compute_time_stdev={cstdev!r} must be a number of seconds >= 0")
    epochs = _int_range(problems, "workload.epochs", w["epochs"], 1)
    compute = w["compute_time"]
    if not isinstance(compute, (int, float)) or compute < 0 or not math.isfinite(compute):
        problems.append(f"workload.compute_time={compute!r} must be a number of seconds >= 0")
    compute_mode = w.get("compute", "sleep")
    if compute_mode not in COMPUTE_MODES:
        problems.append(f"workload.compute={compute_mode!r} is unknown: choose one of {', '.join(COMPUTE_MODES)} "
                        "(sleep: the step occupies no core, as on an accelerator; cpu: it burns the CPU for "
                        "compute_time, as a CPU-only training step)")
    compute_threads = _int_range(problems, "workload.compute_threads", w.get("compute_threads", 0), 0,
                                 MAX_COMPUTE_THREADS, " (threads per rank that do compute=cpu's work; 0 = the node's "
                                 "CPUs divided by the ranks per node)")
    if w["cache"] not in CACHE_POLICIES:
        problems.append(f"workload.cache={w['cache']!r} is unknown: choose one of {', '.join(CACHE_POLICIES)}")
    flush_size = _size(problems, "workload.flush_size", w["flush_size"], 1 << 20, 1 << 50)

    cl = dict(cfg["cluster"])
    if cl["executor"] not in EXECUTORS:
        problems.append(f"cluster.executor={cl['executor']!r} is unknown: choose one of {', '.join(EXECUTORS)}")
    elif cl["executor"] == "local":
        unset = ClusterConf()
        problems += [f"cluster.{k}={cl[k]!r} applies to Slurm only (the local executor runs every point on this "
                     "host): drop it, or use cluster=slurm" for k in SLURM_ONLY if cl[k] != getattr(unset, k)]
    nodes = _int_range(problems, "nodes", cfg["nodes"], 1)
    ppn = _int_range(problems, "ppn", cfg["ppn"], 1, 1024)
    if cl["executor"] == "local" and isinstance(nodes, int) and nodes > 1:
        problems.append(
            f"nodes={nodes} needs a cluster: the local executor runs on this one host; use cluster=slurm, "
            f"or nodes=1 ppn={nodes * max(ppn, 1)} to run as many ranks here"
        )
    if not cfg.get("wait", True) and cl["executor"] == "local":
        problems.append("wait=false needs cluster=slurm: local points run one at a time in the foreground")
    _positive(problems, "cluster.hang_timeout_s", cl["hang_timeout_s"], "seconds", MAX_TIMEOUT_MIN * 60)
    _int_range(problems, "cluster.array_parallelism", cl["array_parallelism"], 1)
    _positive(problems, "cluster.timeout_min", cl["timeout_min"], "minutes", MAX_TIMEOUT_MIN)
    for k, v in cl["env"].items():
        if not ENV_NAME.match(str(k)):
            problems.append(f"cluster.env: {k!r} is not an environment variable name: use letters, digits and _, "
                            "not starting with a digit (e.g. MPI4PY_LIBMPI)")
        if isinstance(v, (dict, list)):
            problems.append(f"cluster.env.{k} must be a single value, not {type(v).__name__}")
    for k, v in cl["sbatch"].items():
        if not SBATCH_OPTION.match(str(k)):
            problems.append(f"cluster.sbatch: {k!r} is not an sbatch option name (e.g. exclusive, mem, mail_type)")
        if isinstance(v, (dict, list)) or v is None:
            problems.append(f"cluster.sbatch.{k} must be a single value (a string, number or true), not {v!r}")
    _positive(problems, "cluster.vanish_after_s", cl["vanish_after_s"], "seconds", MAX_TIMEOUT_MIN * 60)
    launch = str(cl["launch"])
    try:
        words = shlex.split(launch.format(ranks=1, nodes=1, ppn=1))
    except (ValueError, KeyError, IndexError) as e:
        problems.append(
            f"cluster.launch={launch!r} is not a valid launch line ({e}); placeholders: {{ranks}} {{nodes}} {{ppn}}"
        )
        words = []
    if words and cl["executor"] == "local" and resolve_command(words[0]) is None:
        problems.append(
            f"cluster.launch: '{words[0]}' not found: install an MPI (pip install mpich, or apt-get install "
            "mpich / openmpi-bin) or set cluster.launch to your MPI's launch line"
        )
    ranks = nodes * ppn
    if isinstance(samples, int) and samples < ranks:
        problems.append(f"workload.samples={samples} is fewer than the {ranks} ranks: every rank needs a sample")
    elif isinstance(samples, int) and isinstance(spf, int) and spf >= 1 and access == "fpp":
        files = math.ceil(max(math.ceil(samples / spf), ranks) / ranks) * ranks
        if files > samples:
            problems.append(
                f"access=fpp with {ranks} ranks needs {files} files (a multiple of the rank count), more than the "
                f"{samples} samples: some files would be empty; use workload.samples as a multiple of {ranks} "
                "or a larger workload.samples_per_file"
            )
    if w.get("drop_last") and isinstance(samples, int) and isinstance(batch, int) and ranks and samples >= ranks:
        smallest = samples // ranks  # the smallest share any rank gets (fpp: about the same)
        if smallest < batch:
            problems.append(
                f"workload.drop_last=true with workload.batch_size={batch}: a rank's share is about {smallest} "
                f"samples, less than one batch, so every rank would read nothing; lower the batch size or "
                "set drop_last=false"
            )

    if cfg.get("objective", OBJECTIVES[0]) not in OBJECTIVES:
        problems.append(f"objective={cfg.get('objective')!r} is unknown: choose one of {', '.join(OBJECTIVES)}")
    if cfg.get("order", "given") not in ORDERS:
        problems.append(f"order={cfg.get('order')!r} is unknown: choose one of {', '.join(ORDERS)}")
    reader = cfg.get("reader", "native")
    if reader not in READERS:
        problems.append(f"reader={reader!r} is unknown: choose one of {', '.join(READERS)}")
    elif reader == "tf" and not tf_available():
        from experiments.kernel.tfdata import INSTALL_HINT

        problems.append(INSTALL_HINT)
    repeat = _int_range(problems, "repeat", cfg["repeat"], 0)
    seed = _int_range(problems, "seed", cfg["seed"], 0, 2**63 - 1)
    stripe = cfg["stripe"]
    try:
        stripe_size = parse_size(cfg["stripe_size"])
    except ValueError as e:
        problems.append(f"stripe_size: {e}")
        stripe_size = 0
    if not isinstance(stripe, int) or isinstance(stripe, bool):
        problems.append(f"stripe={stripe!r} is not an integer: use -1 (all OSTs), 0 (default) or N >= 1")
        stripe = 1
    problems += Layout(stripe, stripe_size).problems()

    data_root = (base / os.path.expanduser(str(cfg["data_root"]))).resolve()
    check_writable_dir(problems, "data_root", data_root)
    try:
        db = driver_db(cfg, base)
    except ConfigError as e:
        problems += e.problems
        db = ""
    if db and "://" not in db:
        dbp = Path(db)
        if dbp.is_dir():
            problems.append(f"db={cfg['db']} is a directory: give a file path (results.db) or a SQLAlchemy URL")
        else:
            check_writable_dir(problems, "db", dbp.parent)

    fs_type, lustre = "unknown", False
    if not any(p.startswith("data_root") for p in problems):
        fs = fs_info(data_root)
        fs_type, lustre = fs.type, fs.is_lustre
        need = samples * sample_size if isinstance(samples, int) else 0
        if need > fs.total_bytes:
            problems.append(
                f"the dataset ({samples} samples x {format_size(sample_size)} = {format_size(need)}) is larger "
                f"than the whole file system at data_root ({format_size(fs.total_bytes)} on {fs.mount_point}): "
                "lower workload.samples or workload.sample_size"
            )
    if problems:
        raise ConfigError(problems)

    cluster = CLUSTERS[cl["executor"]](**{f.name: cl[f.name] for f in fields(CLUSTERS[cl["executor"]])})
    return PointSpec(
        format=FormatSpec(fmt_name, fmt),
        layout=LayoutSpec(access, stripe, stripe_size, fs_type=fs_type, striping_applicable=lustre),
        workload=WorkloadSpec(
            samples=samples,
            sample_size=sample_size,
            sample_size_stdev=stdev,
            samples_per_file=spf,
            batch_size=batch,
            epochs=epochs,
            compute_time=float(compute),
            cache=w["cache"],
            name=str(w["name"]),
            payload=payload,
            compute_time_stdev=float(cstdev),
            shuffle=w["shuffle"],
            drop_last=bool(w["drop_last"]),
            read_threads=threads,
            prefetch=prefetch,
            trace=bool(w["trace"]),
            settle=bool(w["settle"]),
            flush_size=flush_size if w["cache"] == "storage_cold" else 0,
            sample_shape=shape,
            compute=compute_mode,
            compute_threads=compute_threads if compute_mode == "cpu" else 0,
        ),
        cluster=cluster,
        nodes=nodes,
        ppn=ppn,
        repeat=repeat,
        seed=seed,
        data_root=str(data_root),
        db=mask(db),  # the password stays in the driver (sweep.py opens the store with driver_db)
        force=bool(cfg.get("force", False)),
        overrides=tuple(mask(o) for o in overrides),
        reader=reader,
    )
