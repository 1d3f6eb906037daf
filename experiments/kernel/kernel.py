"""One rank's run of the reader kernel (:class:`Kernel`): set-up, then per epoch the page cache as the point asks
and the timed reads, then the result record (rank 0). Every read and metadata call is timed
(``time.perf_counter_ns``); the figures are defined in :mod:`ddlio.metrics`."""

from __future__ import annotations

import os
import resource
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ddlio import phase
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
from experiments.kernel.guards import ProgressWatch, fault_of, guarded_barrier
from experiments.kernel.lanes import EpochArrays, Lane, within_epoch, write_trace
from experiments.kernel.loaders.base import EpochRecord, Loader, ReadContext
from experiments.kernel.sampling import compute_times, drop_last_keep, epoch_ids
from experiments.registry import LOADERS


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
        self.trace = bool(w.trace)
        self.guard_s = float(point.cluster.hang_timeout_s)
        self.fault = fault_of(point, self.rank)
        self.started, self.started_unix = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.time()
        # the loader (the point's reader, plug-ins included): set up before anything is primed or timed
        loader_cls: type[Loader] = LOADERS[point.reader]
        self._set_up_lanes(loader_cls.lanes_for(point))
        self.watch = ProgressWatch(comm, self.guard_s, self.paths)
        self.loader = loader_cls(ReadContext(point=point, plan=plan, ranks=self.nranks, rank=self.rank,
                                             paths=self.paths, lanes=self.lanes, record=self.record, fmt=fmt,
                                             trace=self.trace, watch=self.watch, io=self.io, fault=self.fault))
        self._prime()
        #: where rank 0 says which phase the point is in (ddlio.phase: the screen and `analysis status` read it)
        self.run_dir = Path(spec["result_path"]).parent if self.rank == 0 and spec.get("result_path") else None
        self.epoch_s: list[float] = []
        self._epoch_t0 = time.monotonic()
        if self.run_dir is not None and w.settle:
            phase.write(self.run_dir, "settling")
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

    def _set_up_lanes(self, n: int) -> None:
        """The file-system layer's counters and ``n`` lanes (one preallocated buffer each, as large as the dataset's
        largest record, reused for every read; the loader binds its reading threads to them)."""
        # the file-system layer: this process's I/O counters around each epoch, each thread's around each batch
        # (DDLIO_FS_LAYER=off, internal: the same reads without any counter, the benches' reference)
        self.fs_layer = os.environ.get("DDLIO_FS_LAYER", "on") != "off" and posix.available()
        # the I/O seam of the dataset's storage (lustre.io): the counters' handles, eviction, residency
        self.io = pagecache.io_of(self.paths)
        self.proc_io = posix.IOCounter("/proc/self/io", io=self.io) if self.fs_layer else None
        self.lanes = [Lane(self.fmt, self.paths, int(self.record.max()), self.trace, self.fs_layer, io=self.io)
                      for _ in range(n)]

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
        if self.loader.primes_lanes and plan.samples:
            primed = [paths[0], *self.fmt.sidecars(paths[0])]
            cached = pagecache.residency(primed) == 1.0  # NaN (not measurable) or less: evict after
            with self.fmt.open(paths[0]) as r:
                if r.num_samples:
                    r.read(0, self.lanes[0].buf)
            if not cached:
                pagecache.evict(primed)

    def prepare_epoch(self, epoch: int) -> None:
        """Before ``epoch`` is timed: the page cache as the policy asks (node leaders evict or warm and measure
        residency), the epoch's cache label agreed on every rank, and every rank at the starting line (rank 0 says
        first that the epoch is next: :mod:`ddlio.phase`)."""
        if self.run_dir is not None:  # each epoch's seconds, its cache preparation included, for the estimate
            now = time.monotonic()
            if epoch:
                self.epoch_s.append(now - self._epoch_t0)
            self._epoch_t0 = now
            phase.write(self.run_dir, "epoch", epoch=epoch, epochs=int(self.point.workload.epochs),
                        epoch_s=self.epoch_s)
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
        """One timed epoch on this rank: the loader reads its share in batches (with the emulated compute), the
        files are closed, then one :class:`RankEpoch` is filled (application and file-system layers) and gathered
        on rank 0."""
        ids = epoch_ids(self.plan, self.point, epoch, self.nranks, self.rank)
        loader = self.loader
        ep = EpochArrays(self.plan, ids, self.trace, starts_needed=loader.keeps_starts,
                         sizes_needed=self.fs_layer and loader.reads_per_sample)
        compute = compute_times(self.point, epoch, self.rank, -(-len(ids) // self.batch)).tolist()
        m = RankEpoch(self.rank, self.node, epoch)
        perf = time.perf_counter_ns
        io0 = self.proc_io.snap() if self.proc_io else b""
        t_epoch = perf()
        rec = loader.run_epoch(epoch, ids, ep, compute, self.compute.run)
        planned = rec.planned if rec.planned is not None else self._planned_bytes(epoch, ids, ep)
        if rec.ep is not None:  # the reads as the loader made them elsewhere (its workers), for the log
            ids, ep = rec.ids if rec.ids is not None else ids, rec.ep
        self.lanes[0].meta_events.extend(rec.open_events)
        for lane in self.lanes:  # every batch's reads have returned: log offsets, close the files each lane opened
            if self.trace:
                lane.record_offsets(ep)
            lane.close_all()
        m.wall_time_s = (perf() - t_epoch) / 1e9
        io1 = self.proc_io.snap() if self.proc_io else b""
        self._application_layer(m, rec)
        snaps = [lane.take_snaps() for lane in self.lanes]
        posix.epoch_layer(m, io0, io1, snaps, ep.lat, ep.size, per_sample=loader.reads_per_sample)
        if rec.posix is not None and self.fs_layer:  # counted in the processes that read, summed over them
            m.posix_reads, m.posix_bytes_read, m.os_read_bytes = rec.posix
            if rec.posix_sizes is not None:  # binned there as this process bins its own (posix.bin_spans)
                posix.fill_sizes(m, rec.posix_sizes)
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

    def _planned_bytes(self, epoch: int, ids: np.ndarray, ep: EpochArrays) -> int:
        """The bytes the epoch's reads through the lanes must return on this rank: the record bytes of its ids, or
        (load=whole) each file's whole-load bytes times it was loaded."""
        if not self.fmt.loads_whole:
            return int(self.record[ids].sum())
        loads = [fl for lane in self.lanes for fl in lane.whole_loads()]
        if not {f for f, n in loads if n} >= set(ep.fo):  # ep.fo: a list of ints
            raise KernelError(f"epoch {epoch}: a file read from was never loaded whole: the count is not "
                              "trustworthy")
        return int(sum(int(self.loads[f]) * n for f, n in loads))

    def _application_layer(self, m: RankEpoch, rec: EpochRecord) -> None:
        """Fill ``m``'s application layer from the loader's record: samples, bytes, operations, times in s, and the
        histogram of latencies (ns). Where the reads overlap each other or the loop, they count once, as Darshan
        counts them, and the I/O time is at most the epoch it lies in."""
        lanes = self.lanes
        m.samples = rec.samples
        m.bytes_read = rec.bytes_read
        m.read_ops = m.samples
        opens = rec.opens if rec.opens is not None else sum(lane.opens for lane in lanes)
        m.meta_ops = 2 * opens  # one open and one close per file opened (a library's own opens unseen)
        m.meta_time_s = (rec.meta_ns if rec.meta_ns is not None else sum(lane.meta_ns for lane in lanes)) / 1e9
        if rec.overlapped:
            m.meta_time_s = min(m.meta_time_s, m.wall_time_s)
            m.read_time_s = within_epoch(rec.read_s, m.meta_time_s, m.wall_time_s)
        else:
            m.read_time_s = rec.read_s
        m.wait_time_s = rec.wait_ns / 1e9
        m.compute_time_s = rec.compute_s
        m.hist = histogram(np.asarray(rec.lat_ns, dtype=np.int64)).tolist()

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
        self.loader.close()
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
            # what the loader records of itself (reader=torch: the DataLoader's knobs, every worker's opens)
            **self.loader.describe(),
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
    plan, nranks = k.plan, k.nranks
    keep = drop_last_keep(plan, k.point, nranks)
    want_samples = nranks * keep if keep is not None else plan.samples
    if not k.loader.checks_samples(keep):
        want_samples = None  # the loader checks its own (tf.data drops each rank's remainder; a sampler's ids)
    slack = k.loader.slack_bytes()
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
