"""What a point *is*, computed once: its configuration (the point without ``repeat``) and the label it shows.

Everything that prints or groups points — the sweep's progress lines, the end-of-sweep "best" line, Optuna's
trials, ``summary``, ``status``, figures, guidelines and the report — takes both from here, working from the point's
stored form (the ``points.config`` column, :func:`experiments.config.point.to_stored`), so that two rows print the
same label only when they are repetitions of one configuration.

- :func:`config_params` / :func:`config_key`: what makes two points the same configuration — the point key's
  inputs without ``repeat`` (the stored form less bookkeeping: keys, ``db``, ``force``, ``overrides``, the cluster's
  submission options that do not change a measurement);
- :func:`knobs`: a configuration's knobs as short texts (``layout=example``, ``reader=tf``, ``rt=4``,
  ``storage_cold``), the vocabulary of labels;
- :func:`labels`: for points shown together, the paper's head (:func:`paper_label`) followed by every knob in
  which a point differs from the others (``#<key>`` is added only if two configurations still read the same);
- :func:`cache_text`: the cache a point was measured with, said plainly (``storage_cold``, not "cache cold", and why
  ``unknown``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ddlio.evidence import stripe_unapplied
from ddlio.lazy import LazyRegistry

#: stored keys that do not change what is measured: a configuration is the point without them
NOT_CONFIGURATION = frozenset({
    "repeat", "point_key", "dataset_key", "db", "force", "overrides", "ranks", "num_files", "workload_name",
    "fs_type", "striping_applicable",
})
#: the cluster's keys that reach the point key (its name, the MPI launch line, the ranks' environment)
CLUSTER_KEYS = ("name", "launch", "env")
#: keys stored only when off their default (added after points were first stored): missing means this value
DEFAULTS: dict[str, Any] = {"compute": "sleep", "compute_threads": 0}
#: stored key -> short name in a label ("" = the value alone); keys not listed show as ``key=value``
SHORT = {
    "stripe_size": "S", "samples": "samples", "sample_size": "", "sample_size_stdev": "±", "samples_per_file": "spf",
    "batch_size": "batch", "epochs": "epochs", "compute_time": "compute", "compute_time_stdev": "compute±",
    "cache": "", "read_threads": "rt", "prefetch": "prefetch", "reader": "reader", "shuffle": "shuffle",
    "sample_shape": "shape", "compute": "compute", "compute_threads": "ct", "seed": "seed", "payload": "payload",
    "workload_name": "workload", "data_root": "root",
}
#: knobs the head of a label already shows (kind, format/access, nodes, ranks, the stripe count: :func:`paper_label`)
HEAD = ("kind", "format", "access", "nodes", "ppn", "stripe_count")
#: a checkpoint's options a label leaves to its preset's name (the model's shape; ``name`` is in the head)
CHECKPOINT_SHAPE = frozenset({"name", "num_layers", "hidden_size", "ffn_hidden_size", "vocab_size",
                              "num_attention_heads", "num_kv_heads", "model_datatype", "optimizer_datatype"})
#: label order of the other knobs (unlisted ones follow, sorted)
ORDER = ("workload_name", "format_options", "sample_shape", "sample_size", "sample_size_stdev", "samples",
         "samples_per_file", "stripe_size", "reader", "read_threads", "prefetch", "batch_size", "epochs", "shuffle",
         "compute", "compute_threads", "compute_time", "compute_time_stdev", "cache", "settle", "flush_size")
#: knobs of a workload preset: hidden from a label when the preset's name already tells the points apart
WORKLOAD_KNOBS = frozenset({"samples", "sample_size", "sample_size_stdev", "samples_per_file", "batch_size",
                            "epochs", "compute_time", "compute_time_stdev", "sample_shape"})


def digest(obj: Any) -> str:
    """The first 20 hex digits of the SHA-256 of ``obj``'s canonical JSON (as ddlio's point keys are made)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:20]


#: the stored config's per-point fields (top level): a point's own, shared by no other point of its configuration
PER_POINT = ("repeat", "point_key", "dataset_key", "overrides")


def config_digest(config: Mapping[str, Any]) -> str:
    """:func:`digest` of the stored ``config`` without its :data:`PER_POINT` fields (the ``points.config_digest``
    column): equal for points whose stored configs differ only in those, so that a reader of many points groups
    them in SQL and parses one stored config per group. Unlike :func:`config_key` it keeps everything else
    stored (ranks, workload name, file system ...), so every column the store derives from the config is one
    value per group."""
    return digest({k: v for k, v in config.items() if k not in PER_POINT})


