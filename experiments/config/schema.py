"""The configuration schema: the dataclasses registered in Hydra's ConfigStore, and the choices and limits that
:func:`~experiments.config.validate` checks values against.

The values live in ``conf/``; this module is the schema of the groups Hydra composes (``access``, ``workload``,
``cluster`` and the top level). Each format's own conf lives with the format (``Format.conf`` in
``experiments/formats/<name>.py``); :func:`register_configs` takes them from the format registry. Hydra rejects
unknown keys and wrong types while it composes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from experiments.formats import FORMAT_CONFS
from experiments.formats.base import MISSING, FormatConf

ACCESS_MODES = ("shared", "fpp")
SHUFFLES = ("none", "file", "sample")
READERS = ("native", "tf", "torch")
#: how reader=torch starts its DataLoader worker processes (multiprocessing start methods)
START_METHODS = ("fork", "forkserver", "spawn")
ORDERS = ("given", "random")
CACHE_POLICIES = ("cold", "warm", "storage_cold")
EXECUTORS = ("local", "slurm")
#: the ways a batch's compute is emulated (experiments.kernel.compute)
COMPUTE_MODES = ("sleep", "cpu")
#: most threads a rank may burn with at compute=cpu
MAX_COMPUTE_THREADS = 1024
#: what a point returns to a Hydra sweeper (a stored total; every one is higher-is-better)
OBJECTIVES = ("bandwidth_mib_s", "samples_per_s", "au", "iops")
#: Largest sample the kernel will hold in one buffer (bytes).
MAX_SAMPLE_SIZE = 2 * 1024**3
#: Longest time limit a point may ask for (minutes): a year
MAX_TIMEOUT_MIN = 366 * 24 * 60
#: what validation says when reader=tf is asked for without TensorFlow (experiments.kernel.tfdata raises it too)
TF_INSTALL_HINT = "reader=tf needs TensorFlow: pip install -e '.[tf]' (or pip install tensorflow-cpu)"
#: what validation says when reader=torch is asked for without PyTorch (experiments.kernel.torchdata raises it too)
TORCH_INSTALL_HINT = "reader=torch needs PyTorch: pip install -e '.[torch]'"

#: each format's conf, by format name (the registry's: experiments.formats.FORMAT_CONFS)
FORMAT_SCHEMAS: Mapping[str, type[FormatConf]] = FORMAT_CONFS


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
    # reader=torch (read_threads = DataLoader worker processes per rank, prefetch = prefetch_factor, batches per
    # worker): keep the workers (and the files they opened) from epoch to epoch
    persistent_workers: bool = False
    # reader=torch: the DataLoader copies each batch into pinned (page-locked) memory (a no-op without an accelerator)
    pin_memory: bool = False
    # reader=torch: how worker processes start: fork | forkserver | spawn (a worker never initialises MPI)
    start_method: str = "fork"
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
    # Slurm: points one array task measures one after the other (each with its own time limit and record): 0 = as
    # many as keep every slot busy for a few rounds (experiments.executors.slurm.packing). Not part of the point key.
    points_per_task: int = 0


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
    # CephFS object size: bytes or units, a multiple of stripe_size (0 = the directory's; refused off CephFS)
    object_size: str = "0"
    # data pool of the layout (CephFS, Lustre OST pool; "" = the directory's; refused where there are none)
    pool: str = ""
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
    # re-measure only the points the store holds as measured by an earlier method (e.g. cold without settling);
    # force=true re-measures every point. Not part of the point key.
    remeasure_earlier: bool = False
    # native: ddlio's own reader; tf: TensorFlow's tf.data (TFRecordDataset, or from_generator for other formats);
    # torch: PyTorch's DataLoader (map-style Dataset, DistributedSampler, worker processes)
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
    # what a point measures: train (a training loop reading its dataset every epoch); the workload kinds are
    # experiments.registry.KINDS, plug-ins included
    kind: str = "train"


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore (``conf/`` files extend these nodes)."""
    from hydra.core.config_store import ConfigStore  # lazy: start-up (hydra is imported only where it composes)

    cs = ConfigStore.instance()
    cs.store(name="ddlio_schema", node=DdlioConf)
    for name, node in FORMAT_SCHEMAS.items():
        cs.store(group="schema/format", name=name, node=node)
    cs.store(group="schema", name="access", node=AccessConf)
    cs.store(group="schema", name="workload", node=WorkloadConf)
    cs.store(group="schema", name="cluster", node=ClusterConf)
