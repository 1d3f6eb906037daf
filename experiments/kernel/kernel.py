"""One rank's run of the reader kernel (:class:`Kernel`): set-up, then per epoch the page cache as the point asks
and the timed reads, then the result record (rank 0). Every read and metadata call is timed
(``time.perf_counter_ns``); the figures are defined in :mod:`ddlio.metrics`."""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ddlio.errors import KernelError
from ddlio.metrics import RankEpoch, aggregate, aggregate_run, histogram
from ddlio.runpaths import RunPaths
from experiments.config import PointSpec
from experiments.dataset import DatasetPlan, data_files
from experiments.formats import get_format
from experiments.kernel import cache as pagecache
from experiments.kernel import posix
from experiments.kernel.cachepolicy import (
    below_client,
    cache_state,
    flush_figures,
    flush_path,
    prepare_cache,
    read_history,
    settle,
)
from experiments.kernel.compute import Compute
from experiments.kernel.guards import ProgressWatch, fault_of, guarded_barrier, inject
from experiments.kernel.lanes import EpochArrays, Lane, busy_ns, within_epoch, write_trace
from experiments.kernel.sampling import compute_times, drop_last_keep, epoch_ids


class Kernel:
    """One rank's run of the kernel, in the order it happens: :meth:`__init__` sets up (MPI, plan, format, lanes,
    the priming read, a common time base); for every epoch :meth:`prepare_epoch` puts the page cache in the state
    the point asks for and :meth:`measure_epoch` times the reads; :meth:`result` checks the plan and assembles the
    result record (rank 0)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from mpi4py import MPI  # lazy: MPI starts up on import (only in an MPI step)

        self.MPI, self.spec = MPI, spec
        self.comm = comm = MPI.COMM_WORLD
        self.rank, self.nranks = comm.rank, comm.size
        # the point, typed once from its stored form; its key as stored (the result is filed under it)
        self.point = point = PointSpec.from_dict(spec["point"])
        self.point_key: str = spec["point"]["point_key"]
        self.plan = plan = DatasetPlan.from_dict(spec["plan"])
        if self.nranks != point.ranks:
            raise KernelError(f"the kernel runs on {self.nranks} ranks but the point asks for {point.ranks}")
        self.node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        node_comm = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.leader = node_comm.rank == 0
        self.fmt = fmt = get_format(plan.format, **plan.format_options)
        self.record = plan.record_bytes()
        self.loads = plan.load_bytes() if fmt.loads_whole else None
        self.files = data_files(plan)
        self.paths = [plan.file_path(f) for f in range(plan.num_files)]
        w = point.workload
        self.batch, self.policy = w.batch_size, w.cache
        self.tf: Any = None
        if point.reader == "tf":
            from experiments.kernel import tfdata  # lazy: TensorFlow

            self.tf = tfdata.import_tf()
        self.threads, self.prefetch, self.trace = int(w.read_threads), int(w.prefetch), bool(w.trace)
        self.guard_s = float(point.cluster.hang_timeout_s)
        self.fault = fault_of(point, self.rank)
        self.started, self.started_unix = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.time()
        self._set_up_lanes()
        self.torch: Any = None
        if point.reader == "torch":
            from experiments.kernel import torchdata  # lazy: PyTorch

            self.torch = torchdata.TorchLoader(plan, point, self.nranks, self.rank, self.paths,
                                               int(self.record.max()), self.trace)
        self.watch = ProgressWatch(comm, self.guard_s, self.paths)
        self._prime()
        self._set_up_below_client()
        # the emulated compute: compute=cpu calibrates its work rate here, untimed, every rank of a node at once
        # (as they compute at once in the epochs)
        self.compute = Compute.of(point, ranks_per_node=node_comm.size)
        guarded_barrier(comm, self.guard_s, "the compute's calibration")
        self.compute_calibration = self.compute.calibrate()
        guarded_barrier(comm, self.guard_s, "the start")
        # a common time base for access logs: wall-clock ns of rank 0 at the start, mapped from each rank's perf clock
        self.perf0, self.wall0 = time.perf_counter_ns(), time.time_ns()
        self.t0_wall = comm.bcast(self.wall0, root=0)
        self.trace_rows: list[tuple] = []
        self.epochs: list[list[RankEpoch]] = []
        self.cache_rows: list[dict[str, Any]] = []
        self.planned: list[int] = []

    def _set_up_lanes(self) -> None:
        """The file-system layer's counters, the lanes (one preallocated buffer each, as large as the dataset's
        largest record, reused for every read) and, with reader threads, their pool (each thread binds a lane)."""
        # the file-system layer: this process's I/O counters around each epoch, each thread's around each batch
        # (DDLIO_FS_LAYER=off, internal: the same reads without any counter, the benches' reference)
        self.fs_layer = os.environ.get("DDLIO_FS_LAYER", "on") != "off" and posix.available()
        self.proc_io = posix.IOCounter("/proc/self/io") if self.fs_layer else None
        self.lanes = [Lane(self.fmt, self.paths, int(self.record.max()), self.trace, self.fs_layer)
                      for _ in range(max(1, self.threads))]
        self.pool: Any = None
        self.local: Any = None
        if not self.threads or self.point.reader == "torch":  # reader=torch: read_threads are worker processes
            return
        self.local = local = threading.local()
        counter = iter(range(self.threads))
        lock = threading.Lock()

        def _bind() -> None:
            with lock:
                local.lane = self.lanes[next(counter)]

        self.pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="ddlio-reader",
                                       initializer=_bind)

    def _set_up_below_client(self) -> None:
        """Below the client: settle a fresh dataset (cold), or make sure the flush file exists (storage_cold)."""
        self.where = below_client(self.plan) if self.rank == 0 else None
        self.settle = settle(self.point, self.where, self.files) if self.rank == 0 else None
        self.flush = flush_path(self.point)
        if self.flush is not None and self.rank == 0:
            pagecache.ensure_flush_file(*self.flush)

    def _prime(self) -> None:
        """Run the format's read path once before anything is measured, so the libraries it loads lazily (h5py's
        modules, Pillow's codecs) are not read from storage inside an epoch; eviction comes after this. Its file's
        pages are then evicted, to leave no trace in the page cache, unless they were all cached before it (then
        its reads changed nothing: a warm file stays warm instead of being read again in full by cache=warm)."""
        plan, paths = self.plan, self.paths
        if self.tf is None and plan.samples:
            primed = [paths[0], *self.fmt.sidecars(paths[0])]
            cached = pagecache.residency(primed) == 1.0  # NaN (not measurable) or less: evict after
            with self.fmt.open(paths[0]) as r:
                if r.num_samples:
                    r.read(0, self.lanes[0].buf)
            if not cached:
                pagecache.evict(primed)

    def prepare_epoch(self, epoch: int) -> None:
        """Before ``epoch`` is timed: the page cache as the policy asks (node leaders evict or warm and measure
        residency), the epoch's cache label agreed on every rank, and every rank at the starting line."""
        report = prepare_cache(self.policy, epoch, self.files, self.leader, self.flush)
        reports = [r for r in self.comm.allgather(report) if r is not None]
        state, before, after, note = cache_state(self.policy, reports)
        self.cache_rows.append(
            {"cache": state, "residency_before": before, "residency_after": after, "cache_note": note,
             **flush_figures(reports), **(read_history(self.where) if self.rank == 0 else {}),
             # a client's own cache (ceph-fuse's) left after cache=cold emptied it, bytes, worst over nodes
             **({"client_cache_bytes": max(r["client_cache_bytes"] for r in reports if "client_cache_bytes" in r)}
                if any("client_cache_bytes" in r for r in reports) else {})})
        for lane in self.lanes:
            lane.meta_ns = lane.opens = 0
            lane.meta_events = []
        guarded_barrier(self.comm, self.guard_s, f"the start of epoch {epoch}")

    def measure_epoch(self, epoch: int) -> None:
        """One timed epoch on this rank: read its share in batches (with the emulated compute), close the files,
        then fill one :class:`RankEpoch` (application and file-system layers) and gather them on rank 0."""
        ids = epoch_ids(self.plan, self.point, epoch, self.nranks, self.rank)
        ep = EpochArrays(self.plan, ids, self.trace, starts_needed=self.threads > 0,
                         sizes_needed=self.fs_layer and self.tf is None and self.torch is None)
        nb = -(-len(ids) // self.batch)
        compute = compute_times(self.point, epoch, self.rank, nb).tolist()
        m = RankEpoch(self.rank, self.node, epoch)
        perf = time.perf_counter_ns
        io0 = self.proc_io.snap() if self.proc_io else b""
        t_epoch = perf()
        nbytes, wait_ns, tf_out = self._read_epoch(epoch, ids, ep, nb, compute, m)
        planned = self._planned_bytes(epoch, ids, ep, tf_out)
        if self.torch is not None and tf_out is not None:  # the reads as the workers made them, for the log
            ids, ep = np.asarray(tf_out["ids"], dtype=np.int64), self.torch.epoch_arrays(tf_out)
            self.lanes[0].meta_events.extend(self.torch.open_events(tf_out) if self.trace else [])
        for lane in self.lanes:  # every batch's reads have returned: log offsets, close the files each lane opened
            if self.trace:
                lane.record_offsets(ep)
            lane.close_all()
        m.wall_time_s = (perf() - t_epoch) / 1e9
        io1 = self.proc_io.snap() if self.proc_io else b""
        self._application_layer(m, nbytes, wait_ns, ids, ep, tf_out)
        snaps = [lane.take_snaps() for lane in self.lanes]
        posix.epoch_layer(m, io0, io1, snaps, ep.lat, ep.size, per_sample=tf_out is None)
        if self.torch is not None and tf_out is not None and self.fs_layer:  # summed over the reading processes
            m.posix_reads, m.posix_bytes_read = tf_out["posix_reads"], tf_out["posix_bytes"]
            m.os_read_bytes = tf_out["os_read_bytes"]
        self.planned.append(planned)
        if self.trace:
            self._log_epoch(epoch, ids, ep)
        self.watch.end_epoch()
        # a rank still inside its epoch is watched by its own guard, which names where it stalled: this barrier
        # waits long enough for that rank to speak first
        guarded_barrier(self.comm, 2 * self.guard_s + 5, f"the end of epoch {epoch}")
        gathered = self.comm.gather(m, root=0)
        if self.rank == 0:
            self.epochs.append(gathered)

    def _read_epoch(self, epoch: int, ids: np.ndarray, ep: EpochArrays, nb: int, compute: list[float],
                    m: RankEpoch) -> tuple[int, int, dict[str, Any] | None]:
        """The timed loop: ``nb`` batches read (natively or through tf.data), each followed by its compute
        (``compute``, s; its wall time added to ``m``). Returns (bytes read, ns the loop waited, tf.data's figures
        or None)."""
        if self.torch is not None:
            out = self.torch.run_epoch(epoch, compute, self.compute.run)
            m.compute_time_s = out["compute_s"]
            return out["bytes"], out["wait_ns"], out
        if self.tf is not None:
            from experiments.kernel import tfdata  # lazy: TensorFlow

            tf_out = tfdata.run_epoch(self.tf, self.plan, self.point, epoch, self.nranks, self.rank, ids,
                                      self.lanes[0], compute, self.compute.run)
            m.compute_time_s = tf_out["compute_s"]
            return tf_out["bytes"], tf_out["wait_ns"], tf_out
        perf = time.perf_counter_ns
        nbytes = wait_ns = 0
        fetch = self._fetcher(ep, len(ids), nb)
        fault, run_compute, watch = self.fault if epoch == 0 else None, self.compute.run, self.watch
        watch.start_epoch(epoch, ep, self.lanes, window=(self.prefetch + 2) * self.batch)
        if fault == "hang":
            inject(fault, self.rank)
        for b in range(nb):
            t = perf()
            nbytes += fetch(b)
            wait_ns += perf() - t
            if fault:
                inject(fault, self.rank)
            if compute[b] > 0:
                watch.computing(compute[b])
                m.compute_time_s += run_compute(compute[b])
            watch.batch_done()
        return nbytes, wait_ns, None

    def _planned_bytes(self, epoch: int, ids: np.ndarray, ep: EpochArrays, tf_out: dict[str, Any] | None) -> int:
        """The bytes the epoch's reads must return on this rank: the record bytes of its ids, tf.data's plan, or
        (load=whole) each file's whole-load bytes times it was loaded."""
        if tf_out is not None and tf_out.get("loader") == "torch":
            return tf_out["planned"]
        if not self.fmt.loads_whole:
            return int(self.record[ids].sum()) if tf_out is None else tf_out["planned"]
        loads = [fl for lane in self.lanes for fl in lane.whole_loads()]
        if not {f for f, n in loads if n} >= set(ep.fo):  # ep.fo: a list of ints
            raise KernelError(f"epoch {epoch}: a file read from was never loaded whole: the count is not "
                              "trustworthy")
        return int(sum(int(self.loads[f]) * n for f, n in loads))

    def _application_layer(self, m: RankEpoch, nbytes: int, wait_ns: int, ids: np.ndarray, ep: EpochArrays,
                           tf_out: dict[str, Any] | None) -> None:
        """Fill ``m``'s application layer: samples, bytes, operations, times in s, and the histogram of latencies
        (ns): per read (reader=torch: per sample, in the worker), or with reader=tf per batch (tf.data hides the
        individual reads)."""
        lanes = self.lanes
        m.samples = len(ids) if tf_out is None else tf_out["samples"]
        m.bytes_read = nbytes
        m.read_ops = m.samples
        torch = tf_out is not None and tf_out.get("loader") == "torch"
        opens = tf_out["opens"] if torch else sum(lane.opens for lane in lanes)
        m.meta_ops = 2 * opens  # one open and one close per file a lane (or torch worker) opened (tf.data's unseen)
        lat = np.asarray(ep.lat if tf_out is None else tf_out["lat"], dtype=np.int64)
        m.meta_time_s = (tf_out["meta_ns"] if torch else sum(lane.meta_ns for lane in lanes)) / 1e9
        if torch:  # reads in flight in any worker (or the loop itself), counted once, as Darshan counts them;
            # the workers' opens overlap them and the loop: I/O time is at most the epoch it lies in
            m.meta_time_s = min(m.meta_time_s, m.wall_time_s)
            m.read_time_s = within_epoch(tf_out["read_ns"] / 1e9, m.meta_time_s, m.wall_time_s)
        elif tf_out is not None:  # tf.data overlaps its reads (and the generator's opens) with everything: its I/O
            m.meta_time_s = min(m.meta_time_s, m.wall_time_s)  # time is the epoch's wall, opens included
            m.read_time_s = within_epoch(m.wall_time_s, m.meta_time_s, m.wall_time_s)
        elif self.threads:  # overlapping reads of the reader threads count once, as Darshan counts them
            m.read_time_s = busy_ns(np.asarray(ep.start, dtype=np.int64), lat) / 1e9
            # the lanes open files concurrently, overlapping each other and other lanes' reads: summed, their
            # times can exceed the epoch; I/O time is at most the epoch it lies in
            m.meta_time_s = min(m.meta_time_s, m.wall_time_s)
            m.read_time_s = within_epoch(m.read_time_s, m.meta_time_s, m.wall_time_s)
        else:
            m.read_time_s = float(lat.sum()) / 1e9
        m.wait_time_s = wait_ns / 1e9
        m.hist = histogram(lat).tolist()

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

    def _log_epoch(self, epoch: int, ids: np.ndarray, ep: EpochArrays) -> None:
        """The epoch's rows of this rank's access log (times in s on the common wall-clock base)."""
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
        self.watch.stop()
        if self.pool is not None:
            self.pool.shutdown()
        if self.torch is not None:
            self.torch.close()
        self.compute.close()
        if self.trace:
            # in the run folder of the result; a rerun with --result logs beside the original's, not over them
            paths = RunPaths(Path(self.spec["result_path"]).parent)
            write_trace(paths.trace(self.rank, self.spec.get("trace_prefix", "")), self.trace_rows)
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
            # the rank's reads by the loop that made them: the C one (experiments/kernel/_readrun.c), the Python one
            "read_loop": {name: sum(lane.reads[name] for lane in self.lanes) for name in ("native", "python")},
            # reader=torch: the DataLoader's knobs and every worker's opens per epoch
            **({"torch": self.torch.info()} if self.torch is not None else {}),
        }
        ranks_info = self.comm.gather(own, root=0)
        all_planned = self.comm.gather(self.planned, root=0)
        if self.rank != 0:
            return None
        return result_record(self, ranks_info, all_planned)