def config_params(config: Mapping[str, Any], without: Iterable[str] = ()) -> dict[str, Any]:
    """The stored point ``config`` as a configuration: every input of its point key but ``repeat`` (and but the
    stored keys named in ``without``: what a comparison varies, e.g. ``("stripe_count", "stripe_size")``).

    Keys added at their default (:data:`DEFAULTS`) are dropped, so a point stored before the key existed and one
    stored after it at its default are one configuration; ``settle`` counts only under ``cache=cold`` and
    ``flush_size`` only under ``cache=storage_cold`` (where the point key counts them)."""
    out: dict[str, Any] = {}
    skip = NOT_CONFIGURATION | set(without)
    for k, v in config.items():
        if k in skip or (k in DEFAULTS and v == DEFAULTS[k]):
            continue
        if k == "cluster" and isinstance(v, Mapping):
            v = {c: v[c] for c in CLUSTER_KEYS if c in v}
        out[k] = v
    cache = out.get("cache")
    if cache != "cold":
        out.pop("settle", None)
    if cache != "storage_cold":
        out.pop("flush_size", None)
    return out


def config_key(config: Mapping[str, Any], without: Iterable[str] = ()) -> str:
    """The configuration's key: :func:`digest` of :func:`config_params` (equal for repetitions, and only them;
    with ``without``, equal for the configurations that differ only in those knobs: a comparison's scenario)."""
    return digest(config_params(config, without))


def _human_bytes(n: float) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.3g}{unit}"
        n /= 1024
    return f"{n:.3g}TiB"


def _value_text(key: str, v: Any) -> str:
    if key in ("sample_size", "sample_size_stdev", "stripe_size", "flush_size", "size", "transfer_size") and \
            isinstance(v, int | float):
        if v == 0 and key in ("stripe_size", "size"):
            return "default" if key == "stripe_size" else "model"  # a checkpoint of the model's own size
        return _human_bytes(v)
    if key in ("compute_time", "compute_time_stdev") and isinstance(v, int | float):
        return f"{v:g}s"
    if key == "sample_shape" and isinstance(v, list | tuple):
        return "x".join(str(x) for x in v) if v else "flat"
    if isinstance(v, Mapping):
        return ",".join(f"{k}={_value_text(k, x)}" for k, x in sorted(v.items()))
    return str(v)


def knobs(config: Mapping[str, Any], without: Iterable[str] = ()) -> dict[str, str]:
    """The configuration's knobs beyond the label's head (:data:`HEAD`) as short texts, by knob name:
    ``{"format_options.layout": "layout=example", "reader": "reader=tf", "read_threads": "rt=4",
    "cache": "storage_cold", ...}``. Format options and the cluster are split into one knob per option."""
    params = dict(config_params(config, without))
    params.update({k: v for k, v in DEFAULTS.items() if k not in params and k not in set(without)})
    if "workload_name" in config:
        params["workload_name"] = config["workload_name"]
    out: dict[str, str] = {}
    for k, v in params.items():
        if k in HEAD:
            continue
        if k == "checkpoint" and isinstance(v, Mapping):  # its options; the model's shape is the preset's name
            for sub, x in sorted(v.items()):
                if sub not in CHECKPOINT_SHAPE:
                    out[f"checkpoint.{sub}"] = f"{sub}={_value_text(sub, x)}"
            continue
        if k in ("format_options", "cluster") and isinstance(v, Mapping):
            for sub, x in sorted(v.items()):
                name = "cluster" if (k, sub) == ("cluster", "name") else sub
                out[f"{k}.{sub}"] = f"{name}={_value_text(sub, x)}"
            continue
        short = SHORT.get(k, k)
        text = _value_text(k, v)
        out[k] = text if short == "" else (f"{short}{text}" if short in ("S", "±") else f"{short}={text}")
    return out


#: who words a layout in a label: the storage layer's :func:`lustre.label_words` (``"module:function"``, imported on
#: first use, as the registries' implementations are: the floor imports no room, and a stripe count is worded by the
#: storage backend of the point's file system, the default striping backend's words where it has none)
LAYOUT_WORDS: LazyRegistry = LazyRegistry({"words": "lustre.registry:label_words"})


def layout_words(stripe_count: int, fs_type: str | None = None, named: bool = False) -> str:
    """A stripe count as a label shows it, in the words of ``fs_type``'s storage backend (None: the default
    striping backend's); ``named``: the file system's default (0) and all targets (-1) by name."""
    return LAYOUT_WORDS["words"](stripe_count, fs_type, named)


def paper_label(config: Mapping[str, Any]) -> str:
    """The label's head as the paper writes it: ``tfrecord/shared 1N-4P-`` and the stripe count in the storage
    backend's words (:func:`layout_words`, with 0 and -1 by name: the file system's default, all targets), after
    the point's workload kind where it names one (a stored point names its kind only away from ``train``)."""
    nodes, ppn = int(config.get("nodes", 1)), int(config.get("ppn", 1))
    stripe = layout_words(int(config.get("stripe_count", 1)), config.get("fs_type"), named=True)
    what = config.get("format", "?")
    if isinstance(config.get("checkpoint"), Mapping) and config["checkpoint"]:  # a checkpoint: its preset's name
        what = config["checkpoint"].get("name", "custom")
    head = f"{what}/{config.get('access', '?')} {nodes}N-{nodes * ppn}P-{stripe}"
    return f"{config['kind']} {head}" if config.get("kind") else head


def _rank(name: str) -> tuple[int, str]:
    base = name.split(".")[0]
    return (ORDER.index(base) if base in ORDER else len(ORDER), name)


