"""``python -m analysis summary``: what was measured, one row per point."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from analysis.below import store_notes
from analysis.checkpoint import SUMMARY_METRICS, checkpoint_frame
from analysis.query import analysis_frame, summary_frame
from ddlio.store import open_store_for_reading

SHORT = ["status", "label", "repeat", "bytes_read", "bandwidth_mib_s", "iops", "au", "io_time_slowest_s",
         "wall_time_s", "cache", "settle", "first_read", "validity", "error"]  # the columns read for the table
#: the columns of the checkpoint points' table (bytes and seconds over all of a point's checkpoints, MiB/s)
CHECKPOINT_SHORT = ["status", "label", "repeat", *SUMMARY_METRICS, "error"]
#: summary's columns that say what a train point read: empty for a checkpoint point (its stored form carries the
#: train keys it does not use)
TRAIN_ONLY = ["format", "workload", "samples", "sample_size", "epochs", "bytes_planned", "settle", "validity",
              "invalid_reasons"]


def unsettled(df: pd.DataFrame) -> pd.Series:
    """Completed cold-cache points whose dataset was not settled before their first measured epoch: measured with
    settle=false, or by an earlier ddlio (before settling existed: ``settle`` NULL)."""
    return (df["status"] == "completed") & (df["cache"] == "cold") & (df["settle"] != True)  # noqa: E712 (NULL)


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table",
                        help="table: a readable subset of columns; csv/json: every summary column")


def with_checkpoints(df: pd.DataFrame, ck: pd.DataFrame) -> pd.DataFrame:
    """``summary``'s frame with the checkpoint points' own figures: ``kind`` and the columns of
    :data:`~analysis.checkpoint.SUMMARY_METRICS` (``bytes_read``: the restore's bytes, as train's column says the
    bytes read), their labels among checkpoint points only. Unchanged when there is no checkpoint point."""
    if ck.empty:
        return df
    by_key = ck.set_index("point_key")
    is_ck = df["point_key"].isin(by_key.index)
    out = df.assign(kind=pd.Series(None, index=df.index, dtype=object).where(~is_ck, "checkpoint"))
    out.loc[is_ck, "label"] = df.loc[is_ck, "point_key"].map(by_key["label"])
    out[TRAIN_ONLY] = out[TRAIN_ONLY].astype(object)
    out.loc[is_ck, TRAIN_ONLY] = None
    for m in SUMMARY_METRICS:
        values = df["point_key"].map(by_key[m]).astype("float64")
        out[m] = values.where(is_ck, out[m]) if m in out.columns else values
    return out


def _print_table(t: pd.DataFrame) -> None:
    print(t.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"))


def cut_at_word(text: str, width: int) -> str:
    """``text``'s first line, at most ``width`` characters: cut at the last word that fits, with an ellipsis (a
    word longer than ``width`` is cut inside it)."""
    line = (text or "").strip().split("\n")[0]
    if len(line) <= width:
        return line
    head = line[:width - 1]
    space = head.rfind(" ")
    return (head[:space] if space > width // 2 else head).rstrip(" ,;:") + "…"


def human_bytes(n: float) -> str:
    """``1.0 MiB``, ``256 MiB``, ``3.4 GiB`` (binary units); "-" for a missing value."""
    if n != n:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" or abs(n) >= 100 else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n} TiB"


def _num(v: float, digits: int) -> str:
    return "-" if v != v else f"{v:,.{digits}f}"


#: the train table's columns as shown: heading -> how a value is written
_SHOWN = {"label": "configuration", "repeat": "rep", "bytes_read": "read", "bandwidth_mib_s": "MiB/s",
          "iops": "IOPS", "au": "AU", "io_time_slowest_s": "I/O s", "wall_time_s": "wall s", "cache": "cache",
          "settle": "settled", "first_read": "first read", "validity": "validity", "status": "status",
          "error": "error"}
#: always shown, even when every point has the same value
_KEPT = ("label", "bandwidth_mib_s")


def train_table(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(the train points as ``summary`` shows them, what every point shares): best first (completed points by AU
    where they have a compute time, its verdict beside it, then by bandwidth; then the others by status), numbers
    in readable units (bytes as KiB/MiB/GiB, MiB/s with one decimal, IOPS whole with thousands separators, seconds
    to 3 significant digits), a failure or an invalid verdict cut at a word, and only the columns whose values
    differ between the points (the label and the bandwidth always): the others are said once, as ``name value``
    texts."""
    done = (df["status"] == "completed").to_numpy()
    bw = pd.to_numeric(df["bandwidth_mib_s"], errors="coerce").fillna(-1.0)
    # by AU first where a compute time makes it the answer (objective=auto), then by bandwidth
    au = pd.to_numeric(df["au"], errors="coerce").where(df["fed"].notna()).fillna(-1.0).round(2)
    order = df.assign(_done=~done, _au=-au, _bw=-bw).sort_values(["_done", "status", "_au", "_bw"],
                                                                 kind="stable").index
    df = df.loc[order]
    cold = unsettled(df)
    t = pd.DataFrame(index=df.index)
    t["label"] = df["label"].where(~cold, df["label"] + " (unsettled)")
    t["repeat"] = df["repeat"].map(lambda v: "-" if v != v or v is None else str(int(v)))
    t["bytes_read"] = pd.to_numeric(df["bytes_read"], errors="coerce").map(human_bytes)
    t["bandwidth_mib_s"] = pd.to_numeric(df["bandwidth_mib_s"], errors="coerce").map(lambda v: _num(v, 1))
    t["iops"] = pd.to_numeric(df["iops"], errors="coerce").map(lambda v: _num(v, 0))
    # AU and its verdict against the point's floor, where a compute time makes it mean something
    au = pd.to_numeric(df["au"], errors="coerce")
    t["au"] = [f"{a:.2f} {w}" if isinstance(w, str) else "-" for a, w in zip(au, df["fed"], strict=True)]
    for c in ("io_time_slowest_s", "wall_time_s"):
        t[c] = pd.to_numeric(df[c], errors="coerce").map(lambda v: "-" if v != v else f"{v:.3g}")
    for c in ("cache", "settle", "first_read", "status"):
        t[c] = df[c].map(lambda v: "-" if v is None or v != v else str(v))
    reasons = df["invalid_reasons"].fillna("").astype(str)
    t["validity"] = [("invalid: " + cut_at_word(r, 40)) if v == "invalid" else (v if isinstance(v, str) else "-")
                     for v, r in zip(df["validity"], reasons, strict=True)]
    t["error"] = df["error"].fillna("").astype(str).map(lambda e: cut_at_word(e, 50))
    shared = []
    for c in list(t.columns):
        if c in _KEPT or len(t) < 2 or t[c].nunique() > 1:
            continue
        value = t[c].iloc[0]
        if value not in ("", "-"):
            shared.append(f"{_SHOWN[c]} {value}")
        t = t.drop(columns=c)
    return t.rename(columns=_SHOWN).reset_index(drop=True), shared


