"""A point's fields stated once: :data:`FIELDS`, one row per field, in the stored form's order, and the views
derived from it.

Each row names the field in every view of a point: the composed Hydra key it is configured by (``conf``), the
frozen spec's field (``spec``: ``part.name``, part ``format``/``layout``/``workload`` or none for the
:class:`~experiments.config.point.PointSpec` itself), its key in the stored form (``stored``), its column in the
store's points table (``column``), and which key it enters (``dataset``: its name in ``dataset_params``;
``measurement``: its names in ``measurement_params``). ``keyless`` is the value at which a field added after points
were first stored is left out of the stored form (and of the point key), so that a point measured before it keeps
its stored bytes and its key. ``type``/``default`` are the spec's, ``conf_type``/``conf_default`` the Hydra
conf's, ``doc`` the one line the conf's comment, ``docs/configuration.md``'s knob table and ``sweep.py --help``
show.

Derived here: :data:`STORED_FORM`, :data:`KEYLESS_DEFAULTS`, :data:`DERIVED_KEYS`, the knob table of the docs
(:func:`knob_table`) and the knobs ``--help`` lists (:func:`knob_help`). Held to the table by tests
(tests/test_point_fields.py): the Hydra confs (experiments/config/schema.py, written for Hydra's ConfigStore), the
specs (experiments/config/point.py), validation's fields, and the store's column map (``ddlio.store.rows``, below
this package: it may not import it). A new knob is a row here, a field in the conf and the spec, and a check.

This module imports nothing beyond the standard library: every process that reads a point imports it.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

#: a spec field without a default (validation always gives it)
REQUIRED = "<required>"
#: a Hydra conf value that must be given (omegaconf.MISSING)
MISSING = "???"
#: a field stored whatever its value (it was stored from the first ddlio on)
ALWAYS = "<always>"


@dataclass(frozen=True)
class Field:
    """One field of a point, named in every view (see the module's docstring)."""

    spec: str | None
    stored: str | None
    conf: str | None
    type: str
    default: Any
    conf_type: str | None
    conf_default: Any
    doc: str
    column: str | None = None
    keyless: Any = ALWAYS
    dataset: str | None = None
    measurement: tuple[str, ...] = ()
    #: the default as the docs and --help show it, where the conf's default is not what a run gets
    shown: str | None = None

    @property
    def part(self) -> str:
        """The spec the field belongs to: ``format``, ``layout``, ``workload``, or "" (the PointSpec)."""
        return self.spec.split(".")[0] if self.spec and "." in self.spec else ""

    @property
    def name(self) -> str:
        """The field's name in its spec."""
        return (self.spec or "").split(".")[-1]

    @property
    def plain_doc(self) -> str:
        """:attr:`doc` without its markdown (the conf's comment and ``--help`` show it)."""
        return re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", self.doc).replace("`", "")

    @property
    def knob(self) -> str | None:
        """What the command line sets: ``format=hdf5``, ``access=fpp``, ``workload.epochs=3``, ``cluster=slurm``
        (None: not configured, worked out while validating; ``format.*``: the format's options)."""
        if self.conf in ("format.name", "access.name", "cluster.*", "checkpoint.*"):
            return self.conf.split(".")[0]
        return None if self.conf == "format.*" else self.conf


def _f(spec: str | None, stored: str | None, conf: str | None, type: str, default: Any, conf_type: str | None,
       conf_default: Any, doc: str, **kw: Any) -> Field:
    return Field(spec, stored, conf, type, default, conf_type, conf_default, doc, **kw)


_PRESET = "`default` preset: `{}`"
_W = "workload."
#: The one table: every field of a point in the stored form's order (a new field goes at the end, so that stored
#: points keep their bytes), then the knobs that are not fields of a point (how a sweep runs, not what it measures).
FIELDS: tuple[Field, ...] = (
    _f("format.name", "format", "format.name", "str", REQUIRED, None, MISSING,
       "`hdf5`, `tfrecord`, `npz`, `npy`, `bin`, `jpeg`, `png`, `parquet` (a config group: each has its own "
       "options, below)",
       column="format", dataset="format", shown="`hdf5`"),
    _f("format.options", "format_options", "format.*", "dict[str, Any]", {}, None, MISSING,
       "the format's options as composed, in its conf's order (experiments/formats/<name>.py)",
       column="format_options", dataset="format_options", measurement=("read_options",)),
    _f("layout.access", "access", "access.name", "str", REQUIRED, "str", MISSING,
       "`shared`: all ranks read the same file(s); `fpp`: file per process, each rank reads only its own files",
       column="access", measurement=("access",), shown="`shared`"),
    _f("layout.stripe_count", "stripe_count", "stripe", "int", REQUIRED, "int", 1,
       "stripe count, as `lfs setstripe -c` takes it: -1 all OSTs, 0 the file system's default, N ≥ 1 (on CephFS: "
       "objects written at a time, N ≥ 1 or 0; the layout rules are the backend's, docs/point.md)",
       column="stripe_count", dataset="stripe_count", measurement=("stripe_count",)),
    _f("layout.stripe_size", "stripe_size", "stripe_size", "int", REQUIRED, "str", "1MiB",
       "Lustre stripe size, bytes or units (`1MiB`, `4M`), a multiple of 64 KiB; 0 = default",
       column="stripe_size", dataset="stripe_size", measurement=("stripe_size",)),
    _f("nodes", "nodes", "nodes", "int", REQUIRED, "int", 1, "nodes per point (>1 needs a cluster)",
       column="nodes", measurement=("nodes",)),
    _f("ppn", "ppn", "ppn", "int", REQUIRED, "int", 1, "MPI ranks per node", column="ppn", measurement=("ppn",)),
    _f("repeat", "repeat", "repeat", "int", REQUIRED, "int", 0,
       "repetition index; `repeat=0,1,2` measures three times, as three points",
       column="repeat", measurement=("repeat",)),
    _f("seed", "seed", "seed", "int", REQUIRED, "int", 42, "seed of sample sizes and payload bytes",
       column="seed", dataset="seed"),
    _f("workload.samples", "samples", _W + "samples", "int", REQUIRED, "int", 1024, "samples in the dataset",
       column="samples", dataset="samples", shown=_PRESET.format(2048)),
    _f("workload.sample_size", "sample_size", _W + "sample_size", "int", REQUIRED, "str", "256KiB",
       "mean bytes per sample (units accepted)",
       column="sample_size", dataset="sample_size", shown=_PRESET.format("128KiB")),
    _f("workload.sample_size_stdev", "sample_size_stdev", _W + "sample_size_stdev", "int", REQUIRED, "str", "0",
       "standard deviation of the size, per sample, deterministic in `seed`; 0 = fixed",
       column="sample_size_stdev", dataset="sample_size_stdev"),
    _f("workload.samples_per_file", "samples_per_file", _W + "samples_per_file", "int", REQUIRED, "int", 1024,
       "samples per file (fpp: at most; at least one file per rank)",
       column="samples_per_file", shown=_PRESET.format(2048)),
    _f("workload.batch_size", "batch_size", _W + "batch_size", "int", REQUIRED, "int", 8,
       "samples per rank per step", column="batch_size", measurement=("batch_size",), shown=_PRESET.format(32)),
    _f("workload.epochs", "epochs", _W + "epochs", "int", REQUIRED, "int", 2, "passes over the dataset",
       column="epochs", measurement=("epochs",)),
    _f("workload.compute_time", "compute_time", _W + "compute_time", "float", REQUIRED, "float", 0.0,
       "emulated compute per batch, seconds (what the step takes on an otherwise idle node)",
       column="compute_time_s", measurement=("compute_time",)),
    _f("workload.cache", "cache", _W + "cache", "str", REQUIRED, "str", "cold",
       "`cold`: evict from the page cache before every epoch; `warm`: read once first, keep cached; "
       "`storage_cold`: also read a flush file through before every epoch, to push the dataset out of the caches "
       "below the client (see [point.md](point.md#caches-below-the-client))",
       column="cache_policy", measurement=("cache",)),
    _f("workload.name", "workload_name", _W + "name", "str", "custom", "str", "custom",
       "the workload preset's name (informational; in no key)", column="workload", shown=_PRESET.format("default")),
    _f("data_root", "data_root", "data_root", "str", REQUIRED, "str", "ddlio-data",
       "where datasets (`datasets/`) and run folders (`runs/`) live", column="data_root", dataset="data_root"),
    _f("db", "db", "db", "str", REQUIRED, "str", "results.db",
       "results store: a SQLite file, or a SQLAlchemy URL (`postgresql://user@host:5432/db`; see "
       "[store.md](store.md))"),
    _f("cluster", "cluster", "cluster.*", "LocalCluster | SlurmCluster", REQUIRED, None, MISSING,
       "`local`: submitit's local executor, or `slurm` ([slurm.md](slurm.md)); `cluster.launch` is the MPI launch "
       "line (`mpiexec -n {ranks}`), `cluster.timeout_min` the limit per point, `cluster.hang_timeout_s` how long a "
       "rank waits at a barrier before the step is aborted, and how long an MPI step may take to get all its ranks "
       "through MPI start-up (a step that has not is killed and started once more, then the point fails saying so, "
       "instead of holding its nodes until the time limit), `cluster.env` extra environment for the ranks",
       column="cluster", measurement=("launch", "env", "cluster"), shown="`local`"),
    _f("layout.fs_type", "fs_type", None, "str", "unknown", None, None,
       "the file system at data_root when the point was validated (lustre.fs.fs_info(...).type)"),
    _f("layout.striping_applicable", "striping_applicable", None, "bool", False, None, None,
       "whether the storage backend of that file system stripes (lustre.striping_applies): the striping is then "
       "part of the dataset key"),
    _f("force", "force", "force", "bool", False, "bool", False, "re-measure points already in the store"),
    _f("overrides", "overrides", None, "tuple[str, ...]", (), None, None,
       "the Hydra overrides that made the point (passwords masked)"),
    _f("workload.payload", "payload", _W + "payload", "str", "random", "str", "random",
       "the samples' bytes: `random` (incompressible), `zeros`, or a compressibility ratio > 1 (`2.0`: gzip "
       "compresses it about 2:1); deterministic in `seed`, part of the dataset key, recorded with the result",
       dataset="payload"),
    _f("workload.compute_time_stdev", "compute_time_stdev", _W + "compute_time_stdev", "float", 0.0, "float", 0.0,
       "compute time drawn per batch from normal(mean, stdev), clipped at 0, seeded; 0 = constant",
       measurement=("compute_time_stdev",)),
    _f("workload.shuffle", "shuffle", _W + "shuffle", "str", "none", "str", "none",
       "`none`; `file`: the files' order permuted each epoch; `sample`: a seeded global permutation of all samples "
       "each epoch", measurement=("shuffle",)),
    _f("workload.drop_last", "drop_last", _W + "drop_last", "bool", False, "bool", False,
       "every rank reads the same number of whole batches; the rest of the epoch is dropped",
       measurement=("drop_last",)),
    _f("workload.read_threads", "read_threads", _W + "read_threads", "int", 0, "int", 0,
       "reader threads per rank that read ahead while compute runs; 0 = the training loop reads. With "
       "`reader=torch`: the DataLoader's `num_workers`, worker *processes* per rank", measurement=("read_threads",)),
    _f("workload.prefetch", "prefetch", _W + "prefetch", "int", 2, "int", 2,
       "batches read ahead per rank (with `read_threads` ≥ 1). With `reader=torch`: the DataLoader's "
       "`prefetch_factor`, batches in flight per worker", measurement=("prefetch",)),
    _f("workload.trace", "trace", _W + "trace", "bool", False, "bool", False,
       "write every rank's reads, opens and closes to `trace-rank<N>.csv` in the run folder", measurement=("trace",)),
    _f("reader", "reader", "reader", "str", "native", "str", "native",
       "`native`: ddlio's reader; `tf`: TensorFlow's tf.data (needs `pip install -e '.[tf]'`; see "
       "[point.md](point.md#readertf)); `torch`: PyTorch's DataLoader (needs `pip install -e '.[torch]'`; see "
       "[point.md](point.md#readertorch))", measurement=("reader",)),
    _f("workload.settle", "settle", _W + "settle", "bool", False, "bool", True,
       "`cache=cold`: read a freshly generated dataset through, untimed, before its first measured epoch, so every "
       "repetition reads it as a repeat (see [point.md](point.md#settling))", measurement=("settle",)),
    _f("workload.flush_size", "flush_size", _W + "flush_size", "int", 0, "str", "8GiB",
       "`cache=storage_cold`: size of the flush file (`data_root/flush/`, written once)",
       measurement=("flush_size",)),
    _f("workload.sample_shape", "sample_shape", _W + "sample_shape", "tuple[int, ...]", (), "list[int]", [],
       "every sample a `uint8` array of this shape, e.g. `[512,512,3]`; the size follows (`prod(shape)` bytes: a "
       "`workload.sample_size` given on the command line that disagrees is an error, a preset's is replaced; "
       "`sample_size_stdev` must be 0). Needed by the N-d layouts (`format.layout=array`); `reader=tf` hands on "
       "batches of this shape. In the dataset key and recorded with the result; at `[]` (samples of `sample_size` "
       "bytes) in no key", dataset="sample_shape"),
    _f("workload.compute", "compute", _W + "compute", "str", "sleep", "str", "sleep",
       "how a batch's compute is emulated: `sleep` (occupies no core and holds no lock: a step on an accelerator) or "
       "`cpu` (a fixed amount of CPU work that takes `compute_time` on the idle node, in `compute_threads` threads: "
       "a CPU-only training step, which stretches when the input pipeline takes cores from it; see "
       "[point.md](point.md#compute)). In the point key only at `cpu`",
       keyless="sleep", measurement=("compute",)),
    _f("workload.compute_threads", "compute_threads", _W + "compute_threads", "int", 0, "int", 0,
       "`compute=cpu`: threads per rank that do the work; 0 = the CPUs the rank may run on (its affinity mask) "
       "divided by the ranks on its node, at least 1. In the point key only with `compute=cpu`",
       keyless=0, measurement=("compute_threads",)),
    _f("layout.object_size", "object_size", "object_size", "int", 0, "str", "0",
       "CephFS object size, bytes or units, a multiple of `stripe_size` and at most the OSDs' `osd max object "
       "size`; 0 = the directory's; refused off CephFS",
       keyless=0, dataset="object_size", measurement=("object_size",)),
    _f("layout.pool", "pool", "pool", "str", "", "str", "",
       "the layout's data pool (a CephFS data pool, a Lustre OST pool); \"\" = the directory's; refused where "
       "there are none", keyless="", dataset="pool", measurement=("pool",)),
    _f("workload.persistent_workers", "persistent_workers", _W + "persistent_workers", "bool", False, "bool", False,
       "`reader=torch`: the DataLoader keeps its workers, and the files they opened, from epoch to epoch. In the "
       "point key only at `true`", keyless=False, measurement=("persistent_workers",)),
    _f("workload.pin_memory", "pin_memory", _W + "pin_memory", "bool", False, "bool", False,
       "`reader=torch`: batches copied into pinned memory, and from there to the accelerator with `non_blocking` "
       "(`workload.device`; a no-op without an accelerator). In the point key only at `true`", keyless=False,
       measurement=("pin_memory",)),
    _f("workload.start_method", "start_method", _W + "start_method", "str", "fork", "str", "fork",
       "`reader=torch`: how workers start: `fork`, `forkserver` or `spawn` (a worker never initialises MPI). In the "
       "point key only away from `fork`. The four `reader=torch` knobs away from their defaults with another "
       "reader are refused", keyless="fork", measurement=("start_method",)),
    _f("workload.device", "device", _W + "device", "str", "auto", "str", "auto",
       "`reader=torch`: where each batch is copied, as a training step moves it to its model (`non_blocking` from "
       "pinned memory, timed apart: `device_copy_time_s`): `auto` (the accelerator where PyTorch sees one), `cpu` "
       "(nowhere) or `cuda`. In the point key only away from `auto`", keyless="auto", measurement=("device",)),
    _f("kind", "kind", "kind", "str", "train", "str", "train",
       "what a point measures: `train`, a training loop reading its dataset every epoch (the workload kinds, "
       "plug-ins included, are `experiments.registry.KINDS`). In the point key only away from `train`",
       keyless="train", measurement=("kind",)),
    _f("checkpoint", "checkpoint", "checkpoint.*", "dict[str, Any]", {}, None, MISSING,
       "`kind=checkpoint`'s preset (`llama3_8b`, `llama3_70b`, `llama3_405b`, `llama3_1t`: the model's dimensions "
       "and its tensor, pipeline and ZeRO parallelism) and options: `checkpoint.size` (the whole checkpoint's bytes; "
       "0 = the model's own), `checkpoint.layout` (`dcp` or `torch`, the files of `access=fpp`), "
       "`checkpoint.transfer_size`, `checkpoint.count`, `checkpoint.restore` (`all`, `none`), `checkpoint.read_shift`, "
       "`checkpoint.restore_into` (`staging`, `state`) "
       "(see [checkpoint.md](checkpoint.md)). In the point key only with `kind=checkpoint`",
       keyless={}, measurement=("checkpoint",), shown="`llama3_8b`"),
    _f("workload.au_floor", "au_floor", _W + "au_floor", "float", 0.9, "float", 0.9,
       "the accelerator utilisation (0–1, compute time over wall time) at or above which a point keeps its "
       "accelerators fed (MLPerf Storage's rule: 0.90, 0.70 for CosmoFlow and DLRM); the verdict `fed` or `starved` "
       "of the end-of-sweep line, `summary`, `status`, the guidelines and the report. In no key",
       keyless=0.9),
    _f("workload.scale", "scale", _W + "scale", "float", 1.0, "float", 1.0,
       "the fraction (0, 1] of the preset's samples a point reads: the sample count shrinks (never the sample size), "
       "to a whole number, at least one sample per rank (`access=fpp`: a multiple of the rank count, so each rank "
       "keeps a file). MLPerf Storage's presets are sized for many nodes; a small machine runs them at "
       "`workload.scale=0.01`. In no key (`samples` carries the count)", keyless=1.0),
    _f("accelerator", "accelerator", "accelerator", "str", "", "str", "",
       "the accelerator whose compute time per batch the workload preset's table "
       "(`workload.compute_time_by_accelerator`) gives `workload.compute_time`: `a100`, `h100`, `b200` for MLPerf "
       "Storage's presets (`workload=mlperf/<name>`, see [configuration.md](configuration.md#mlperf-storages-"
       "workloads)); \"\" = none (`workload.compute_time` as given). Recorded with the point, in no key "
       "(`compute_time` carries the figure)", keyless="", shown='""'),
    # not fields of a point: how a sweep runs
    _f(None, None, _W + "compute_time_by_accelerator", "", None, "dict[str, float]", {},
       "a preset's compute time per batch, seconds, by accelerator (`workload=mlperf/<name>`: MLPerf Storage's); "
       "the top-level `accelerator` knob picks one into `workload.compute_time`"),
    _f(None, None, "db_url_file", "", None, "str", "",
       "a file (`chmod 600`) holding the store's URL with its password; replaces `db`", shown="(unset)"),
    _f(None, None, "remeasure_earlier", "", None, "bool", False,
       "re-measure only points stored as measured by an earlier method (cold without settling)"),
    _f(None, None, "wait", "", None, "bool", True,
       "wait for the jobs and store each result as it lands; `false` (Slurm only) submits and returns"),
    _f(None, None, "dry_run", "", None, "bool", False,
       "print what would be submitted (points, resources, and on Slurm the whole job script sbatch would receive) "
       "and write nothing"),
    _f(None, None, "retry_failed", "", None, "bool", True, "rerun points stored as failed"),
    _f(None, None, "order", "", None, "str", "given",
       "`given`, or `random`: run the points in a seeded random order, so drift cannot pose as an effect"),
    _f(None, None, "objective", "", None, "str", "auto",
       "what each point returns to a Hydra sweeper and \"best\" ranks by, maximised: `auto` (`au` where "
       "`workload.compute_time` > 0, ties broken by bandwidth; else `bandwidth_mib_s`), `bandwidth_mib_s`, "
       "`samples_per_s`, `au`, `iops` (not part of the point key)"),
)
#: the fields of a point (rows with a spec field), in the stored form's order
POINT_FIELDS: tuple[Field, ...] = tuple(f for f in FIELDS if f.spec is not None)