# ------------------------------------------------------ rank 0, after the last epoch: the plan check, the record
def epoch_rows(k: Kernel, all_planned: list[list[int]]) -> tuple[list[dict[str, Any]], list[int]]:
    """Every epoch's aggregate row and planned bytes; a :class:`~ddlio.errors.KernelError` where the reads did not
    return the plan (every rank's planned bytes, from the record sizes measured at generation for the ids it was
    given, and the number of samples the epoch must cover in total)."""
    plan, nranks, tf = k.plan, k.nranks, k.tf
    keep = drop_last_keep(plan, k.point, nranks)
    want_samples = nranks * keep if keep is not None else plan.samples
    if (tf is not None and keep is not None) or k.torch is not None:
        want_samples = None  # tf.data drops each rank's own remainder; reader=torch checks its sampler's ids
    slack = 0
    if tf is not None and plan.format == "tfrecord":
        from experiments.kernel import tfdata  # lazy: TensorFlow (only a tf.data point's rank 0 loads it)

        slack = tfdata.TF_OTHER_READS_MAX * nranks
    planned_per_epoch = [sum(p[e] for p in all_planned) for e in range(len(k.epochs))]
    rows = []
    for e, (ranks_e, cache_row) in enumerate(zip(k.epochs, k.cache_rows, strict=True)):
        planned_e = planned_per_epoch[e]
        agg = aggregate(ranks_e)
        agg.update(cache_row, epoch=e, bytes_planned=planned_e, ranks=[r.to_dict() for r in ranks_e])
        if not planned_e <= agg["bytes_read"] <= planned_e + slack or want_samples not in (None, agg["samples"]):
            raise KernelError(
                f"epoch {e}: the reads returned {agg['bytes_read']} bytes for {agg['samples']} samples, the plan "
                f"is {planned_e} bytes for {want_samples} samples: the measurement is not trustworthy"
            )
        rows.append(agg)
    return rows, planned_per_epoch


