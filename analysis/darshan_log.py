"""Darshan logs of real applications, read with pydarshan (the ``darshan`` package) into plain observed records
that the store keeps beside the sweep's points (``source = darshan``).

What a record holds: the job (id, ranks, start and end, executable), the files the job read, whether they were
shared (a POSIX record of rank -1: Darshan reduced a file every rank opened) or per process, the POSIX module's
read calls, bytes, time and POSIX_SIZE_READ_* histogram, the LUSTRE module's stripe count and size where the log has
them, and ``agg_perf_by_slowest_mib_s`` derived as Darshan's accumulator derives it
(``darshan-logutils-accumulator.c``): total bytes read and written over every POSIX record, divided by the time of
the slowest rank through its own files (meta + read + write time) plus, for every shared file, the slowest rank's
time in it (POSIX_F_SLOWEST_RANK_TIME). A log without POSIX records gives what it has and names what is missing.
"""

from __future__ import annotations

import collections
import hashlib
import os
import warnings
from pathlib import Path
from typing import Any

from ddlio.errors import DdlioError
from ddlio.metrics import SIZE_BIN_NAMES

MIB = 1024 * 1024
#: file name endings -> ddlio format name, to label what the application read
_SUFFIXES = {".h5": "hdf5", ".hdf5": "hdf5", ".tfrecord": "tfrecord", ".tfrecords": "tfrecord", ".npz": "npz",
             ".npy": "npy", ".bin": "bin", ".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png"}


def import_darshan() -> Any:
    """The ``darshan`` module, or a DdlioError saying how to install it."""
    try:
        import darshan  # lazy: an optional dependency (pydarshan), needed only by import-darshan
    except ImportError as e:
        raise DdlioError("import-darshan needs pydarshan: pip install 'ddlio[darshan]' (or pip install darshan)") from e
    return darshan


def agg_perf_by_slowest(counters: Any, fcounters: Any, nprocs: int) -> tuple[float, float, int]:
    """``(agg_perf_by_slowest MiB/s, agg_time_by_slowest s, total bytes)`` of a POSIX module's records (pandas
    frames of counters and fcounters, as pydarshan gives them), as Darshan's accumulator derives them."""
    total = int((counters["POSIX_BYTES_READ"] + counters["POSIX_BYTES_WRITTEN"]).sum())
    rank = counters["rank"].to_numpy()
    shared = float(fcounters["POSIX_F_SLOWEST_RANK_TIME"].to_numpy()[rank < 0].sum())
    own = (fcounters["POSIX_F_META_TIME"] + fcounters["POSIX_F_READ_TIME"] + fcounters["POSIX_F_WRITE_TIME"]).to_numpy()
    per_rank: dict[int, float] = collections.defaultdict(float)
    for r, t in zip(rank.tolist(), own.tolist(), strict=True):
        if r >= 0 and r < nprocs:
            per_rank[r] += t
    slowest = max(per_rank.values(), default=0.0)
    t = slowest + shared
    return (total / MIB / t if t else 0.0), t, total