def varying_knobs(configs: Sequence[Mapping[str, Any]], without: Iterable[str] = ()) -> list[str]:
    """The knob names (of :func:`knobs`) whose text is not the same for every one of ``configs``, in label
    order; workload knobs that the preset's name already tells apart are left out."""
    without = tuple(without)
    per = [knobs(c, without) for c in configs]
    names = sorted({n for k in per for n in k}, key=_rank)
    fmts = [str(c.get("format")) for c in configs]

    def varies(n: str) -> bool:
        if n.startswith("format_options."):  # an option is compared within its format (the head names formats)
            return any(len({k.get(n, "") for k, f in zip(per, fmts, strict=True) if f == g}) > 1 for g in set(fmts))
        return len({k.get(n, "") for k in per}) > 1

    vary = [n for n in names if varies(n)]
    if "workload_name" in vary:  # a knob that is one value per preset adds nothing to the preset's name
        def told_by_preset(n: str) -> bool:
            seen: dict[str, str] = {}
            return all(seen.setdefault(k.get("workload_name", ""), k.get(n, "")) == k.get(n, "") for k in per)
        vary = [n for n in vary if n not in WORKLOAD_KNOBS or not told_by_preset(n)]
    return vary


def labels(configs: Sequence[Mapping[str, Any]], always: Iterable[str] = ()) -> list[str]:
    """One label per stored point config of ``configs``, for showing them together: the paper's head
    (:func:`paper_label`), then every knob in which the points differ (plus the knob names in ``always``), then
    ``stripe not applied`` where the stripe count varies but this point's file system does not stripe; a stripe
    layout other than the default asked for there is never named as applied (``1N-4P-stripe=2-not-applied``).
    Repetitions of one configuration get the same label; two configurations never do (``#<key>`` breaks a tie
    that the knobs shown cannot)."""
    configs = list(configs)
    vary = varying_knobs(configs)
    vary += [n for n in always if n not in vary]
    stripes_vary = len({c.get("stripe_count") for c in configs}) > 1
    out = []
    for c in configs:
        k = knobs(c)
        parts = [paper_label(c)] + [k[n] for n in vary if n in k]
        if stripe_unapplied(c.get("stripe_count"), c.get("stripe_size"), c.get("striping_applicable")):
            # an unapplied layout never gets the target words (layout_words): the label says it was not applied
            words = layout_words(int(c.get("stripe_count", 1)), c.get("fs_type"), named=True)
            parts[0] = parts[0].removesuffix(words) + f"stripe={c.get('stripe_count')}-not-applied"
        elif stripes_vary and c.get("striping_applicable") is False:
            parts.append("stripe not applied")
        out.append(" ".join(parts))
    keys = [config_key(c) for c in configs]
    owners: dict[str, set[str]] = {}
    for label, key in zip(out, keys, strict=True):
        owners.setdefault(label, set()).add(key)
    return [f"{lab} #{key[:6]}" if len(owners[lab]) > 1 else lab for lab, key in zip(out, keys, strict=True)]


def settings(configs: Sequence[Mapping[str, Any]], without: Iterable[str] = (),
             shown: Iterable[str] = HEAD) -> list[str]:
    """For configurations shown side by side (e.g. one per scenario of a comparison): each one's knobs in which
    they differ, as text (``"layout=example reader=tf"``; "" when none differs), leaving out the knobs in
    ``without`` and those the caller shows in columns of its own (``shown``, default :data:`HEAD`)."""
    configs = list(configs)
    without = tuple(without)
    vary = [n for n in varying_knobs(configs, without) if n.split(".")[0] not in set(shown)]
    return [" ".join(k[n] for n in vary if n in k) for k in (knobs(c, without) for c in configs)]


def label_of(config: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> str:
    """The label of ``config`` shown among ``others`` (which may include it): :func:`labels` of them all."""
    key = config_key(config)
    pool = [c for c in others if config_key(c) != key]
    return labels([config, *pool])[0]


#: why a cache label may be ``unknown``, by file system (memory file systems have nothing to evict to)
_UNKNOWN_WHY = {
    "tmpfs": "tmpfs keeps its files in memory: there is no storage to evict to, so every read is a memory read",
    "ramfs": "ramfs keeps its files in memory: there is no storage to evict to, so every read is a memory read",
}


def cache_text(policy: str | None, state: str | None, fs_type: str | None = None, note: str | None = None) -> str:
    """How the cache stood, said plainly: ``cold (verified)``, ``storage_cold (client and storage caches
    flushed, verified)``, ``warm``, or ``unknown: <why>`` (the kernel's note, or why on this file system)."""
    policy = policy or "cold"
    if state in ("cold", "warm") and policy in ("cold", "warm"):
        return f"{state} (verified)" if state == "cold" else "warm (dataset cached, verified)"
    if state == "cold" and policy == "storage_cold":
        return "storage_cold (storage flushed, page cache evicted, verified)"
    why = _UNKNOWN_WHY.get(fs_type or "") or note or "eviction could not be verified (mincore)"
    return f"{state or 'unknown'} (asked {policy}): {why}"
