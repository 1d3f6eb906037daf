"""The MPI reader kernel: ``mpiexec -n RANKS python -m experiments.kernel SPEC.json``.

Each rank reads its share of the dataset's samples in batches, for every epoch, the way a data loader feeds a
training step: open files as they are first needed, one read per sample into a preallocated buffer, then the
batch's emulated compute (``workload.compute``: a sleep, or CPU work; see :mod:`experiments.kernel.compute`). Every
read and metadata call is timed (``time.perf_counter_ns``); the figures are defined in :mod:`ddlio.metrics`.

Before each epoch, one rank per node evicts the dataset's pages (``cache=cold``) and measures residency with
mincore before and after, so every epoch is labelled ``cold`` (eviction verified), ``warm`` (data read once before
the first epoch and left cached) or ``unknown`` (eviction could not be verified). Rank 0 checks that the bytes the
reads returned equal the plan exactly, and writes the result file atomically.
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import json
import os
import resource
import socket
import sys
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ddlio.errors import FormatError, KernelError
from ddlio.metrics import RankEpoch, aggregate, aggregate_run, histogram
from ddlio.records import ResultRecord
from ddlio.runpaths import RunPaths
from experiments.dataset import DatasetPlan, data_files, even_split, load_manifest, write_json_atomic
from experiments.formats import get_format
from experiments.kernel import cache as pagecache
from experiments.kernel import posix
from experiments.kernel.compute import Compute

#: After eviction, at most this fraction of the dataset's pages may still be resident for an epoch to count cold.
COLD_TOLERANCE = 0.01


def share_sizes(plan: DatasetPlan, point: dict[str, Any], ranks: int) -> list[int]:
    """Samples each rank is given per epoch, before ``drop_last`` (the same every epoch)."""
    if point["access"] == "fpp":
        per, starts = plan.num_files // ranks, plan.file_starts
        return [int(starts[(r + 1) * per] - starts[r * per]) for r in range(ranks)]
    if point.get("shuffle", "none") == "sample":
        return [plan.samples // ranks + (r < plan.samples % ranks) for r in range(ranks)]
    return np.diff(even_split(plan.samples, ranks)).tolist()


def epoch_ids(plan: DatasetPlan, point: dict[str, Any], epoch: int, ranks: int, rank: int) -> np.ndarray:
    """Global sample ids that ``rank`` reads in ``epoch``, in reading order.

    - ``shared``: one order of all samples per epoch, identical on every rank, split among the ranks:
      ``shuffle=none`` keeps id order and gives each rank a contiguous block; ``file`` permutes the order of the
      files (samples in a file stay in order) and splits into blocks; ``sample`` is a seeded global permutation
      of which rank r takes every ranks-th id (as PyTorch's DistributedSampler does).
    - ``fpp``: each rank reads only its own files (num_files / ranks consecutive files); ``file`` permutes their
      order, ``sample`` permutes its samples.

    The permutation is seeded by (seed, epoch): different every epoch, the same on every rank and every rerun.
    Without ``drop_last`` every sample is read exactly once per epoch in total. With it, every rank reads the
    same number of whole batches (the largest multiple of batch_size that all ranks have) and the rest is
    dropped (the dropped samples change from epoch to epoch when shuffling).
    """
    shuffle, starts = point.get("shuffle", "none"), plan.file_starts

    def files_ids(files: np.ndarray) -> np.ndarray:
        return np.concatenate([np.arange(starts[f], starts[f + 1], dtype=np.int64) for f in files])

    if point["access"] == "fpp":
        rng = np.random.Generator(np.random.PCG64([point["seed"], 0x5EED, epoch, rank]))
        per = plan.num_files // ranks
        files = np.arange(rank * per, (rank + 1) * per)
        ids = files_ids(rng.permutation(files) if shuffle == "file" else files)
        if shuffle == "sample":
            ids = rng.permutation(ids)
    else:
        rng = np.random.Generator(np.random.PCG64([point["seed"], 0x5EED, epoch]))
        if shuffle == "sample":
            ids = rng.permutation(plan.samples)[rank::ranks]
        else:
            order = files_ids(rng.permutation(plan.num_files)) if shuffle == "file" else np.arange(plan.samples)
            bounds = even_split(plan.samples, ranks)
            ids = order[bounds[rank] : bounds[rank + 1]]
    if point.get("drop_last"):
        keep = min(share_sizes(plan, point, ranks)) // point["batch_size"] * point["batch_size"]
        ids = ids[:keep]
    return np.ascontiguousarray(ids, dtype=np.int64)


def compute_times(point: dict[str, Any], epoch: int, rank: int, batches: int) -> np.ndarray:
    """Emulated compute per batch, seconds: constant, or normal(mean, stdev) clipped at 0, seeded per
    (seed, epoch, rank)."""
    mean, stdev = float(point["compute_time"]), float(point.get("compute_time_stdev", 0.0))
    if stdev <= 0:
        return np.full(batches, mean)
    rng = np.random.Generator(np.random.PCG64([point["seed"], 0xC0, epoch, rank]))
    return np.clip(rng.normal(mean, stdev, batches), 0.0, None)


class Lane:
    """One reading context — the training loop itself, or one reader thread: its own open files and its own
    preallocated buffer, reused for every read. With the file-system layer on, the lane reads its thread's I/O
    counters (/proc/thread-self/io) before and after every sample (see :mod:`experiments.kernel.posix`)."""

    def __init__(self, fmt: Any, paths: list[str], buf_bytes: int, trace: bool, fs_layer: bool = False) -> None:
        self.fmt, self.paths = fmt, paths
        self.buf = np.empty(max(1, buf_bytes), dtype=np.uint8)
        self.readers: dict[int, Any] = {}
        # load=whole: a lane holds one file in memory; moving on to another file releases the one before
        self.whole = bool(getattr(fmt, "loads_whole", False))
        self._held: Any = None
        self.meta_ns = 0
        self.opens = 0
        self.trace = trace
        self.meta_events: list[tuple[int, int, int, str]] = []  # (start ns, duration ns, file, op)
        self.fs_layer = fs_layer
        self.io_fd = -1  # this lane's thread's /proc/thread-self/io, opened by the thread on its first read
        # per read_range call: (first sample, counter texts around each sample and open, which texts end an open)
        self.snaps: list[tuple[int, list[bytes], list[int]]] = []
        self._texts: list[bytes] | None = None
        self._opens: list[int] = []

    def reader_of(self, f: int) -> Any:
        """The open reader of file ``f``, opening it (a timed metadata op) on first use."""
        r = self.readers.get(f)
        if r is None:
            t = time.perf_counter_ns()
            r = self.readers[f] = self.fmt.open(self.paths[f])
            dt = time.perf_counter_ns() - t
            self.meta_ns += dt
            self.opens += 1
            if self.trace:
                self.meta_events.append((t, dt, f, "open"))
            if self._texts is not None:  # the open's own reads (headers, indexes) apart from the sample's
                self._texts.append(os.pread(self.io_fd, 512, 0))
                self._opens.append(len(self._texts) - 1)
        return r

    def switch_to(self, f: int) -> Any:
        """File ``f``'s reader, for a lane moving on to ``f`` (with ``load=whole``, the file held before is
        released)."""
        r = self.reader_of(f)
        if self.whole:
            if self._held is not None and self._held is not r:
                self._held.release()
            self._held = r
        return r

    def whole_loads(self) -> list[tuple[int, int]]:
        """``[(file, times loaded whole)]`` of the files this lane has open (``load=whole``)."""
        return [(f, r.loads) for f, r in self.readers.items()]

    def read_range(self, k0: int, k1: int, ep: EpochArrays) -> int:
        """Read samples k0..k1-1 of the epoch's order; returns the bytes the reads returned."""
        # the hot loops: locals only, bound methods, Python lists (no numpy scalars), one read call per sample;
        # the lean one when nothing but latency (and the thread's I/O counters) is kept
        perf = time.perf_counter_ns
        buf, fo, lo, lat, start = self.buf, ep.fo, ep.lo, ep.lat, ep.start
        nbytes = 0
        last_f, read = -1, None
        if self.fs_layer:
            if self.io_fd < 0:
                self.io_fd = os.open("/proc/thread-self/io", os.O_RDONLY)
            snap: Any = functools.partial(os.pread, self.io_fd, 512, 0)
            self._texts, self._opens = [snap()], []
            self.snaps.append((k0, self._texts, self._opens))
            keep = self._texts.append
        else:
            snap, keep = bytes, id
        if not start:
            for k in range(k0, k1):
                f = fo[k]
                if f != last_f:
                    last_f, read = f, self.switch_to(f).read
                t = perf()
                nbytes += read(lo[k], buf)
                lat[k] = perf() - t
                keep(snap())
            return nbytes
        size = ep.size
        for k in range(k0, k1):
            f = fo[k]
            if f != last_f:
                last_f, read = f, self.switch_to(f).read
            t = perf()
            n = read(lo[k], buf)
            lat[k] = perf() - t
            keep(snap())
            start[k] = t
            nbytes += n
            if size:
                size[k] = n
        return nbytes

    def take_snaps(self) -> list[tuple[int, list[bytes], list[int]]]:
        """The counter texts of the epoch so far, handed over and forgotten."""
        out, self.snaps, self._texts = self.snaps, [], None
        return out

    def record_offsets(self, ep: EpochArrays) -> None:
        """For the access log: the file offset of every read, asked of the readers after the epoch (not in
        the timed loop), before they are closed."""
        for k, (f, i) in enumerate(zip(ep.fo, ep.lo, strict=True)):
            r = self.readers.get(f)
            if r is not None and ep.offset[k] == -2:
                ep.offset[k] = r.record_offset(i)

    def close_all(self) -> None:
        perf = time.perf_counter_ns
        for f, r in self.readers.items():
            t = perf()
            r.close()
            dt = perf() - t
            self.meta_ns += dt
            if self.trace:
                self.meta_events.append((t, dt, f, "close"))
        self.readers.clear()
        self._held = None


