"""The report's tables of what the store holds besides its points' figures: the sweeps that wrote it
(:func:`sweeps_frame`), the file systems and layouts its points ran on (:func:`layouts_frame`) and the
environments they ran in (:func:`provenance_frame`)."""

from __future__ import annotations

import json

import pandas as pd
from sqlalchemy import Text, cast, func, select

from analysis.query import environments_frame
from ddlio.secrets import mask
from ddlio.store import Point, StoreReader, Sweep


def sweeps_frame(store: StoreReader) -> pd.DataFrame:
    """The ``sweeps`` table: id, start/finish (UTC), the command line, host and point counts."""
    stmt = select(Sweep.id, Sweep.started_utc, Sweep.finished_utc, cast(Sweep.argv, Text).label("argv"), Sweep.host,
                  Sweep.n_points, Sweep.n_skipped, Sweep.n_completed, Sweep.n_failed).order_by(Sweep.started_utc)
    with store.engine.connect() as conn:
        df = pd.read_sql(stmt, conn)
    # stores written before argv was masked
    df["argv"] = df["argv"].map(lambda t: mask(" ".join(json.loads(t)[1:])) if isinstance(t, str) else "")
    return df


def layouts_frame(store: StoreReader) -> pd.DataFrame:
    """File systems and Lustre layouts of the completed points: fs_type, striping applicable, requested and applied
    layout (JSON), the reason when not applied, and how many points share it. Counted in SQL per stored layout
    text, then each distinct text is read once."""
    stmt = select(Point.fs_type, Point.striping_applicable, cast(Point.layout, Text).label("layout"),
                  func.count().label("_n")).where(Point.status == "completed").group_by(
        Point.fs_type, Point.striping_applicable, cast(Point.layout, Text))
    with store.engine.connect() as conn:
        df = pd.read_sql(stmt, conn)
    rows = []
    for t in df["layout"]:
        lay = json.loads(t) if isinstance(t, str) else {}
        lay = lay or {}
        rows.append({"requested": json.dumps(lay.get("requested", {}), sort_keys=True),
                     "applied": json.dumps(lay.get("applied", {}), sort_keys=True), "reason": lay.get("reason", "")})
    df = pd.concat([df.drop(columns="layout"), pd.DataFrame(rows, index=df.index)], axis=1)
    if df.empty:
        return df.drop(columns="_n").assign(points=pd.Series(dtype="int64"))
    keys = ["fs_type", "striping_applicable", "requested", "applied", "reason"]
    return (df.fillna({"fs_type": "unknown"}).groupby(keys, dropna=False)["_n"].sum().astype("int64")
            .rename("points").reset_index())


def provenance_frame(store: StoreReader) -> pd.DataFrame:
    """One row per environment: host, OS, git commit (+dirty), and every recorded package version."""
    env = environments_frame(store)
    rows = []
    for r in env.itertuples(index=False):
        pk = json.loads(r.packages) if isinstance(r.packages, str) else {}
        commit = (r.git_commit or "unknown") + (" (dirty)" if r.git_dirty else "")
        rows.append({"environment": r.id, "host": r.host, "os": r.os, "git commit": commit,
                     "packages": ", ".join(f"{k} {v}" for k, v in sorted((pk or {}).items()))})
    return pd.DataFrame(rows, columns=["environment", "host", "os", "git commit", "packages"])