#: The stored form of a point, flat: (stored key, part, field) in the stored order; part "" is the point itself.
STORED_FORM: tuple[tuple[str, str, str], ...] = tuple((f.stored, f.part, f.name) for f in POINT_FIELDS
                                                      if f.stored is not None)
#: fields added after points were first stored: at these values they are left out of the stored form (and of the
#: point key), so that a point measured before them keeps its stored form and key
KEYLESS_DEFAULTS: dict[str, Any] = {f.stored: f.keyless for f in POINT_FIELDS
                                    if f.stored is not None and f.keyless is not ALWAYS}
#: what the stored form adds to the fields: derived from them, ignored when read back
DERIVED_KEYS = ("ranks", "num_files", "dataset_key", "point_key")


def _shown(f: Field) -> str:
    if f.shown is not None:
        return f.shown
    value = f.conf_default
    if isinstance(value, bool):
        value = str(value).lower()
    elif value == "":
        value = '""'
    return f"`{value}`"


#: the workload group (conf/workload/: a preset sets the workload's keys, each overridable)
WORKLOAD_GROUP_DOC = ("preset `default` (2048 × 128 KiB = 256 MiB), `tiny` (64 × 16 KiB) or MLPerf Storage's "
                      "`mlperf/unet3d`, `resnet50`, `cosmoflow`, `retinanet`, `flux`, `dlrm` (see "
                      "[MLPerf Storage's workloads](#mlperf-storages-workloads)), and its keys:")


