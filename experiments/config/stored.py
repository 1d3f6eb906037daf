"""A point's stored form and its keys.

The stored form (:func:`to_stored`: the store's ``points.config`` column, run folders' records, the kernel's spec)
is flat, as ddlio stored it before the point was nested; :func:`stored_parts` reads it back, as this or any
earlier ddlio stored it. The keys hash what changes the bytes on disk (:func:`dataset_params`) and what changes the
measurement beyond them (:func:`measurement_params`); fields added after points were first stored stay out of the
stored form and the keys at their defaults, so that a point measured before keeps its stored bytes and its key.

The functions take a :class:`~experiments.config.point.PointSpec` (by its attributes; this module is below it).
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from experiments.config.point import PointSpec

#: version of the key derivation, hashed into every point key
SCHEMA_VERSION = 1
#: PointSpec fields added after points were first stored: at these values they are left out of the stored form
#: (and of the point key), so that a point measured before them keeps its stored form and key
KEYLESS_DEFAULTS: dict[str, Any] = {"compute": "sleep", "compute_threads": 0, "object_size": 0, "pool": "",
                                     "persistent_workers": False, "pin_memory": False, "start_method": "fork",
                                     "kind": "train"}
#: the parts of a point: "" is the point itself, the others its sub-specs (PointSpec.format, .layout, .workload)
PARTS = ("", "format", "layout", "workload")

#: The stored form of a point, flat: (stored key, part, field) in the stored order; part "" is the point itself.
#: A new field goes at the end (existing stored points keep their bytes).
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
    ("object_size", "layout", "object_size"), ("pool", "layout", "pool"),
    ("persistent_workers", "workload", "persistent_workers"), ("pin_memory", "workload", "pin_memory"),
    ("start_method", "workload", "start_method"), ("kind", "", "kind"),
)
#: what the stored form adds to the fields: derived from them, ignored when read back
DERIVED_KEYS = ("ranks", "num_files", "dataset_key", "point_key")


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
        # added later (reader=torch's DataLoader knobs): present only away from their defaults
        **{k: getattr(w, k) for k in ("persistent_workers", "pin_memory", "start_method")
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