def read_log(path: str | os.PathLike) -> dict[str, Any]:
    """One Darshan log as an observed record (see the module docstring); DdlioError for a file that is not one."""
    darshan = import_darshan()
    p = Path(path)
    if not p.is_file():
        raise DdlioError(f"import-darshan: {p} is not a file; name Darshan logs (*.darshan)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pydarshan warns about modules it cannot read; we report what is missing
            report = darshan.DarshanReport(str(p), read_all=True)
    except Exception as e:  # pydarshan raises bare RuntimeError/OSError/ValueError for a file it cannot parse
        raise DdlioError(f"import-darshan: {p} is not a readable Darshan log ({type(e).__name__}: {e})") from e
    try:
        return _record(report, p)
    finally:
        report.close() if hasattr(report, "close") else None


def _record(report: Any, path: Path) -> dict[str, Any]:
    job = report.metadata.get("job", {})
    exe = str(report.metadata.get("exe", "") or "").split()
    nprocs = int(job.get("nprocs", 0) or 0)
    modules = sorted(report.modules)
    rec: dict[str, Any] = {
        "kind": "ddlio.observed", "source": "darshan", "log": str(path.resolve()),
        "log_sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "job_id": str(job.get("jobid", "")),
        "ranks": nprocs, "start_unix": job.get("start_time_sec"), "end_unix": job.get("end_time_sec"),
        "run_time_s": job.get("run_time"), "exe": os.path.basename(exe[0]) if exe else "", "modules": modules,
        "missing": [],
    }
    if "POSIX" not in report.records or len(report.records["POSIX"]) == 0:
        rec["missing"] = ["POSIX records (read calls, bytes, time, access sizes, files)"]
        return rec
    frames = report.records["POSIX"].to_df()
    c, f = frames["counters"], frames["fcounters"]
    names = report.name_records
    perf, agg_time, total = agg_perf_by_slowest(c, f, nprocs)
    read = c[c["POSIX_BYTES_READ"] > 0]
    used = c[(c["POSIX_BYTES_READ"] + c["POSIX_BYTES_WRITTEN"]) > 0]  # access and files from the data moved
    used = read if len(read) else used if len(used) else c
    files = sorted({str(names.get(int(i), i)) for i in used["id"].tolist()})
    # shared: Darshan reduced the file's records of every rank into one of rank -1, or several ranks' records
    shared = bool((used["rank"] < 0).any()) or bool((used.groupby("id")["rank"].nunique() > 1).any())
    hist = [int(c[name].sum()) for name in SIZE_BIN_NAMES]
    reads, nbytes = int(c["POSIX_READS"].sum()), int(c["POSIX_BYTES_READ"].sum())
    formats = collections.Counter(_SUFFIXES.get(Path(n).suffix.lower(), "other") for n in files)
    rec.update(
        files=files, access="shared" if shared else "fpp", posix_reads=reads, posix_bytes_read=nbytes,
        posix_bytes_written=int(c["POSIX_BYTES_WRITTEN"].sum()), posix_read_time_s=float(f["POSIX_F_READ_TIME"].sum()),
        posix_size_hist=hist, agg_perf_by_slowest_mib_s=perf, agg_time_by_slowest_s=agg_time, total_bytes=total,
        format=formats.most_common(1)[0][0] if formats else "other",
        data_root=os.path.commonpath(files) if files and all(n.startswith("/") for n in files) else "",
    )
    if "MPI-IO" in report.records and len(report.records["MPI-IO"]):
        m = report.records["MPI-IO"].to_df()["counters"]
        rec["mpiio_bytes_read"] = int(m["MPIIO_BYTES_READ"].sum())
    rec.update(_lustre(report, set(used["id"].tolist())))
    from analysis.diagnose.darshan import counters  # lazy: the diagnose package's own counts, kept for diagnose

    rec["diagnose"] = counters(report)
    if "stripe_count" not in rec:
        rec["missing"].append("LUSTRE records (stripe count and size)")
    return rec


def _lustre(report: Any, read_ids: set[int]) -> dict[str, Any]:
    """The stripe count and size most of the read files had, from the LUSTRE module (first component)."""
    if "LUSTRE" not in report.records or len(report.records["LUSTRE"]) == 0:
        return {}
    try:
        comp = report.records["LUSTRE"].to_df()["components"]
        rows = comp[comp["id"].isin(read_ids)] if read_ids else comp
        rows = rows if len(rows) else comp
        layout = collections.Counter(zip(rows["LUSTRE_COMP_STRIPE_COUNT"].astype(int).tolist(),
                                         rows["LUSTRE_COMP_STRIPE_SIZE"].astype(int).tolist(), strict=True))
    except (KeyError, ValueError, TypeError):  # an older LUSTRE record layout: say it is missing
        return {}
    (count, size), _ = layout.most_common(1)[0]
    return {"stripe_count": count, "stripe_size": size}


def workload_preset(rec: dict[str, Any], name: str) -> tuple[str, list[str]]:
    """A ``conf/workload/`` preset (YAML text) that emulates the log's reads, and the assumptions it made."""
    if not rec.get("posix_reads"):
        raise DdlioError(f"import-darshan: {rec['log']} has no POSIX reads: no workload can be derived from it")
    files = max(1, len(rec["files"]))
    reads, nbytes = rec["posix_reads"], rec["posix_bytes_read"]
    size = max(1, round(nbytes / reads))
    hist = rec["posix_size_hist"]
    dominant = SIZE_BIN_NAMES[max(range(len(hist)), key=lambda k: hist[k])].removeprefix("POSIX_SIZE_READ_")
    per_file = max(1, round(reads / files))
    how = "a file read by several ranks" if rec["access"] == "shared" else "each file read by one rank"
    assumptions = [
        f"one sample per read call: {reads} samples of the mean read size, {size} bytes (the most common access size "
        f"bin is {dominant}; sizes within a bin are not in the log, so sample_size_stdev is 0)",
        f"{files} files read, {per_file} samples per file (reads spread evenly over the files)",
        f"access={rec['access']} ({how}): "
        "pass it on the command line, it is not a workload field",
        "one epoch, no compute time, no shuffle: Darshan's counters do not say how reads were ordered or overlapped",
    ]
    yaml = "\n".join([
        f"# Derived from the Darshan log {rec['log']} (job {rec['job_id']}, {rec['ranks']} ranks) by",
        "# python -m analysis import-darshan --workload-out. Assumptions:",
        *[f"#  - {a}" for a in assumptions],
        f"# Run it: python sweep.py workload={name} access={rec['access']} format={_fmt(rec)}",
        "defaults:",
        "  - /schema/workload@_here_",
        "  - _self_",
        f"name: {name}",
        f"samples: {reads}",
        f"sample_size: {size}",
        "sample_size_stdev: 0",
        f"samples_per_file: {per_file}",
        "epochs: 1",
        "compute_time: 0.0",
        "shuffle: none",
        "",
    ])
    return yaml, assumptions


def _fmt(rec: dict[str, Any]) -> str:
    return rec["format"] if rec.get("format") in set(_SUFFIXES.values()) else "bin"
