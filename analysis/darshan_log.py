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
import contextlib
import hashlib
import json
import multiprocessing
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from analysis.diagnose.darshan import counters
from ddlio.errors import DdlioError
from ddlio.metrics import SIZE_BIN_NAMES

MIB = 1024 * 1024
#: file name endings -> ddlio format name, to label what the application read
_SUFFIXES = {".h5": "hdf5", ".hdf5": "hdf5", ".tfrecord": "tfrecord", ".tfrecords": "tfrecord", ".npz": "npz",
             ".npy": "npy", ".bin": "bin", ".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png", ".parquet": "parquet"}


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


def read_log(path: str | os.PathLike, partial: bool = False) -> dict[str, Any]:
    """One Darshan log as an observed record (see the module docstring); DdlioError for a file that is not one,
    and for a log whose modules libdarshan could not read (a truncated or damaged log) unless ``partial`` asks
    to keep what could be read: the record then names what it lacks in ``partial``. The log is parsed in a
    forked child process: libdarshan crashes (SIGSEGV) on some truncated logs, and its messages are captured."""
    import_darshan()
    p = Path(path)
    if not p.is_file():
        raise DdlioError(f"import-darshan: {p} is not a file; name Darshan logs (*.darshan)")
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_parse_in_child, args=(p, send), daemon=True)
    child.start()
    send.close()
    try:
        kind, value = receive.recv()
    except EOFError:  # the child died before it could answer
        child.join()
        how = f"signal {-child.exitcode}" if (child.exitcode or 0) < 0 else f"exit status {child.exitcode}"
        raise DdlioError(f"import-darshan: {p} is damaged or truncated: libdarshan crashed reading it ({how}); "
                         "nothing was stored") from None
    finally:
        receive.close()
    child.join()
    if kind == "unreadable":
        raise DdlioError(f"import-darshan: {p} is not a readable Darshan log ({value})")
    if kind == "failed":
        raise DdlioError(f"import-darshan: {p} could not be read: {value}")
    rec, damaged = value
    if damaged and not partial:
        raise DdlioError(f"import-darshan: {p} is damaged or truncated: {'; '.join(damaged)}; nothing was "
                         "stored (--partial keeps what could be read, labelled partial)")
    if damaged:
        rec["partial"] = damaged
        rec["missing"].insert(0, f"a partial log: {'; '.join(damaged)}")
    return rec


def _parse_in_child(path: Path, send: Any) -> None:
    """In the forked child: parse the log with libdarshan's messages captured, send ``(kind, value)`` back, and
    leave at once (``os._exit``: libdarshan's clean-up may crash too)."""
    darshan = import_darshan()
    answer: tuple[str, Any]
    try:
        with warnings.catch_warnings(), _stderr_captured() as said:
            warnings.simplefilter("ignore")  # pydarshan warns about modules it cannot read; we report what is missing
            try:
                report = darshan.DarshanReport(str(path), read_all=True)
            except Exception as e:  # pydarshan raises bare RuntimeError/OSError/ValueError for what it cannot parse
                answer = ("unreadable", f"{type(e).__name__}: {e}")
                report = None
        if report is not None:
            answer = ("read", (_record(report, path), _damaged(report, said[0])))
    except Exception as e:  # a record that cannot be made from what libdarshan returned
        answer = ("failed", f"{type(e).__name__}: {e}")
    try:
        send.send(answer)
    finally:
        os._exit(0)


@contextlib.contextmanager
def _stderr_captured() -> Iterator[list[str]]:
    """What is written to file descriptor 2 inside (libdarshan's C messages, "failed to read module ..."), kept
    instead of shown: the list holds the text once the block is left."""
    said = [""]
    sys.stderr.flush()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield said
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            said[0] = tmp.read(1 << 20).decode("utf-8", errors="replace")


def _damaged(report: Any, said: str) -> list[str]:
    """What of the log could not be read: the modules libdarshan failed to read (its own messages), modules whose
    header promises data that no record came from, and modules Darshan itself marked partial at run time."""
    failed = sorted(set(re.findall(r"failed to read module (\S+)", said)))
    out = [f"libdarshan failed to read module(s) {', '.join(failed)}"] if failed else []
    other = sorted(set(re.findall(r"failed to read (?!module )(.+?) from darshan log file", said)))
    out += [f"libdarshan failed to read the {what}" for what in other]
    empty = sorted(m for m, info in report.modules.items() if m not in failed and info.get("len", 0) > 0
                   and m in report.records and len(report.records[m]) == 0)
    if empty:
        out.append(f"module(s) {', '.join(empty)} hold data but gave no record")
    flagged = sorted(m for m, info in report.modules.items() if info.get("partial_flag"))
    if flagged:
        out.append(f"module(s) {', '.join(flagged)} marked partial by Darshan (it ran out of record memory)")
    return out


def identity(rec: dict[str, Any]) -> str:
    """The observed run's key: its job (job id, start time in s and ns, user id, ranks, command line), not the
    log's bytes, so a log imported twice, or a truncated copy beside the whole one, is one observed run. (A
    Darshan log's job record names no host; the start time to the nanosecond and the user tell jobs apart.)"""
    ident = [rec.get("job_id"), rec.get("start_unix"), rec.get("start_nsec"), rec.get("uid"), rec.get("ranks"),
             rec.get("command")]
    return "darshan-" + hashlib.sha256(json.dumps(ident, default=str).encode()).hexdigest()[:20]


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
        "start_nsec": job.get("start_time_nsec"), "uid": job.get("uid"),
        "command": str(report.metadata.get("exe", "") or ""), "missing": [],
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


def log_counters(path: str | Path) -> dict[str, Any]:
    """:func:`counters` of the Darshan log at ``path`` (for observed runs imported before the store kept them)."""
    darshan = import_darshan()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydarshan warns about modules it cannot read
        report = darshan.DarshanReport(str(path), read_all=True)
    try:
        return counters(report)
    finally:
        report.close() if hasattr(report, "close") else None
