"""pandas frames from the store: the only way the rest of ``analysis`` reads it."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import select

from analysis.store import Epoch, Point, Store

#: The columns of ``summary`` (and of its csv), in order.
SUMMARY_COLUMNS = [
    "point_key", "status", "label", "format", "access", "stripe_count", "stripe_size", "nodes", "ppn", "ranks",
    "hosts", "repeat", "workload", "samples", "sample_size", "epochs", "bytes_read", "bytes_planned",
    "io_time_slowest_s", "bandwidth_mib_s", "iops", "wall_time_s", "samples_per_s", "au", "lat_p50_us",
    "lat_p99_us", "cache", "fs_type", "job_id", "job_state", "error", "finished_utc",
]


def points_frame(store: Store, status: str | None = None) -> pd.DataFrame:
    """One row per point with its config columns and whole-run figures (bytes, seconds, MiB/s, ops/s)."""
    cols = [c for c in Point.__table__.columns if c.name not in ("config", "result", "layout", "format_options")]
    stmt = select(*cols).order_by(Point.submitted_utc, Point.point_key)
    if status:
        stmt = stmt.where(Point.status == status)
    with store.session() as s:
        rows = s.execute(stmt).mappings().all()
    return pd.DataFrame(rows, columns=[c.name for c in cols])


def epochs_frame(store: Store) -> pd.DataFrame:
    """One row per (point, epoch) with the per-epoch aggregates, joined to the point's config columns."""
    ecols = [c for c in Epoch.__table__.columns if c.name not in ("hist", "rank_rows")]
    pcols = [Point.format, Point.access, Point.stripe_count, Point.nodes, Point.ranks, Point.repeat]
    stmt = select(*ecols, *pcols).join(Point, Point.point_key == Epoch.point_key).order_by(Epoch.point_key, Epoch.epoch)
    with store.session() as s:
        rows = s.execute(stmt).mappings().all()
    return pd.DataFrame(rows, columns=[c.name for c in ecols] + [c.name for c in pcols])


def summary_frame(store: Store) -> pd.DataFrame:
    """The ``summary`` table: one row per point, :data:`SUMMARY_COLUMNS` in order."""
    df = points_frame(store)
    return df.reindex(columns=SUMMARY_COLUMNS).reset_index(drop=True)
