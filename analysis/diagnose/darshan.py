"""What the findings need from a Darshan log's POSIX (and LUSTRE) records, counted as Drishti counts it
(drishti-io 0.8, ``drishti/handlers/handle_darshan.py``) so both tools fire on the same numbers:

- small reads/writes: the POSIX_SIZE_{READ,WRITE}_* bins below 1 MiB summed over every record;
- misaligned: POSIX_FILE_NOT_ALIGNED summed, over every read and write (POSIX_READS + POSIX_WRITES);
- random reads: POSIX_READS - POSIX_SEQ_READS (consecutive reads are a subset of sequential ones);
- shared files: the records Darshan reduced to rank -1, their reads, writes and small ones;
- stragglers of a shared file: |POSIX_SLOWEST_RANK_BYTES - POSIX_FASTEST_RANK_BYTES| over its bytes moved, and
  |POSIX_F_SLOWEST_RANK_TIME - POSIX_F_FASTEST_RANK_TIME| over its read + write + meta time;
- per-file imbalance: over the records of one file by individual ranks (rank >= 0), (max - min) / max bytes.

A plain dict of numbers and file names: it goes into the observed record the store keeps (``diagnose``).
"""

from __future__ import annotations

from typing import Any

_SMALL = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")


def _small(c: Any, op: str) -> Any:
    return sum(c[f"POSIX_SIZE_{op}_{b}"] for b in _SMALL)


def _name(names: dict[int, str], i: Any) -> str:
    return str(names.get(int(i), i))


def _shared(c: Any, f: Any, names: dict[int, str]) -> dict[str, Any]:
    sc, sf = c[c["rank"] == -1], f[f["rank"] == -1]
    bytes_imb: dict[str, float] = {}
    moved = (sc["POSIX_BYTES_WRITTEN"] + sc["POSIX_BYTES_READ"]).tolist()
    gap = (sc["POSIX_SLOWEST_RANK_BYTES"] - sc["POSIX_FASTEST_RANK_BYTES"]).abs().tolist()
    for i, m, g in zip(sc["id"].tolist(), moved, gap, strict=True):  # ids as ints: a row of floats would round them
        if m:
            bytes_imb[_name(names, i)] = float(g / m)
    time_imb: dict[str, float] = {}
    spent = (sf["POSIX_F_WRITE_TIME"] + sf["POSIX_F_READ_TIME"] + sf["POSIX_F_META_TIME"]).tolist()
    gap = (sf["POSIX_F_SLOWEST_RANK_TIME"] - sf["POSIX_F_FASTEST_RANK_TIME"]).abs().tolist()
    for i, sp, g in zip(sf["id"].tolist(), spent, gap, strict=True):
        if sp:
            time_imb[_name(names, i)] = float(g / sp)
    return {
        "shared_files": sorted({_name(names, i) for i in sc["id"].tolist()}),
        "shared_reads": int(sc["POSIX_READS"].sum()), "shared_small_reads": int(_small(sc, "READ").sum()),
        "shared_writes": int(sc["POSIX_WRITES"].sum()), "shared_small_writes": int(_small(sc, "WRITE").sum()),
        "shared_bytes_imbalance": bytes_imb, "shared_time_imbalance": time_imb,
    }


def _per_file(c: Any, names: dict[int, str]) -> dict[str, Any]:
    own = c[c["rank"] != -1]
    out: dict[str, dict[str, float]] = {"read_imbalance": {}, "write_imbalance": {}}
    for fid, g in own.groupby("id"):
        for col, key in (("POSIX_BYTES_READ", "read_imbalance"), ("POSIX_BYTES_WRITTEN", "write_imbalance")):
            top = g[col].max()
            if top:
                out[key][_name(names, fid)] = float(abs(top - g[col].min()) / top)
    return out


def _lustre(report: Any) -> dict[str, Any]:
    if "LUSTRE" not in report.records or len(report.records["LUSTRE"]) == 0:
        return {}
    try:
        comp = report.records["LUSTRE"].to_df()["components"]
        return {"lustre_stripe_count": int(comp["LUSTRE_COMP_STRIPE_COUNT"].iloc[0]),
                "lustre_stripe_size": int(comp["LUSTRE_COMP_STRIPE_SIZE"].iloc[0])}
    except (KeyError, ValueError, TypeError, IndexError):  # a LUSTRE record layout this reader does not know
        return {}


def counters(report: Any) -> dict[str, Any]:
    """The counted facts of an open ``darshan.DarshanReport`` (see the module docstring); {} without POSIX."""
    if "POSIX" not in report.records or len(report.records["POSIX"]) == 0:
        return {}
    frames = report.records["POSIX"].to_df()
    c, f = frames["counters"], frames["fcounters"]
    names = report.name_records
    reads, writes = int(c["POSIX_READS"].sum()), int(c["POSIX_WRITES"].sum())
    out: dict[str, Any] = {
        "reads": reads, "writes": writes,
        "small_reads": int(_small(c, "READ").sum()), "small_writes": int(_small(c, "WRITE").sum()),
        "file_not_aligned": int(c["POSIX_FILE_NOT_ALIGNED"].sum()),
        "alignment": int(c["POSIX_FILE_ALIGNMENT"].max()) if len(c) else 0,
        "random_reads": int(reads - c["POSIX_SEQ_READS"].sum()),
        "bytes_read": int(c["POSIX_BYTES_READ"].sum()),
        # per file (id): its highest offset read + 1, so data read more than once shows as bytes above it
        "below_max_offset": int((c[c["POSIX_BYTES_READ"] > 0].groupby("id")["POSIX_MAX_BYTE_READ"].max() + 1).sum()),
        "files_read": sorted({_name(names, i) for i in c[c["POSIX_BYTES_READ"] > 0]["id"].tolist()}),
    }
    out.update(_shared(c, f, names))
    out.update(_per_file(c, names))
    out.update(_lustre(report))
    return out