def _print_train(store: object, df: pd.DataFrame) -> None:
    """The train points' table (every point but the checkpoint ones), its counts and notes."""
    t, shared = train_table(df)
    cold = unsettled(df)
    with_counts = df["status"].value_counts().to_dict()
    print(t.to_string(index=False))
    if shared:
        import textwrap  # lazy: only when a line is wrapped

        print(textwrap.fill("every point: " + ", ".join(shared), 100, subsequent_indent="  "))
    print(f"\n{len(df)} points: " + ", ".join(f"{n} {k}" for k, n in sorted(with_counts.items())))
    done = analysis_frame(store)
    for note in store_notes(store, done[done["point_key"].isin(df["point_key"])]):
        print(f"note: {note}")
    earlier = int((cold & df["settle"].isna()).sum())
    if earlier:
        print(f"note: {earlier} point(s) were measured by an earlier method: cold cache without settling (ddlio "
              "before b63f0f0); the same sweep with remeasure_earlier=true measures them again by today's method")


def _print_checkpoints(ck: pd.DataFrame, first: bool) -> None:
    """The checkpoint points' table: bytes written and read, bandwidths and fsync time (all checkpoints)."""
    t = ck.reindex(columns=CHECKPOINT_SHORT).copy()
    t["error"] = t["error"].fillna("").astype(str).map(lambda e: cut_at_word(e, 60))
    for c in ("bytes_written", "bytes_read"):  # whole bytes
        t[c] = pd.Series(["-" if v != v else round(v) for v in t[c]], index=t.index, dtype=object)
    print(("" if first else "\n") + "checkpoint points (kind=checkpoint; bytes in bytes, bandwidths in MiB/s as "
          "Darshan's slowest rank gives them, fsync in s: all of a point's checkpoints)")
    _print_table(t)
    counts = t["status"].value_counts().to_dict()
    print(f"\n{len(ck)} checkpoint points: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))


def main(args: argparse.Namespace) -> int:
    store = open_store_for_reading(args.db)
    df = summary_frame(store)
    ck = checkpoint_frame(store, status=None)
    if args.format in ("csv", "json"):
        df = with_checkpoints(df, ck)
        if args.format == "csv":
            df.to_csv(sys.stdout, index=False)
        else:
            sys.stdout.write(df.to_json(orient="records", indent=1, date_format="iso") + "\n")
        return 0
    if df.empty:
        print("no points in the store yet")
        return 0
    train = df[~df["point_key"].isin(ck["point_key"])].reset_index(drop=True)
    if train["bytes_read"].notna().all():  # NULL only in the checkpoint rows: whole bytes again
        train["bytes_read"] = train["bytes_read"].astype("int64")
    if len(train):
        _print_train(store, train)
    if len(ck):
        _print_checkpoints(ck, first=train.empty)
    return 0
