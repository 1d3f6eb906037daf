"""``reader=torch``: the same epoch read through PyTorch's ``torch.utils.data.DataLoader`` instead of ddlio's own
reader.

- The dataset is :class:`~experiments.kernel.torchset.FileSamples`, a map-style ``Dataset`` over ddlio's files.
- The sampler: with ``access=shared`` and ``shuffle=none|sample``, ``DistributedSampler(num_replicas=ranks,
  rank=rank, shuffle=(shuffle == "sample"), seed=seed, drop_last=drop_last)`` with ``set_epoch(epoch)`` every
  epoch: the ranks split each epoch's order, reshuffled per epoch from the seed (without ``drop_last`` it pads
  the order with repeats to a multiple of the ranks, as PyTorch does: the plan follows it). With ``fpp`` (a rank
  reads its own files) or ``shuffle=file``, a sampler over ddlio's own order of the rank's samples
  (:func:`~experiments.kernel.sampling.epoch_ids`), as a user's own ``Sampler`` gives it.
- ``DataLoader(batch_size, drop_last, num_workers=workload.read_threads, prefetch_factor=workload.prefetch,
  persistent_workers, pin_memory, multiprocessing_context=workload.start_method)``; the training loop waits for
  each batch (``next()``: the I/O-bound time, ``wait_time_s``), then runs the batch's compute as every reader does.

Measured in the processes that read: every batch comes back with its worker's own figures (the bytes its reader
calls returned, each sample's latency and start, opens, whole-file loads, and its thread's ``/proc/thread-self/io``
around the batch), summed here over every worker: bytes and read calls at both layers, opens per worker. The
samples that came back must be exactly the sampler's (each once per epoch across ranks when the count divides), and
the bytes exactly the plan's. A worker started by ``forkserver`` or ``spawn`` that has mpi4py's MPI loaded is an
error (it would have initialised MPI). PyTorch is imported only here, only for ``reader=torch``.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from ddlio.errors import KernelError
from experiments.config import TORCH_INSTALL_HINT, PointSpec
from experiments.kernel import posix
from experiments.kernel.lanes import EpochArrays, busy_ns
from experiments.kernel.sampling import epoch_ids

#: what reader=torch without PyTorch raises (the text is the configuration's: validate reports it too)
INSTALL_HINT = TORCH_INSTALL_HINT


def choose_device(torch: Any, asked: str) -> Any:
    """The device each batch is copied to: ``cuda`` where asked, or with ``auto`` where an accelerator is present
    (``torch.cuda.is_available()``); None (the batch stays in host memory, nothing copied) for ``cpu`` or ``auto``
    without one. ``cuda`` asked without one is a KernelError (validation cannot see the nodes' devices)."""
    if asked == "cpu":
        return None
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if asked == "cuda":
        raise KernelError("workload.device=cuda but PyTorch sees no CUDA device on this node "
                          "(torch.cuda.is_available() is False): use workload.device=auto or cpu")
    return None


def import_torch() -> Any:
    """PyTorch, or an ImportError that says how to install it."""
    try:
        import torch  # lazy: PyTorch
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e
    return torch


class OrderSampler:
    """A rank's own order of its samples each epoch (ddlio's :func:`epoch_ids`), with ``set_epoch`` as
    DistributedSampler has: for ``fpp`` and ``shuffle=file``."""

    def __init__(self, plan: Any, point: PointSpec, ranks: int, rank: int) -> None:
        self.plan, self.point, self.ranks, self.rank, self.epoch = plan, point, ranks, rank, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Any:
        return iter(epoch_ids(self.plan, self.point, self.epoch, self.ranks, self.rank).tolist())

    def __len__(self) -> int:
        return len(epoch_ids(self.plan, self.point, self.epoch, self.ranks, self.rank))


class TorchLoader:
    """One rank's DataLoader over the point's dataset, built once (persistent workers live across epochs)."""

    def __init__(self, plan: Any, point: PointSpec, ranks: int, rank: int, paths: list[str], buf_bytes: int,
                 trace: bool = False) -> None:
        self.torch = torch = import_torch()
        from experiments.kernel.torchset import FileSamples, collate, worker_init  # lazy: imports PyTorch

        w = point.workload
        self.plan, self.point, self.batch, self.drop = plan, point, int(w.batch_size), bool(w.drop_last)
        self.method = w.start_method
        self.dataset = FileSamples(plan.format, dict(plan.format_options), paths, plan.file_starts,
                                   tuple(plan.sample_shape), buf_bytes, trace)
        self.dataset.prime()  # the read path's lazy imports happen here, untimed (the kernel evicts file 0 after)
        if point.layout.access == "shared" and w.shuffle in ("none", "sample"):
            self.sampler: Any = torch.utils.data.DistributedSampler(
                self.dataset, num_replicas=ranks, rank=rank, shuffle=w.shuffle == "sample", seed=int(point.seed),
                drop_last=self.drop)
        else:
            self.sampler = OrderSampler(plan, point, ranks, rank)
        workers = int(w.read_threads)
        extra: dict[str, Any] = {}
        if workers:
            # timeout: a backstop behind the progress guard (which fires first, at cluster.hang_timeout_s, naming the
            # workers): a batch no worker delivers in twice that fails the epoch instead of waiting on
            extra = {"prefetch_factor": int(w.prefetch), "persistent_workers": bool(w.persistent_workers),
                     "multiprocessing_context": self.method, "worker_init_fn": worker_init,
                     "timeout": 2 * float(point.cluster.hang_timeout_s) + 5}
        self.loader = torch.utils.data.DataLoader(self.dataset, batch_size=self.batch, sampler=self.sampler,
                                                  drop_last=self.drop, num_workers=workers, collate_fn=collate,
                                                  pin_memory=bool(w.pin_memory), **extra)
        self.record = plan.record_bytes()
        #: where each batch goes after the DataLoader, as a training step moves it to its model (None: stays)
        self.device = choose_device(torch, str(w.device))
        self.non_blocking = bool(w.pin_memory) and self.device is not None
        #: per epoch, the seconds the batches' copies to :attr:`device` took (in the loop's time, apart from its
        #: wait for the DataLoader and its compute)
        self.copy_s: list[float] = []
        #: per epoch, the files each worker process opened (in the order the workers first delivered a batch)
        self.opens_per_worker: list[list[int]] = []

    def planned_ids(self) -> list[int]:
        """The ids this epoch's batches must hold: the sampler's order, its last partial batch dropped with
        drop_last (call after ``set_epoch``)."""
        ids = list(iter(self.sampler))
        if self.drop:
            ids = ids[: len(ids) // self.batch * self.batch]
        return ids

    def run_epoch(self, epoch: int, compute: list[float], step: Any, watch: Any = None, ep: Any = None,
                  fault: str | None = None, rank: int = 0) -> dict[str, Any]:
        """Iterate one epoch: per batch the wait for ``next()`` (ns) and the batch's compute (``compute``, s;
        ``step(seconds)`` runs it and returns its wall time). Returns the figures the kernel stores (bytes, the
        plan, samples, per-sample latencies (ns), the loop's wait (ns), compute (s), opens, both layers' reads).
        ``watch`` (with ``ep``, the kernel's arrays of the epoch): the progress guard, told of every batch the
        DataLoader delivers, so a hung, stopped or dead worker fails the point within ``cluster.hang_timeout_s``;
        ``fault``: the ``DDLIO_FAULT`` the process that reads injects (:meth:`FileSamples.arm`)."""
        self.sampler.set_epoch(epoch)
        want = self.planned_ids()
        self.dataset.arm(fault, rank)  # before the workers start: they take the dataset as it is now
        perf = time.perf_counter_ns
        parts: list[dict[str, Any]] = []
        wait = copy = 0
        compute_s = 0.0
        with warnings.catch_warnings():  # pin_memory without an accelerator: PyTorch says so, and skips it
            warnings.filterwarnings("ignore", message=".*pin_memory.*")
            it = iter(self.loader)
            if watch is not None:
                pids = [w.pid for w in getattr(it, "_workers", [])]
                watch.start_epoch(epoch, ep, [], window=1, where=lambda: self._stalled(pids, watch.batches))
            b = 0
            while True:
                t = perf()
                try:
                    part = next(it)
                except StopIteration:
                    wait += perf() - t
                    break
                except RuntimeError as e:  # a worker that died: PyTorch says which
                    raise KernelError(f"epoch {epoch}: the DataLoader failed after {b} batches: "
                                      f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
                wait += perf() - t
                copy += self._to_device(part.pop("x"))  # the batch the model would train on, on its device
                parts.append(part)
                c = compute[b] if b < len(compute) else (compute[-1] if compute else 0.0)
                if c > 0:
                    if watch is not None:
                        watch.computing(c)
                    compute_s += step(c)
                if watch is not None:
                    watch.batch_done()
                b += 1
            del it  # non-persistent workers end with the epoch
        self.dataset.arm(None)
        self.copy_s.append(copy / 1e9)
        return self._figures(epoch, want, parts, wait, compute_s)

    def _to_device(self, x: Any) -> int:
        """Copy batch ``x`` to :attr:`device` as a training step does (``non_blocking`` from pinned memory), and
        wait for the copy to land (a step's first kernel would); returns the ns it took, 0 where nothing is
        copied."""
        if self.device is None:
            return 0
        t = time.perf_counter_ns()
        xs = x if isinstance(x, list) else [x]
        moved = [v.to(self.device, non_blocking=self.non_blocking) for v in xs]
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)
        del moved
        return time.perf_counter_ns() - t

    def _stalled(self, pids: list[int], batches: int) -> str:
        """What the loop waited for when the progress guard fired: the DataLoader's next batch, from which
        processes (``pids``: its workers)."""
        if not pids:
            return (f"the DataLoader delivered no batch after its first {batches} (it reads in the rank's own "
                    "process, workload.read_threads=0: a read hung)")
        return (f"the DataLoader delivered no batch after its first {batches} (its {len(pids)} worker processes, "
                f"pids {', '.join(map(str, pids))}: one hung, stopped or died)")

    def _figures(self, epoch: int, want: list[int], parts: list[dict[str, Any]], wait: int,
                 compute_s: float) -> dict[str, Any]:
        got = [i for p in parts for i in p["ids"]]
        if sorted(got) != sorted(want):
            raise KernelError(f"epoch {epoch}: the DataLoader delivered {len(got)} samples, the sampler's plan is "
                              f"{len(want)} (or other ids): the measurement is not trustworthy")
        if self.method != "fork" and any(p["mpi"] for p in parts):
            raise KernelError(f"a DataLoader worker started by {self.method} has mpi4py's MPI loaded: it must never "
                              "initialise MPI")
        # each batch's read calls, binned by size as the rank's own are (posix.bin_spans: one call per sample of its
        # size where the layers agree, else by the mean; a file's open apart)
        hist = posix.SizeHistogram.empty()
        calls = nbytes = os_bytes = 0
        for p in parts:
            texts = p["snaps"][0]
            posix.bin_spans(hist, p["snaps"], p["size"], p["lat"])
            for c, n in posix.sample_deltas(texts):
                calls, nbytes = calls + c, nbytes + n
            os_bytes += posix.parse_all(texts[-1])[2] - posix.parse_all(texts[0])[2]
        by_worker: dict[int, int] = {}
        for p in parts:
            by_worker[p["pid"]] = by_worker.get(p["pid"], 0) + p["opens"]
        self.opens_per_worker.append(list(by_worker.values()))
        lat = [x for p in parts for x in p["lat"]]
        start = [x for p in parts for x in p["start"]]
        return {"bytes": sum(p["bytes"] for p in parts), "planned": self._planned(epoch, want,
                parts), "samples": len(got), "lat": lat, "start": start, "wait_ns": wait, "compute_s": compute_s,
                "opens": sum(p["opens"] for p in parts), "meta_ns": sum(p["meta_ns"] for p in parts),
                "posix_reads": calls, "posix_bytes": nbytes, "os_read_bytes": os_bytes, "size_hist": hist,
                "read_ns": busy_ns(np.asarray(start, dtype=np.int64), np.asarray(lat, dtype=np.int64)),
                "workers": sorted({p["pid"] for p in parts}), "parts": parts, "ids": got}

    def _planned(self, epoch: int, want: list[int], parts: list[dict[str, Any]]) -> int:
        """Bytes the reads must return: the record bytes of the sampler's ids, or (load=whole) each file's
        whole-load bytes times it was loaded in some worker; every file read from must have been loaded there."""
        from experiments.formats import get_format  # lazy: only the whole-load check needs the format

        if not get_format(self.plan.format, **self.plan.format_options).loads_whole:
            return int(self.record[np.asarray(want, dtype=np.int64)].sum()) if want else 0
        loads = self.plan.load_bytes()
        by_pid: dict[int, tuple[set[int], set[int]]] = {}
        total = 0
        for p in parts:
            read, loaded = by_pid.setdefault(p["pid"], (set(), set()))
            read.update(p["files"])
            loaded.update(f for f, _ in p["loads"])
            total += sum(int(loads[f]) * n for f, n in p["loads"])
        if any(not loaded >= read for read, loaded in by_pid.values()):
            raise KernelError(f"epoch {epoch}: a worker read from a file it never loaded whole: the count is not "
                              "trustworthy")
        return total

    def info(self) -> dict[str, Any]:
        """What the rank's result records of its DataLoader: its knobs and the opens of each worker per epoch."""
        w = self.point.workload
        return {"workers": int(w.read_threads), "prefetch_factor": int(w.prefetch) if w.read_threads else None,
                "persistent_workers": bool(w.persistent_workers), "pin_memory": bool(w.pin_memory),
                "device": str(self.device) if self.device is not None else "cpu",
                **({"device_copy_time_s": self.copy_s} if self.device is not None else {}),
                "start_method": self.method, "sampler": type(self.sampler).__name__,
                "opens_per_worker": self.opens_per_worker}

    def close(self) -> None:
        """End the persistent workers (if any) and close this process's files (workers=0)."""
        self.loader._iterator = None  # PyTorch's own iterator holds the persistent workers; dropping it ends them
        self.dataset.close()

    def epoch_arrays(self, out: dict[str, Any]) -> EpochArrays:
        """The epoch's reads in the order they were made, for the access log (latencies ns, starts on the
        monotonic clock every process shares)."""
        ep = EpochArrays(self.plan, np.asarray(out["ids"], dtype=np.int64), trace=True)
        parts = out["parts"]
        ep.lat = [x for p in parts for x in p["lat"]]
        ep.start = [x for p in parts for x in p["start"]]
        ep.size = [x for p in parts for x in p["size"]]
        ep.offset = [x for p in parts for x in p["offset"]] or [-1] * len(ep.lat)
        return ep

    def open_events(self, out: dict[str, Any]) -> list[tuple[int, int, int, str]]:
        """Every worker's opens (start ns, duration ns, file, "open") for the access log."""
        return [(t, dt, f, "open") for p in out["parts"] for t, dt, f in p["open_events"]]
