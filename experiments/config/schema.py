"""The configuration schema: the dataclasses registered in Hydra's ConfigStore, and the choices and limits that
:func:`~experiments.config.validate` checks values against.

The values live in ``conf/``; this module is the schema of the groups Hydra composes (``access``, ``workload``,
``cluster`` and the top level). Each format's own conf lives with the format (``Format.conf`` in
``experiments/formats/<name>.py``); :func:`register_configs` takes them from the format registry. Hydra rejects
unknown keys and wrong types while it composes.

The confs are written out for Hydra's ConfigStore; each field's name, type, default and comment is held to the one
table of a point's fields, :data:`experiments.config.fields.FIELDS` (tests/test_point_fields.py), whose
:func:`~experiments.config.fields.conf_comment` writes the comment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from experiments.config.fields import knob_help
from experiments.formats import FORMAT_CONFS
from experiments.formats.base import MISSING, FormatConf
from experiments.registry import KINDS, LOADER_NEEDS

ACCESS_MODES = ("shared", "fpp")
SHUFFLES = ("none", "file", "sample")
#: how reader=torch starts its DataLoader worker processes (multiprocessing start methods)
START_METHODS = ("fork", "forkserver", "spawn")
#: where reader=torch copies each batch, as a training step moves it to its model (experiments.kernel.torchdata)
DEVICES = ("auto", "cpu", "cuda")
ORDERS = ("given", "random")
CACHE_POLICIES = ("cold", "warm", "storage_cold")
EXECUTORS = ("local", "slurm")
#: the ways a batch's compute is emulated (experiments.kernel.compute)
COMPUTE_MODES = ("sleep", "cpu")
#: most threads a rank may burn with at compute=cpu
MAX_COMPUTE_THREADS = 1024
#: what a point returns to a Hydra sweeper (a stored total; every one is higher-is-better)
OBJECTIVES = ("auto", "bandwidth_mib_s", "samples_per_s", "au", "iops")
#: Largest sample the kernel will hold in one buffer (bytes).
MAX_SAMPLE_SIZE = 2 * 1024**3
#: Longest time limit a point may ask for (minutes): a year
MAX_TIMEOUT_MIN = 366 * 24 * 60
#: what validation says when reader=tf is asked for without TensorFlow (experiments.kernel.tfdata raises it too)
TF_INSTALL_HINT = LOADER_NEEDS["tf"].hint
#: what validation says when reader=torch is asked for without PyTorch (experiments.kernel.torchdata raises it too)
TORCH_INSTALL_HINT = LOADER_NEEDS["torch"].hint

#: each format's conf, by format name (the registry's: experiments.formats.FORMAT_CONFS)
FORMAT_SCHEMAS: Mapping[str, type[FormatConf]] = FORMAT_CONFS


@dataclass
class AccessConf:
    # shared: all ranks read the same file(s); fpp: file per process, each rank reads only its own files
    name: str = MISSING


@dataclass
class WorkloadConf:
    # the workload preset's name (informational; in no key)
    name: str = "custom"
    # samples in the dataset
    samples: int = 1024
    # mean bytes per sample (units accepted)
    sample_size: str = "256KiB"
    # every sample a uint8 array of this shape, e.g. [512,512,3]; the size follows (prod(shape) bytes: a
    # workload.sample_size given on the command line that disagrees is an error, a preset's is replaced;
    # sample_size_stdev must be 0). Needed by the N-d layouts (format.layout=array); reader=tf hands on batches of this
    # shape. In the dataset key and recorded with the result; at [] (samples of sample_size bytes) in no key
    sample_shape: list[int] = field(default_factory=list)
    # standard deviation of the size, per sample, deterministic in seed; 0 = fixed
    sample_size_stdev: str = "0"
    # samples per file (fpp: at most; at least one file per rank)
    samples_per_file: int = 1024
    # the samples' bytes: random (incompressible), zeros, or a compressibility ratio > 1 (2.0: gzip compresses it about
    # 2:1); deterministic in seed, part of the dataset key, recorded with the result
    payload: str = "random"
    # samples per rank per step
    batch_size: int = 8
    # passes over the dataset
    epochs: int = 2
    # emulated compute per batch, seconds (what the step takes on an otherwise idle node)
    compute_time: float = 0.0
    # how a batch's compute is emulated: sleep (occupies no core and holds no lock: a step on an accelerator) or cpu (a
    # fixed amount of CPU work that takes compute_time on the idle node, in compute_threads threads: a CPU-only training
    # step, which stretches when the input pipeline takes cores from it; see point.md). In the point key only at cpu
    compute: str = "sleep"
    # compute=cpu: threads per rank that do the work; 0 = the CPUs the rank may run on (its affinity mask) divided by
    # the ranks on its node, at least 1. In the point key only with compute=cpu
    compute_threads: int = 0
    # cold: evict from the page cache before every epoch; warm: read once first, keep cached; storage_cold: also read a
    # flush file through before every epoch, to push the dataset out of the caches below the client (see point.md)
    cache: str = "cold"
    # cache=cold: read a freshly generated dataset through, untimed, before its first measured epoch, so every
    # repetition reads it as a repeat (see point.md)
    settle: bool = True
    # cache=storage_cold: size of the flush file (data_root/flush/, written once)
    flush_size: str = "8GiB"
    # compute time drawn per batch from normal(mean, stdev), clipped at 0, seeded; 0 = constant
    compute_time_stdev: float = 0.0
    # none; file: the files' order permuted each epoch; sample: a seeded global permutation of all samples each epoch
    shuffle: str = "none"
    # every rank reads the same number of whole batches; the rest of the epoch is dropped
    drop_last: bool = False
    # reader threads per rank that read ahead while compute runs; 0 = the training loop reads. With reader=torch: the
    # DataLoader's num_workers, worker *processes* per rank
    read_threads: int = 0
    # batches read ahead per rank (with read_threads ≥ 1). With reader=torch: the DataLoader's prefetch_factor, batches
    # in flight per worker
    prefetch: int = 2
    # reader=torch: the DataLoader keeps its workers, and the files they opened, from epoch to epoch. In the point key
    # only at true
    persistent_workers: bool = False
    # reader=torch: batches copied into pinned memory, and from there to the accelerator with non_blocking
    # (workload.device; a no-op without an accelerator). In the point key only at true
    pin_memory: bool = False
    # reader=torch: how workers start: fork, forkserver or spawn (a worker never initialises MPI). In the point key only
    # away from fork. The four reader=torch knobs away from their defaults with another reader are refused
    start_method: str = "fork"
    # reader=torch: where each batch is copied, as a training step moves it to its model (non_blocking from pinned
    # memory, timed apart: device_copy_time_s): auto (the accelerator where PyTorch sees one), cpu (nowhere) or cuda. In
    # the point key only away from auto
    device: str = "auto"
    # write every rank's reads, opens and closes to trace-rank<N>.csv in the run folder
    trace: bool = False
    # the accelerator utilisation (0–1, compute time over wall time) at or above which a point keeps its accelerators
    # fed (MLPerf Storage's rule: 0.90, 0.70 for CosmoFlow and DLRM); the verdict fed or starved of the end-of-sweep
    # line, summary, status, the guidelines and the report. In no key
    au_floor: float = 0.9
    # the fraction (0, 1] of the preset's samples a point reads: the sample count shrinks (never the sample size), to a
    # whole number, at least one sample per rank (access=fpp: a multiple of the rank count, so each rank keeps a file).
    # MLPerf Storage's presets are sized for many nodes; a small machine runs them at workload.scale=0.01. In no key
    # (samples carries the count)
    scale: float = 1.0
    # a preset's compute time per batch, seconds, by accelerator (workload=mlperf/<name>: MLPerf Storage's); the
    # top-level accelerator knob picks one into workload.compute_time
    compute_time_by_accelerator: dict[str, float] = field(default_factory=dict)


@dataclass
class CheckpointConf:
    """``kind=checkpoint``'s options (conf/checkpoint/: a preset per model, MLPerf Storage's). The model's
    dimensions and its parallelism decide each rank's shard (experiments/kinds/checkpoint/shards.py); the rest how
    the checkpoint is written and read back (docs/checkpoint.md)."""

    # the preset's name (conf/checkpoint/<name>.yaml)
    name: str = "custom"
    # transformer layers
    num_layers: int = MISSING
    # model width (elements)
    hidden_size: int = MISSING
    # MLP inner width (elements)
    ffn_hidden_size: int = MISSING
    # tokens in the embedding and the output layer
    vocab_size: int = MISSING
    # query heads
    num_attention_heads: int = MISSING
    # key/value heads (grouped-query attention)
    num_kv_heads: int = MISSING
    # datatype of the model's parameters (fp16, bf16, fp32, ...)
    model_datatype: str = "fp16"
    # datatype of the optimizer's states
    optimizer_datatype: str = "fp32"
    # tensor-parallel degree
    tensor: int = 1
    # pipeline-parallel degree (the data-parallel degree is the ranks over tensor x pipeline)
    pipeline: int = 1
    # DeepSpeed ZeRO stage, 0 to 3
    zero_stage: int = 0
    # the whole checkpoint's bytes, split over the ranks as the parallelism splits the model's (1GiB); 0 = the
    # model's own size
    size: str = "0"
    # access=fpp's files: dcp (torch.distributed.checkpoint: a file per rank and rank 0's .metadata) or torch (one
    # torch.save file per rank)
    layout: str = "dcp"
    # bytes of each write and read call
    transfer_size: str = "4MiB"
    # checkpoints written in a row, each in a fresh directory
    count: int = 1
    # all: read every checkpoint back after emptying the caches; none: write only
    restore: str = "all"
    # rank r restores rank r+read_shift's shard (the failover case; ppn to read another node's)
    read_shift: int = 0
    # where a restore reads each piece: staging (a new buffer, then copied into the state, as DCP's load and
    # torch.load + load_state_dict do) or state (straight into the state's memory, as an in-place loader does)
    restore_into: str = "staging"


@dataclass
class ClusterConf:
    """What every executor takes (as the submitit launcher's ``BaseQueueConf``): ``cluster=local`` is this conf, and
    each executor's own conf inherits it (``SlurmClusterConf``), so a key of another executor is refused while
    Hydra composes."""

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


@dataclass
class SlurmClusterConf(ClusterConf):
    """``cluster=slurm``: every key of :class:`ClusterConf`, then Slurm's own (as ``SlurmQueueConf`` extends
    ``BaseQueueConf``)."""

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
    # hdf5, tfrecord, npz, npy, bin, jpeg, png, parquet (a config group: each has its own options, below)
    format: FormatConf = MISSING
    # shared: all ranks read the same file(s); fpp: file per process, each rank reads only its own files
    access: AccessConf = MISSING
    workload: WorkloadConf = MISSING
    # kind=checkpoint's preset (llama3_8b, llama3_70b, llama3_405b, llama3_1t: the model's dimensions and its tensor,
    # pipeline and ZeRO parallelism) and options: checkpoint.size (the whole checkpoint's bytes; 0 = the model's own),
    # checkpoint.layout (dcp or torch, the files of access=fpp), checkpoint.transfer_size, checkpoint.count,
    # checkpoint.restore (all, none), checkpoint.read_shift, checkpoint.restore_into (staging, state) (see
    # checkpoint.md). In the point key only with kind=checkpoint
    checkpoint: CheckpointConf = MISSING
    # local: submitit's local executor, or slurm (slurm.md); cluster.launch is the MPI launch line (mpiexec -n {ranks}),
    # cluster.timeout_min the limit per point, cluster.hang_timeout_s how long a rank waits at a barrier before the step
    # is aborted, and how long an MPI step may take to get all its ranks through MPI start-up (a step that has not is
    # killed and started once more, then the point fails saying so, instead of holding its nodes until the time limit),
    # cluster.env extra environment for the ranks
    cluster: ClusterConf = MISSING
    # stripe count, as lfs setstripe -c takes it: -1 all OSTs, 0 the file system's default, N ≥ 1 (on CephFS: objects
    # written at a time, N ≥ 1 or 0; the layout rules are the backend's, docs/point.md)
    stripe: int = 1
    # Lustre stripe size, bytes or units (1MiB, 4M), a multiple of 64 KiB; 0 = default
    stripe_size: str = "1MiB"
    # CephFS object size, bytes or units, a multiple of stripe_size and at most the OSDs' osd max object size; 0 = the
    # directory's; refused off CephFS
    object_size: str = "0"
    # the layout's data pool (a CephFS data pool, a Lustre OST pool); "" = the directory's; refused where there are none
    pool: str = ""
    # nodes per point (>1 needs a cluster)
    nodes: int = 1
    # MPI ranks per node
    ppn: int = 1
    # repetition index; repeat=0,1,2 measures three times, as three points
    repeat: int = 0
    # seed of sample sizes and payload bytes
    seed: int = 42
    # where datasets (datasets/) and run folders (runs/) live
    data_root: str = "ddlio-data"
    # results store: a SQLite file, or a SQLAlchemy URL (postgresql://user@host:5432/db; see store.md)
    db: str = "results.db"
    # a file (chmod 600) holding the store's URL with its password; replaces db
    db_url_file: str = ""
    # re-measure points already in the store
    force: bool = False
    # re-measure only points stored as measured by an earlier method (cold without settling)
    remeasure_earlier: bool = False
    # native: ddlio's reader; tf: TensorFlow's tf.data (needs pip install -e '.[tf]'; see point.md); torch: PyTorch's
    # DataLoader (needs pip install -e '.[torch]'; see point.md)
    reader: str = "native"
    # wait for the jobs and store each result as it lands; false (Slurm only) submits and returns
    wait: bool = True
    # print what would be submitted (points, resources, and on Slurm the whole job script sbatch would receive) and
    # write nothing
    dry_run: bool = False
    # rerun points stored as failed
    retry_failed: bool = True
    # given, or random: run the points in a seeded random order, so drift cannot pose as an effect
    order: str = "given"
    # what each point returns to a Hydra sweeper and "best" ranks by, maximised: auto (au where workload.compute_time >
    # 0, ties broken by bandwidth; else bandwidth_mib_s), bandwidth_mib_s, samples_per_s, au, iops (not part of the
    # point key)
    objective: str = "auto"
    # what a point measures: train, a training loop reading its dataset every epoch (the workload kinds, plug-ins
    # included, are experiments.registry.KINDS). In the point key only away from train
    kind: str = "train"
    # the accelerator whose compute time per batch the workload preset's table (workload.compute_time_by_accelerator)
    # gives workload.compute_time: a100, h100, b200 for MLPerf Storage's presets (workload=mlperf/<name>, see
    # configuration.md); "" = none (workload.compute_time as given). Recorded with the point, in no key (compute_time
    # carries the figure)
    accelerator: str = ""


def _knob_help() -> str:
    """The knobs as ``sweep.py --help`` lists them (:func:`experiments.config.fields.knob_help`), with the workload
    kinds the registry holds, plug-ins included."""
    return knob_help({"kind": sorted(KINDS)})


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore (``conf/`` files extend these nodes)."""
    from hydra.core.config_store import ConfigStore  # lazy: start-up (hydra is imported only where it composes)
    from omegaconf import OmegaConf  # lazy: as hydra

    # conf/config.yaml's hydra.help.template lists the knobs, each with its default and doc, through this resolver
    OmegaConf.register_new_resolver("ddlio_knobs", _knob_help, replace=True)
    cs = ConfigStore.instance()
    cs.store(name="ddlio_schema", node=DdlioConf)
    for name, node in FORMAT_SCHEMAS.items():
        cs.store(group="schema/format", name=name, node=node)
    cs.store(group="schema", name="access", node=AccessConf)
    cs.store(group="schema", name="workload", node=WorkloadConf)
    cs.store(group="schema", name="checkpoint", node=CheckpointConf)
    cs.store(group="schema", name="cluster", node=ClusterConf)
    cs.store(group="schema", name="cluster_slurm", node=SlurmClusterConf)