class EpochArrays:
    """Per-sample arrays of one epoch on one rank: file and local index of each read, latency (ns); start time
    (perf_counter ns) when reads overlap (reader threads) or are logged; bytes and file offset when logged."""

    def __init__(self, plan: DatasetPlan, ids: np.ndarray, trace: bool, starts_needed: bool = False) -> None:
        starts = plan.file_starts
        file_of = np.searchsorted(starts, ids, side="right") - 1
        self.ids = ids
        self.fo, self.lo = file_of.tolist(), (ids - starts[file_of]).tolist()
        n = len(ids)
        self.lat = [0] * n  # read latencies, ns (a list: cheaper to fill from the hot loop than an ndarray)
        self.start = [0] * n if (trace or starts_needed) else []
        self.size = [0] * n if trace else []
        self.offset = [-2] * n if trace else []  # -2: not asked yet


def busy_ns(start: np.ndarray, dur: np.ndarray) -> int:
    """Length of the union of the intervals [start, start + dur) in ns: the time at least one read was in
    flight, as Darshan counts a rank's I/O time when its reads overlap (threads)."""
    if len(start) == 0:
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], start[order] + dur[order]
    reach = np.maximum.accumulate(e)  # the furthest end among reads started so far
    prev = np.concatenate(([s[0]], reach[:-1]))
    return int(np.maximum(0, e - np.maximum(s, prev)).sum())  # each read adds only what extends the union