def knobs() -> tuple[Field, ...]:
    """The rows a user sets on the command line, as the docs list them: the groups that pick a format and an access,
    the top-level knobs, the workload's keys, and the cluster."""
    rows = [f for f in FIELDS if f.knob is not None]
    rank = {"format": 0, "access": 1, "cluster": 4}
    return tuple(sorted(rows, key=lambda f: rank.get(f.knob or "", 3 if (f.knob or "").startswith(_W) else 2)))


def knob_table() -> str:
    """The knob table of docs/configuration.md (between its ``knobs`` marker comments), from :data:`FIELDS`."""
    lines = ["| key | meaning | default |", "|---|---|---|"]
    for f in knobs():
        if f.knob == _W + "samples":  # the first of the workload's keys: the group that sets them first
            lines.append(f"| `workload` | {WORKLOAD_GROUP_DOC} | `default` |")
        lines.append(f"| `{f.knob}` | {f.doc} | {_shown(f)} |")
    return "\n".join(lines) + "\n"


def knob_help(choices: dict[str, list[str]] | None = None) -> str:
    """The knobs as ``sweep.py --help`` lists them: one per line, its default and its doc (markdown left out),
    ``choices`` naming the valid values of a knob where the doc cannot (``kind``: the registry's, plug-ins
    included)."""
    out = []
    for f in knobs():
        doc = f.plain_doc
        if choices and f.knob in choices:
            doc += f" (choices: {', '.join(choices[f.knob])})"
        out.append(f"  {f.knob} = {_shown(f).replace('`', '')}")
        out += textwrap.wrap(doc, 116, initial_indent="      ", subsequent_indent="      ", break_long_words=False,
                             break_on_hyphens=False)
    return "\n".join(out)


