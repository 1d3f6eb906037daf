"""How a point's record maps onto the store's rows: the columns a point's config, its totals and its epochs
fill, strict-JSON cleaning, and :class:`RowWriter` (the point's and environment's rows, created safely against a
concurrent driver), the base of the writer's parts."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ddlio.identity import config_digest, layout_words
from ddlio.secrets import mask_any
from ddlio.store.engine import _db_errors
from ddlio.store.models import Environment, Point

_CONFIG_COLUMNS = {
    "format": "format", "format_options": "format_options", "access": "access", "stripe_count": "stripe_count",
    "stripe_size": "stripe_size", "nodes": "nodes", "ppn": "ppn", "ranks": "ranks", "repeat": "repeat",
    "seed": "seed", "workload": "workload_name", "samples": "samples", "sample_size": "sample_size",
    "sample_size_stdev": "sample_size_stdev", "samples_per_file": "samples_per_file", "num_files": "num_files",
    "batch_size": "batch_size", "epochs": "epochs", "compute_time_s": "compute_time", "cache_policy": "cache",
    "data_root": "data_root", "dataset_key": "dataset_key", "label": None, "cluster": None,
}
_TOTAL_COLUMNS = ("bytes_read", "bytes_planned", "os_read_bytes", "io_time_slowest_s", "bandwidth_mib_s", "iops",
                  "wall_time_s", "samples_per_s", "au", "lat_p50_us", "lat_p90_us", "lat_p99_us", "cache",
                  "max_rss_kib", "posix_reads", "posix_bytes_read", "posix_read_time_s", "posix_size_hist",
                  "amplification")
_EPOCH_COLUMNS = ("samples", "bytes_read", "bytes_planned", "read_ops", "meta_ops", "os_read_bytes",
                  "io_time_slowest_s", "io_time_mean_s", "bandwidth_mib_s", "iops", "wall_time_s", "compute_time_s",
                  "samples_per_s",
                  "au", "lat_p50_us", "lat_p90_us", "lat_p99_us", "cache", "residency_before", "residency_after",
                  "cache_note", "first_read", "since_generation_s", "flush_mib_s", "posix_reads", "posix_bytes_read",
                  "posix_read_time_s", "posix_size_hist", "amplification")


def _label(p: dict[str, Any]) -> str:
    """The point's label: the paper's ``format/access NN-PP-`` and the stripe count in the words of the storage
    backend of its file system (:func:`ddlio.identity.layout_words`), after its kind's name when it has one (a
    point's stored form names its kind only away from train)."""
    stripe = layout_words(p["stripe_count"], p.get("fs_type"))
    what = (p.get("checkpoint") or {}).get("name", "custom") if p.get("checkpoint") else p["format"]  # a checkpoint's
    label = f"{what}/{p['access']} {p['nodes']}N-{p['ranks']}P-{stripe}"  # preset where a dataset has its format
    return f"{p['kind']} {label}" if p.get("kind") else label


def _nan_to_none(v: Any) -> Any:
    return None if isinstance(v, float) and v != v else v


def _json_safe(obj: Any) -> Any:
    """``obj`` with NaN and infinities replaced by None at any depth (strict JSON: PostgreSQL refuses NaN)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj



#: keys per ``IN (...)`` of a batched statement (below SQLite's oldest limit of 999 bound variables)
IN_CHUNK = 500


def _chunks(keys: Sequence[str]) -> Iterator[list[str]]:
    for i in range(0, len(keys), IN_CHUNK):
        yield list(keys[i:i + IN_CHUNK])


#: :meth:`RowWriter._point_row` without a row read beforehand: it reads it
_ASK = object()


class RowWriter:
    """The rows every part of the writer (:class:`ddlio.store.Store`) creates: a point's and an environment's."""

    url: URL
    engine: Engine

    def _ensure_point(self, p: dict[str, Any], status: str) -> None:
        """Create the point's row if it does not exist, in its own transaction: two drivers creating it at the
        same moment both succeed (the second finds the first's row)."""
        with Session(self.engine) as s:
            if s.scalar(select(Point.point_key).where(Point.point_key == p["point_key"])) is not None:
                return
        try:
            with Session(self.engine) as s, s.begin():
                self._point_row(s, p).status = status
        except IntegrityError:
            pass

    def _ensure_points(self, points: Sequence[dict[str, Any]], status: str) -> None:
        """:meth:`_ensure_point` for many points: the missing rows created in one transaction (one by one when a
        concurrent driver created some of them first)."""
        keys = list(dict.fromkeys(p["point_key"] for p in points))
        with _db_errors(self.url), Session(self.engine) as s:
            have = {k for chunk in _chunks(keys) for k in s.scalars(
                select(Point.point_key).where(Point.point_key.in_(chunk)))}
        missing = list({p["point_key"]: p for p in points if p["point_key"] not in have}.values())
        if not missing:
            return
        with _db_errors(self.url):  # outside: a concurrent driver's row (IntegrityError) is not a store failure
            try:
                with Session(self.engine) as s, s.begin():
                    for p in missing:
                        self._point_row(s, p, None).status = status  # known missing: no query each
            except IntegrityError:  # another driver created some of them since: one by one, each its own
                for p in missing:
                    self._ensure_point(p, status)

    def _ensure_environment(self, env: dict[str, Any]) -> str:
        """The id of ``env``'s row, created if needed in its own transaction (safe against a concurrent driver)."""
        env_id = hashlib.sha256(json.dumps(env, sort_keys=True, default=str).encode()).hexdigest()[:20]
        with Session(self.engine) as s:
            if s.get(Environment, env_id) is not None:
                return env_id
        git = env.get("git") or {}
        try:
            with Session(self.engine) as s, s.begin():
                s.add(Environment(
                    id=env_id, host=env.get("host", ""), os=env.get("os", ""),
                    git_commit=git.get("commit"), git_dirty=bool(git.get("dirty")),
                    packages=env.get("packages", {}), raw=env,
                ))
        except IntegrityError:
            pass
        return env_id

    def _point_row(self, s: Session, p: dict[str, Any], row: Point | object | None = _ASK) -> Point:
        """The point's row in ``s``, its config columns set from ``p`` (created when missing). ``row``: the row
        already read (None: known to be missing), so that a sweep's worth of points costs no query each."""
        if row is _ASK:
            row = s.get(Point, p["point_key"])
        if row is None:
            row = Point(point_key=p["point_key"], status="submitted", attempts=0)
            s.add(row)
        for col, key in _CONFIG_COLUMNS.items():
            if key is not None:
                setattr(row, col, p[key])
        row.label = _label(p)
        row.kind = p.get("kind")  # NULL: train (its stored form names no kind)
        row.source = "ddlio"
        row.cluster = str(p["cluster"]["name"])  # every stored form of a point has its cluster's name
        row.config = mask_any(p)  # a point written by an older ddlio may carry a db password: never stored
        row.config_digest = config_digest(row.config)
        return row