def result_record(k: Kernel, ranks_info: list[dict[str, Any]], all_planned: list[list[int]]) -> dict[str, Any]:
    """The result record of kernel ``k``'s run (rank 0), from every rank's info and planned bytes per epoch."""
    rows, planned_per_epoch = epoch_rows(k, all_planned)
    total = aggregate_run(k.epochs)
    states = {row["cache"] for row in k.cache_rows}
    total.update(
        bytes_planned=sum(planned_per_epoch),
        cache=states.pop() if len(states) == 1 else "mixed",
        max_rss_kib=max(r["max_rss_kib"] for r in ranks_info),
    )
    MPI = k.MPI
    return {
        "kind": "ddlio.result",
        "version": 1,
        "result_id": uuid.uuid4().hex,
        "point_key": k.point_key,
        "dataset_key": k.plan.key,
        "ranks": k.nranks,
        "nodes": sorted({r["node"] for r in ranks_info}),
        "hosts": sorted({r["host"] for r in ranks_info}),
        "rank_info": ranks_info,
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
        "mpi_vendor": "{} {}".format(MPI.get_vendor()[0], ".".join(map(str, MPI.get_vendor()[1]))),
        "totals": total,
        "epochs": rows,
        "settle": k.settle,
        "started_utc": k.started,
        "started_unix": k.started_unix,  # seconds since the epoch: the measurement's span, for overlaps
        "finished_unix": time.time(),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