def conf_comment(f: Field, indent: str = "    ", width: int = 120) -> list[str]:
    """The comment above the field in its Hydra conf (experiments/config/schema.py): :attr:`Field.plain_doc`,
    wrapped."""
    return textwrap.wrap(f.plain_doc, width, initial_indent=indent + "# ", subsequent_indent=indent + "# ",
                         break_long_words=False, break_on_hyphens=False)


def conf_row(conf_class: str, name: str) -> Field | None:
    """The row of field ``name`` of the Hydra conf ``conf_class`` (``DdlioConf``, ``AccessConf``, ``WorkloadConf``;
    a group of DdlioConf by what the command line sets), or None (``DdlioConf.workload``: the preset group)."""
    if conf_class == "DdlioConf":
        return next((f for f in FIELDS if f.knob == name), None)
    group = {"AccessConf": "access.", "WorkloadConf": _W}[conf_class]
    return next((f for f in FIELDS if f.conf == group + name), None)


#: the marker comments around the knob table in docs/configuration.md
KNOBS_BEGIN = "<!-- knobs: generated from experiments/config/fields.py (python -m experiments.config.fields) -->"
KNOBS_END = "<!-- /knobs -->"


def with_knob_table(text: str) -> str:
    """``text`` (docs/configuration.md) with :func:`knob_table` between the knob markers."""
    head, rest = text.split(KNOBS_BEGIN + "\n", 1)
    _, tail = rest.split(KNOBS_END, 1)
    return head + KNOBS_BEGIN + "\n" + knob_table() + KNOBS_END + tail


if __name__ == "__main__":  # python -m experiments.config.fields [docs/configuration.md]: rewrite its knob table
    import sys
    from pathlib import Path

    doc = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/configuration.md")
    doc.write_text(with_knob_table(doc.read_text()))
