"""Caches below the client: a dataset's first read since it was generated against every later read of the same
configuration.

Beneath the client's page cache (which the kernel evicts and verifies) sit caches no client can see or evict: a
storage controller's, a Lustre OSS's read cache, a VM host's. The first read of a freshly written file is served by
the device, every repeat by such a cache. The kernel records per epoch whether it was its dataset's first read
(``epochs.first_read``); this module finds the configurations whose first reads differ from their repeats beyond
the repeats' own noise, and says so in words the summary, the report and the guidelines print.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy import select

from analysis.frames import config_columns, configs
from analysis.reading import read_rows
from ddlio.store import Epoch, StoreReader

#: a first read is flagged when it differs from the repeats' mean by more than this many of their standard
#: deviations, and by more than :data:`MIN_DIFFERENCE` of that mean
NOISE_SIGMAS = 3.0
MIN_DIFFERENCE = 0.10
#: repeats (later epochs) a configuration needs before its noise is known
MIN_REPEATS = 2


def epoch_bandwidths(store: StoreReader, point_keys: list[str]) -> pd.DataFrame:
    """``point_key, epoch, first_read, bandwidth_mib_s`` (MiB/s) of the given points' epochs whose first-read
    state is known, in point key and epoch order. The completed points' epochs are read in slices and kept if
    among ``point_keys`` (no list of keys in the SQL: a million would pass any limit on bound parameters); each
    kept row's key is the caller's own key object, so a million epochs cost no text each."""
    cols = ["point_key", "epoch", "first_read", "bandwidth_mib_s"]
    if not point_keys:
        return pd.DataFrame(columns=cols)
    stmt = (select(Epoch.point_key, Epoch.epoch, Epoch.first_read, Epoch.bandwidth_mib_s)
            .where(Epoch.first_read.is_not(None)).order_by(Epoch.point_key, Epoch.epoch))
    keys = np.asarray(pd.unique(np.asarray(point_keys, dtype=object)), dtype=object)
    index = pd.Index(keys, dtype=object)  # a hash lookup on object arrays (isin on arrow strings is slow)
    parts = []
    for rows in read_rows(store, stmt):
        pos = index.get_indexer([r[0] for r in rows])
        keep = np.flatnonzero(pos >= 0)
        if len(keep):
            parts.append((pos[keep], np.array([(rows[i][1], rows[i][2], rows[i][3]) for i in keep], dtype=float)))
    if not parts:
        return pd.DataFrame(columns=cols)
    pos = np.concatenate([p for p, _ in parts])
    vals = np.concatenate([v for _, v in parts])
    return pd.DataFrame({"point_key": pd.Series(keys[pos], dtype=object), "epoch": vals[:, 0].astype(np.int64),
                         "first_read": vals[:, 1].astype(bool), "bandwidth_mib_s": vals[:, 2]})


def first_read_frame(points: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (``points`` as :func:`analysis.query.analysis_frame` gives them) that has both
    first-read epochs and later epochs: ``config_id, label, first_n, first_mib_s, repeats_n, repeats_mib_s,
    repeats_std, ratio`` (repeats / first) and ``flagged`` (the difference exceeds the repeats' noise)."""
    cols = ["config_id", "label", "first_n", "first_mib_s", "repeats_n", "repeats_mib_s", "repeats_std", "ratio",
            "flagged"]
    if points.empty or epochs.empty or not epochs["first_read"].notna().any():
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    cfg = configs(points, ["bandwidth_mib_s"]).set_index("config_id").sort_index()
    label = (cfg["format"].astype(str) + "/" + cfg["access"].astype(str) + " " + cfg["label"]).to_numpy(dtype=object)
    # each point's config_id: configs() numbers the configurations in the sorted order of their columns
    cid = points.groupby(config_columns(points), sort=True, dropna=False).ngroup().to_numpy()
    e = epochs.dropna(subset=["first_read"])
    pos = pd.Index(points["point_key"].to_numpy(dtype=object), dtype=object).get_indexer(
        e["point_key"].to_numpy(dtype=object))
    e = e[pos >= 0]
    ids = cid[pos[pos >= 0]]
    e = e.assign(config_id=ids, label=label[ids])
    e["first_read"] = e["first_read"].astype(bool)
    rows = []
    for (cid, label), g in e.groupby(["config_id", "label"], sort=True):
        first, rest = g.loc[g["first_read"], "bandwidth_mib_s"], g.loc[~g["first_read"], "bandwidth_mib_s"]
        if first.empty or rest.empty:
            continue
        fm, rm = float(first.mean()), float(rest.mean())
        sd = float(rest.std(ddof=1)) if len(rest) > 1 else float("nan")
        flagged = bool(len(rest) >= MIN_REPEATS and abs(fm - rm) > max(NOISE_SIGMAS * sd, MIN_DIFFERENCE * rm))
        rows.append((cid, label, len(first), fm, len(rest), rm, sd, rm / fm if fm else np.nan, flagged))
    return pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})


def notes(frame: pd.DataFrame) -> list[str]:
    """One sentence per flagged configuration of :func:`first_read_frame`."""
    out = []
    for _, r in frame[frame["flagged"].astype(bool)].iterrows() if len(frame) else []:
        out.append(f"{r['label']}: a cache below the client served the repeats: first read {r['first_mib_s']:.0f} "
                   f"MiB/s, repeats {r['repeats_mib_s']:.0f} MiB/s (±{r['repeats_std']:.0f}, {int(r['repeats_n'])} "
                   f"epochs); measure with workload.cache=cold and settle=true (the default) so that every "
                   "repetition is a repeat, or workload.cache=storage_cold to measure the device")
    return out


def store_notes(store: StoreReader, points: pd.DataFrame) -> list[str]:
    """:func:`notes` for ``points`` (completed points of the store, after any filter)."""
    if points.empty:
        return []
    return notes(first_read_frame(points, epoch_bandwidths(store, points["point_key"].tolist())))


def holds_first_read(points: pd.DataFrame) -> np.ndarray:
    """Per point of ``points``: whether one of its epochs was its dataset's first read since generation (unknown
    and frames without the column: no)."""
    if "first_read" not in points.columns:
        return np.zeros(len(points), dtype=bool)
    return points["first_read"].astype("boolean").fillna(False).astype(bool).to_numpy()


def excluded_note(points: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """``points`` without those that include their dataset's first read (so no comparison sets a first read
    against repeats), and a sentence saying how many were left out (None if none)."""
    first = holds_first_read(points)
    if not first.any():
        return points, None
    return points[~first], (
        f"{int(first.sum())} point(s) include their dataset's first read since generation (served by the device, "
        "not by the cache below the client that served the other reads) and are left out of the comparisons "
        "(summary shows them as first_read)")