def _prepare_cache(policy: str, epoch: int, files: list[Path], leader: bool,
                   flush: tuple[Path, int] | None = None) -> dict[str, Any] | None:
    """On a node leader: measure residency, evict (cold) or warm once (warm), measure again. ``storage_cold``
    first reads the flush file ``(path, bytes)`` through, untimed, to push the dataset out of the caches below
    the client, then evicts as ``cold`` does."""
    if not leader:
        return None
    flushed: dict[str, Any] = {}
    if policy == "storage_cold" and flush is not None:
        try:
            n, secs = pagecache.read_through([flush[0]])
        except OSError as e:
            return {"before": float("nan"), "after": float("nan"), "error": f"the flush read failed: {e}"}
        flushed = {"flush_bytes": n, "flush_s": secs}
    before = pagecache.residency(files)
    if policy in ("cold", "storage_cold"):
        try:
            pagecache.evict(files)
        except OSError as e:
            return {"before": before, "after": float("nan"), "error": f"eviction failed: {e}", **flushed}
    elif epoch == 0:
        pagecache.warm(files)
    return {"before": before, "after": pagecache.residency(files), **flushed}


def _flush_figures(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """An epoch's flush across node leaders: the bytes read through and the read rate of the slowest (MiB/s)."""
    done = [r for r in reports if "flush_bytes" in r]
    if not done:
        return {}
    slowest = max(r["flush_s"] for r in done)
    return {"flush_bytes": sum(r["flush_bytes"] for r in done),
            "flush_mib_s": done[0]["flush_bytes"] / slowest / 2**20 if slowest > 0 else None}


def flush_path(point: dict[str, Any]) -> tuple[Path, int] | None:
    """The storage-cold flush file of a point (``data_root/flush/flush-<bytes>.bin``) and its size, or None."""
    if point["cache"] != "storage_cold":
        return None
    size = int(point["flush_size"])
    return Path(point["data_root"]) / "flush" / f"flush-{size}.bin", size


def _below_client(plan: DatasetPlan) -> tuple[Path, str] | None:
    """Where the dataset's read marker lives and its generation stamp (None for a dataset whose manifest
    predates read tracking: whether it was read since generation is then unknown)."""
    m = load_manifest(plan) or {}
    return (Path(plan.directory), m["created_utc"]) if m.get("tracks_reads") else None


def _settle(point: dict[str, Any], where: tuple[Path, str] | None, files: list[Path]) -> dict[str, Any] | None:
    """Rank 0, before anything is measured: a freshly generated dataset (never read since) is read through,
    untimed, until its read rate is steady (:func:`experiments.kernel.cache.settle`), and dropped from the page cache,
    so that the caches below the client treat every repetition alike (the first read of a fresh file is served by
    the device, every later one by a cache no client can evict, once it has taken the data).
    Only with ``cache=cold`` and ``settle=true``; returns what it did, or None."""
    if point["cache"] != "cold" or not point.get("settle") or where is None:
        return None
    if not pagecache.claim_first_read(*where):
        return {"settled": False}
    return {"settled": True, **pagecache.settle(files)}


def _read_history(where: tuple[Path, str] | None) -> dict[str, Any]:
    """Rank 0, at an epoch's start: is this the dataset's first read since it was generated (claimed
    atomically, so of all points reading it only one sees True), and how long ago was it generated (s)?"""
    if where is None:
        return {"first_read": None, "since_generation_s": None}
    created = calendar.timegm(time.strptime(where[1], "%Y-%m-%dT%H:%M:%SZ"))
    return {"first_read": pagecache.claim_first_read(*where), "since_generation_s": time.time() - created}


def _cache_state(policy: str, reports: list[dict[str, Any]]) -> tuple[str, float, float, str]:
    """The epoch's cache label from every node leader's report: ``cold`` only if every node's eviction was
    verified, ``warm`` only if every node holds the whole dataset, else ``unknown`` with the reason. The
    residencies returned are the worst over nodes (NaN where any node could not measure)."""
    def worst(key: str, pick: Any) -> float:
        vals = [r[key] for r in reports]
        return float("nan") if any(v != v for v in vals) else pick(vals)

    before = worst("before", max)
    note = "; ".join(r["error"] for r in reports if r.get("error"))
    if policy == "warm":
        after = worst("after", min)
        if after == after and after >= 1 - COLD_TOLERANCE and not note:
            return "warm", before, after, note
        return "unknown", before, after, note or (
            "residency could not be measured (mincore)" if after != after
            else f"only {after:.1%} of the dataset is cached (larger than the page cache?)")
    after = worst("after", max)
    if after == after and after <= COLD_TOLERANCE and not note:  # measured everywhere, (almost) nothing cached
        return "cold", before, after, note
    return "unknown", before, after, note or (
        "residency could not be measured (mincore)" if after != after
        else f"{after:.1%} of the dataset stayed cached after eviction")


def guarded_barrier(comm: Any, timeout_s: float, what: str) -> None:
    """A barrier that gives up after ``timeout_s`` seconds: a hung or dead rank must not hang the sweep.
    On time-out the step is aborted (MPI_Abort), naming where it stuck."""
    req = comm.Ibarrier()
    deadline = time.monotonic() + timeout_s
    while not req.Test():
        if time.monotonic() > deadline:
            print(f"ddlio kernel: rank {comm.rank} waited {timeout_s:.0f} s for the other ranks at {what}: "
                  "a rank hung or died; aborting the step", file=sys.stderr, flush=True)
            comm.Abort(4)
        time.sleep(0.001)


def _fault(point: dict[str, Any], rank: int) -> str | None:
    """Fault injection for testing failure handling: ``DDLIO_FAULT=crash@RANK[:FORMAT]``, ``kill@RANK[:FORMAT]``
    or ``hang@RANK[:FORMAT]`` makes that rank crash (exit 9), be killed by SIGKILL, or hang in its first epoch."""
    spec = os.environ.get("DDLIO_FAULT", "")
    if not spec:
        return None
    kind, _, where = spec.partition("@")
    r, _, fmt = where.partition(":")
    if int(r or -1) == rank and (not fmt or fmt == point["format"]):
        return kind
    return None


def _inject(fault: str, rank: int) -> None:
    if fault == "crash":
        print(f"ddlio kernel: rank {rank} crashing on purpose (DDLIO_FAULT)", file=sys.stderr, flush=True)
        os._exit(9)
    if fault == "kill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    while fault == "hang":
        time.sleep(1)


TRACE_COLUMNS = ("rank", "epoch", "op", "file", "offset", "size", "start_s", "duration_s")


def _write_trace(path: Path, rows: list[tuple]) -> None:
    """One rank's access log: every read, open and close with its start (seconds since rank 0's start, on a
    common wall-clock base), duration (s), file, offset and size (bytes; -1/0 for open and close)."""
    import csv

    rows.sort(key=lambda r: r[6])
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(TRACE_COLUMNS)
        w.writerows((r[0], r[1], r[2], r[3], r[4], r[5], f"{r[6]:.9f}", f"{r[7]:.9f}") for r in rows)
    os.replace(tmp, path)


class Kernel:
    """One rank's run of the kernel, in the order it happens: :meth:`__init__` sets up (MPI, plan, format, lanes,
    the priming read, a common time base); for every epoch :meth:`prepare_epoch` puts the page cache in the state
    the point asks for and :meth:`measure_epoch` times the reads; :meth:`result` checks the plan and assembles the
    result record (rank 0)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from mpi4py import MPI

        self.MPI = MPI
        self.spec = spec
        self.comm = comm = MPI.COMM_WORLD
        self.rank, self.nranks = comm.rank, comm.size
        self.point, self.plan = point, plan = spec["point"], DatasetPlan.from_dict(spec["plan"])
        if self.nranks != point["ranks"]:
            raise KernelError(f"the kernel runs on {self.nranks} ranks but the point asks for {point['ranks']}")
        self.node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        node_comm = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.leader = node_comm.rank == 0
        self.fmt = fmt = get_format(plan.format, **plan.format_options)
        self.record = plan.record_bytes()
        self.loads = plan.load_bytes() if fmt.loads_whole else None
        self.files = data_files(plan)
        self.paths = paths = [plan.file_path(f) for f in range(plan.num_files)]

        self.batch, self.policy = point["batch_size"], point["cache"]
        self.tf: Any = None
        if point.get("reader", "native") == "tf":
            from experiments.kernel import tfdata

            self.tf = tfdata.import_tf()
        self.threads, self.prefetch = int(point.get("read_threads", 0)), int(point.get("prefetch", 2))
        self.trace = bool(point.get("trace", False))
        self.guard_s = float(point["cluster"]["hang_timeout_s"])
        self.fault = _fault(point, self.rank)
        self.started, self.started_unix = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.time()
        # the file-system layer: this process's I/O counters around each epoch, each thread's around each sample
        self.fs_layer = posix.available()
        self.proc_io = posix.IOCounter("/proc/self/io") if self.fs_layer else None
        # one preallocated buffer per lane, as large as the dataset's largest record, reused for every read
        self.lanes = [Lane(fmt, paths, int(self.record.max()), self.trace, self.fs_layer)
                      for _ in range(max(1, self.threads))]
        self.pool: Any = None
        self.local: Any = None
        if self.threads:
            import threading
            from concurrent.futures import ThreadPoolExecutor

            self.local = local = threading.local()
            counter = iter(range(self.threads))
            lock = threading.Lock()

            def _bind() -> None:
                with lock:
                    local.lane = self.lanes[next(counter)]

            self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="ddlio-reader",
                                           initializer=_bind)
        self._prime()
        # below the client: settle a fresh dataset (cold), or make sure the flush file exists (storage_cold)
        self.where = _below_client(plan) if self.rank == 0 else None
        self.settle = _settle(point, self.where, self.files) if self.rank == 0 else None
        self.flush = flush_path(point)
        if self.flush is not None and self.rank == 0:
            pagecache.ensure_flush_file(*self.flush)
        # a common time base for access logs: wall-clock ns of rank 0 at the start, mapped from each rank's perf clock
        # the emulated compute: compute=cpu calibrates its work rate here, untimed, every rank of a node at once
        # (as they compute at once in the epochs)
        self.compute = Compute.of(point, ranks_per_node=node_comm.size)
        guarded_barrier(comm, self.guard_s, "the compute's calibration")
        self.compute_calibration = self.compute.calibrate()
        guarded_barrier(comm, self.guard_s, "the start")
        self.perf0, self.wall0 = time.perf_counter_ns(), time.time_ns()
        self.t0_wall = comm.bcast(self.wall0, root=0)
        self.trace_rows: list[tuple] = []
        self.epochs: list[list[RankEpoch]] = []
        self.cache_rows: list[dict[str, Any]] = []
        self.planned: list[int] = []

    def _prime(self) -> None:
        """Run the format's read path once before anything is measured, so the libraries it loads lazily (h5py's
        modules, Pillow's codecs) are not read from storage inside an epoch; eviction comes after this."""
        plan, paths = self.plan, self.paths
        if self.tf is None and plan.samples:
            with self.fmt.open(paths[0]) as r:
                if r.num_samples:
                    r.read(0, self.lanes[0].buf)
            pagecache.evict([paths[0], *self.fmt.sidecars(paths[0])])  # and leave no trace of it in the page cache

    def prepare_epoch(self, epoch: int) -> None:
        """Before ``epoch`` is timed: the page cache as the policy asks (node leaders evict or warm and measure
        residency), the epoch's cache label agreed on every rank, and every rank at the starting line."""
        report = _prepare_cache(self.policy, epoch, self.files, self.leader, self.flush)
        reports = [r for r in self.comm.allgather(report) if r is not None]
        state, before, after, note = _cache_state(self.policy, reports)
        self.cache_rows.append(
            {"cache": state, "residency_before": before, "residency_after": after, "cache_note": note,
             **_flush_figures(reports), **(_read_history(self.where) if self.rank == 0 else {})})
        for lane in self.lanes:
            lane.meta_ns = lane.opens = 0
            lane.meta_events = []
        guarded_barrier(self.comm, self.guard_s, f"the start of epoch {epoch}")

    def measure_epoch(self, epoch: int) -> None:
        """One timed epoch on this rank: read its share in batches (with the emulated compute), close the files,
        then fill one :class:`RankEpoch` (application and file-system layers) and gather them on rank 0."""
        point, plan, batch, lanes = self.point, self.plan, self.batch, self.lanes
        ids = epoch_ids(plan, point, epoch, self.nranks, self.rank)
        ep = EpochArrays(plan, ids, self.trace, starts_needed=self.threads > 0)
        nb = -(-len(ids) // batch)
        compute = compute_times(point, epoch, self.rank, nb).tolist()
        m = RankEpoch(self.rank, self.node, epoch)
        perf = time.perf_counter_ns
        io0 = self.proc_io.snap() if self.proc_io else b""
        t_epoch = perf()
        nbytes = 0
        wait_ns = 0
        tf_out: dict[str, Any] | None = None
        if self.tf is not None:
            from experiments.kernel import tfdata

            tf_out = tfdata.run_epoch(self.tf, plan, point, epoch, self.nranks, self.rank, ids, lanes[0], compute,
                                      self.compute.run)
            nbytes, wait_ns, m.compute_time_s = tf_out["bytes"], tf_out["wait_ns"], tf_out["compute_s"]
        else:
            fetch = self._fetcher(ep, len(ids), nb)
            fault, run_compute = self.fault, self.compute.run
            for b in range(nb):
                t = perf()
                nbytes += fetch(b)
                wait_ns += perf() - t
                if fault and epoch == 0:
                    _inject(fault, self.rank)
                if compute[b] > 0:
                    m.compute_time_s += run_compute(compute[b])
        if self.fmt.loads_whole:  # load=whole: the plan is each file's whole-load bytes, times it was loaded
            loads = [fl for lane in lanes for fl in lane.whole_loads()]
            planned = int(sum(int(self.loads[f]) * n for f, n in loads))
            if not {f for f, n in loads if n} >= set(np.unique(ep.fo).tolist()):
                raise KernelError(f"epoch {epoch}: a file read from was never loaded whole: the count is not "
                                  "trustworthy")
        else:
            planned = int(self.record[ids].sum()) if tf_out is None else tf_out["planned"]
        for lane in lanes:  # every batch's reads have returned: log offsets, close the files each lane opened
            if self.trace:
                lane.record_offsets(ep)
            lane.close_all()
        m.wall_time_s = (perf() - t_epoch) / 1e9
        io1 = self.proc_io.snap() if self.proc_io else b""
        m.samples = len(ids) if tf_out is None else tf_out["samples"]
        m.bytes_read = nbytes
        m.read_ops = m.samples
        opens = sum(lane.opens for lane in lanes)
        m.meta_ops = 2 * opens  # one open and one close per file a lane touched (tf.data's are not seen)
        # per-read latencies; with reader=tf, per-batch waits (tf.data hides the individual reads)
        lat = np.asarray(ep.lat if tf_out is None else tf_out["lat"], dtype=np.int64)
        if tf_out is not None:  # tf.data overlaps its reads with everything: its I/O time is the epoch's wall
            m.read_time_s = m.wall_time_s
        elif self.threads:  # overlapping reads of the reader threads count once, as Darshan counts them
            m.read_time_s = busy_ns(np.asarray(ep.start, dtype=np.int64), lat) / 1e9
        else:
            m.read_time_s = float(lat.sum()) / 1e9
        m.meta_time_s = sum(lane.meta_ns for lane in lanes) / 1e9
        m.wait_time_s = wait_ns / 1e9
        m.hist = histogram(lat).tolist()
        self._file_system_layer(m, io0, io1, ep, per_sample=tf_out is None)
        self.planned.append(planned)
        if self.trace:
            self._log_epoch(epoch, ids, ep)
        guarded_barrier(self.comm, self.guard_s, f"the end of epoch {epoch}")
        gathered = self.comm.gather(m, root=0)
        if self.rank == 0:
            self.epochs.append(gathered)

    def _fetcher(self, ep: EpochArrays, n: int, nb: int) -> Any:
        """``fetch(b)``: batch b's reads, returning their bytes; done by the training loop itself, or by reader
        threads that keep up to ``prefetch`` batches in flight ahead of the loop."""
        batch, lanes, pool, local = self.batch, self.lanes, self.pool, self.local
        if pool is None:
            def fetch(b: int) -> int:
                return lanes[0].read_range(b * batch, min((b + 1) * batch, n), ep)

            return fetch

        def task(b: int) -> int:
            return local.lane.read_range(b * batch, min((b + 1) * batch, n), ep)

        futures: dict[int, Any] = {}

        def fetch_ahead(b: int) -> int:
            for ahead in range(b, min(nb, b + 1 + self.prefetch)):  # b, and `prefetch` batches ahead of it
                if ahead not in futures:
                    futures[ahead] = pool.submit(task, ahead)
            return futures.pop(b).result()

        return fetch_ahead

    def _file_system_layer(self, m: RankEpoch, io0: bytes, io1: bytes, ep: EpochArrays, per_sample: bool) -> None:
        """The epoch's read calls (the process's counters, less every counter read of the epoch) and, where each
        sample was bracketed by its thread's counters, their size histogram and time (see
        :mod:`experiments.kernel.posix`)."""
        snaps = [s for lane in self.lanes for s in lane.take_snaps()]
        if not io0:
            return
        c0, b0, r0 = posix.parse_all(io0)
        c1, b1, r1 = posix.parse_all(io1)
        m.os_read_bytes = r1 - r0
        own_calls = 1 + sum(len(texts) for _, texts, _ in snaps)
        own_bytes = len(io0) + sum(len(t) for _, texts, _ in snaps for t in texts)
        m.posix_reads = c1 - c0 - own_calls
        m.posix_bytes_read = b1 - b0 - own_bytes
        if not per_sample:
            return
        h = posix.SizeHistogram.empty()
        for k0, texts, opens in snaps:
            k = k0
            for j, (calls, nbytes) in enumerate(posix.sample_deltas(texts)):
                if j + 1 in opens:  # a file's open: its reads count, its time is metadata time
                    h.add_sample(calls, nbytes, 0)
                else:
                    h.add_sample(calls, nbytes, ep.lat[k])
                    k += 1
        m.posix_size_hist = h.counts
        m.posix_size_approx = h.approx
        m.posix_read_time_s = h.time_ns / 1e9

    def _log_epoch(self, epoch: int, ids: np.ndarray, ep: EpochArrays) -> None:
        to_s = (self.wall0 - self.t0_wall - self.perf0) / 1e9
        names = [os.path.basename(p) for p in self.paths]
        for k in range(len(ids)):
            self.trace_rows.append((self.rank, epoch, "read", names[ep.fo[k]], int(ep.offset[k]), int(ep.size[k]),
                                    ep.start[k] / 1e9 + to_s, ep.lat[k] / 1e9))
        for lane in self.lanes:
            for t, dt, f, op in lane.meta_events:
                self.trace_rows.append((self.rank, epoch, op, names[f], -1, 0, t / 1e9 + to_s, dt / 1e9))

    def result(self) -> dict[str, Any] | None:
        """After the last epoch: write this rank's access log, gather what rank 0 needs; on rank 0, check every
        epoch's bytes against the plan and return the result record (the others return None)."""
        if self.pool is not None:
            self.pool.shutdown()
        self.compute.close()
        if self.trace:
            # in the run folder of the result; a rerun with --result logs beside the original's, not over them
            paths = RunPaths(Path(self.spec["result_path"]).parent)
            _write_trace(paths.trace(self.rank, self.spec.get("trace_prefix", "")), self.trace_rows)
        own = {
            "rank": self.rank,
            "node": self.node,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            # CPU seconds (user + system) the rank's process used in all, set-up and calibration included
            "cpu_s": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]),
            # the emulated compute: its mode and, with compute=cpu, the burner's calibration (threads, units/s)
            "compute": self.compute_calibration,
        }
        ranks_info = self.comm.gather(own, root=0)
        all_planned = self.comm.gather(self.planned, root=0)
        if self.rank != 0:
            return None
        return self._assemble(ranks_info, all_planned)

    def _assemble(self, ranks_info: list[dict[str, Any]], all_planned: list[list[int]]) -> dict[str, Any]:
        point, plan, nranks, batch, tf, MPI = self.point, self.plan, self.nranks, self.batch, self.tf, self.MPI
        epochs, cache_rows = self.epochs, self.cache_rows
        # the plan: every rank's planned bytes per epoch (record sizes measured at generation, for the ids it was
        # given), and the number of samples the epoch must cover in total
        sizes = share_sizes(plan, point, nranks)
        keep = min(sizes) // batch * batch if point.get("drop_last") else None
        want_samples = nranks * keep if keep is not None else plan.samples
        if tf is not None and keep is not None:
            want_samples = None  # tf.data drops each rank's own remainder

        planned_per_epoch = [sum(p[e] for p in all_planned) for e in range(len(epochs))]
        epoch_rows = []
        for e, (ranks_e, cache_row) in enumerate(zip(epochs, cache_rows, strict=True)):
            planned_e = planned_per_epoch[e]
            agg = aggregate(ranks_e)
            agg.update(cache_row, epoch=e, bytes_planned=planned_e, ranks=[r.to_dict() for r in ranks_e])
            slack = 0
            if tf is not None and plan.format == "tfrecord":
                from experiments.kernel import tfdata

                slack = tfdata.TF_OTHER_READS_MAX * nranks
            if not planned_e <= agg["bytes_read"] <= planned_e + slack or want_samples not in (None, agg["samples"]):
                raise KernelError(
                    f"epoch {e}: the reads returned {agg['bytes_read']} bytes for {agg['samples']} samples, the plan "
                    f"is {planned_e} bytes for {want_samples} samples: the measurement is not trustworthy"
                )
            epoch_rows.append(agg)
        total = aggregate_run(epochs)
        states = {row["cache"] for row in cache_rows}
        total.update(
            bytes_planned=sum(planned_per_epoch),
            cache=states.pop() if len(states) == 1 else "mixed",
            max_rss_kib=max(r["max_rss_kib"] for r in ranks_info),
        )
        nodes = sorted({r["node"] for r in ranks_info})
        return {
            "kind": "ddlio.result",
            "version": 1,
            "result_id": uuid.uuid4().hex,
            "point_key": point["point_key"],
            "dataset_key": plan.key,
            "ranks": nranks,
            "nodes": nodes,
            "hosts": sorted({r["host"] for r in ranks_info}),
            "rank_info": ranks_info,
            "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
            "mpi_vendor": "{} {}".format(MPI.get_vendor()[0], ".".join(map(str, MPI.get_vendor()[1]))),
            "totals": total,
            "epochs": epoch_rows,
            "settle": self.settle,
            "started_utc": self.started,
            "started_unix": self.started_unix,  # seconds since the epoch: the measurement's span, for overlaps
            "finished_unix": time.time(),
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }


def run(spec: dict[str, Any]) -> dict[str, Any] | None:
    """Run the kernel on this rank; rank 0 returns the result record, the others None."""
    k = Kernel(spec)
    for epoch in range(k.point["epochs"]):
        k.prepare_epoch(epoch)
        k.measure_epoch(epoch)
    return k.result()


def main(argv: list[str]) -> int:
    """``python -m experiments.kernel SPEC.json [--result PATH]`` (``--result`` overrides the spec's result
    path: the reproducer writes beside the original result instead of over it)."""
    spec_path = argv[0]
    spec = json.loads(Path(spec_path).read_text())
    if len(argv) == 3 and argv[1] == "--result":
        spec["result_path"] = argv[2]
        spec["trace_prefix"] = Path(argv[2]).stem + "-"
    from mpi4py import MPI

    from experiments.run.mpirun import announce_started

    rank = MPI.COMM_WORLD.rank
    announce_started(MPI.COMM_WORLD)
    try:
        result = run(spec)
    except KernelError as e:
        print(f"ddlio kernel: {e}", file=sys.stderr, flush=True)
        return 3
    except Exception as e:
        print(f"ddlio kernel rank {rank} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        if isinstance(e, FormatError):  # the dataset's bytes are damaged: tell the job, which invalidates it
            with contextlib.suppress(OSError):
                RunPaths(Path(spec["result_path"]).parent).damaged.write_text(f"rank {rank}: {e}\n")
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(2)
        return 2
    if result is not None:
        write_json_atomic(spec["result_path"], ResultRecord.from_dict(result).to_dict())
    return 0

