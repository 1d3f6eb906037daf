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

from analysis.frames import config_ids, configs
from analysis.reading import read_rows
from ddlio.store import Epoch, StoreReader

#: a first read is flagged when it differs from the repeats' mean by more than this many of their standard
#: deviations, and by more than :data:`MIN_DIFFERENCE` of that mean
NOISE_SIGMAS = 3.0
MIN_DIFFERENCE = 0.10
#: repeats (later epochs) a configuration needs before its noise is known
MIN_REPEATS = 2


def _epochs_of(store: StoreReader, keys: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """(each epoch's point as a position in ``keys``, its ``epoch, first_read, bandwidth_mib_s`` as floats) of the
    epochs whose first-read state is known of the points ``keys`` (an object index: a hash lookup, where isin on
    arrow strings is slow), in point key and epoch order. The completed points' epochs are read in slices and
    kept if among ``keys``: no list of keys in the SQL (a million would pass any limit on bound parameters)."""
    stmt = (select(Epoch.point_key, Epoch.epoch, Epoch.first_read, Epoch.bandwidth_mib_s)
            .where(Epoch.first_read.is_not(None)).order_by(Epoch.point_key, Epoch.epoch))
    parts = []
    for rows in read_rows(store, stmt):
        pos = keys.get_indexer([r[0] for r in rows])
        keep = np.flatnonzero(pos >= 0)
        if len(keep):
            parts.append((pos[keep], np.array([(rows[i][1], rows[i][2], rows[i][3]) for i in keep], dtype=float)))
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 3))
    return np.concatenate([p for p, _ in parts]), np.concatenate([v for _, v in parts])


_FRAME = ["config_id", "label", "first_n", "first_mib_s", "repeats_n", "repeats_mib_s", "repeats_std", "ratio",
          "flagged"]


def first_read_frame(points: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (``points`` as :func:`analysis.query.analysis_frame` gives them) that has both
    first-read epochs and later epochs: ``config_id, label, first_n, first_mib_s, repeats_n, repeats_mib_s,
    repeats_std, ratio`` (repeats / first) and ``flagged`` (the difference exceeds the repeats' noise)."""
    if points.empty or epochs.empty or not epochs["first_read"].notna().any():
        return _no_first_reads()
    e = epochs.dropna(subset=["first_read"])
    pos = pd.Index(points["point_key"].to_numpy(dtype=object), dtype=object).get_indexer(
        e["point_key"].to_numpy(dtype=object))
    ok = pos >= 0
    return _first_reads(points, pos[ok], e["first_read"].to_numpy(dtype=bool)[ok],
                        e["bandwidth_mib_s"].to_numpy(dtype=float)[ok])


def _no_first_reads() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="float64") for c in _FRAME})


def _first_reads(points: pd.DataFrame, pos: np.ndarray, first: np.ndarray, bw: np.ndarray) -> pd.DataFrame:
    """:func:`first_read_frame` of epochs given as their point's position in ``points``, first-read state and
    bandwidth (MiB/s): counted per configuration with bincount, no frame of the epochs."""
    if points.empty or not len(pos):
        return _no_first_reads()
    cid, firsts = config_ids(points)  # each point's configuration, numbered as configs() numbers them
    cfg = configs(firsts, ["bandwidth_mib_s"]).set_index("config_id").sort_index()  # one point of each: labels
    label = (cfg["format"].astype(str) + "/" + cfg["access"].astype(str) + " " + cfg["label"]).to_numpy(dtype=object)
    ids = cid[pos]
    k = len(cfg)

    def stats(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(epochs, mean, sample std) per configuration of the epochs ``m``; a missing bandwidth counts as an
        epoch, not in the mean."""
        n = np.bincount(ids[m], minlength=k)
        m = m & ~np.isnan(bw)
        nv = np.bincount(ids[m], minlength=k)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(ids[m], weights=bw[m], minlength=k) / nv
            dev = np.bincount(ids[m], weights=(bw[m] - mean[ids[m]]) ** 2, minlength=k)
            return n, mean, np.where(nv > 1, np.sqrt(dev / (nv - 1)), np.nan)

    fn, fm, _ = stats(first)
    rn, rm, sd = stats(~first)
    rows = []
    for c in np.flatnonzero((fn > 0) & (rn > 0)):
        s, f, r = float(sd[c]), float(fm[c]), float(rm[c])
        flagged = bool(rn[c] >= MIN_REPEATS and abs(f - r) > max(NOISE_SIGMAS * s, MIN_DIFFERENCE * r))
        rows.append((int(c), label[c], int(fn[c]), f, int(rn[c]), r, s, r / f if f else np.nan, flagged))
    return pd.DataFrame(rows, columns=_FRAME) if rows else _no_first_reads()


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
    pos, vals = _epochs_of(store, pd.Index(points["point_key"].to_numpy(dtype=object), dtype=object))
    return notes(_first_reads(points, pos, vals[:, 1].astype(bool), vals[:, 2]))


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
