"""The checkpoint kind's MPI program, one process per rank: ``python -m experiments.kinds.checkpoint.step SPEC.json``.

Every rank holds its shard in memory (a trainer's state is in memory when it saves it) and, for each of the plan's
checkpoints, fills it with that checkpoint's bytes (untimed: a training step changes the state), then all ranks
save at the same instant (a barrier): create or open its file, write the shard in calls of ``transfer_size``
bytes at its offset, ``fsync``, close; with an index (dcp, shared) rank 0 writes ``.metadata`` once every rank's
data is written, and the save ends on every rank when it is (DCP's finish step). Bytes are counted from what the
write calls returned; each call is timed, and the open, close and fsync apart. The layouts torch writes
(``access=fpp``: dcp, torch) checksum each piece before writing it, as ``torch.save`` does (timed apart).

After the last save every node leader empties the page cache of every checkpoint file (and a client's own cache,
ceph-fuse's) and measures what stayed resident (mincore), as for datasets. Then each checkpoint is restored: rank 0
reads the index (dcp, shared) and hands it on, and rank ``r`` reads rank ``r + read_shift``'s shard in calls of
``transfer_size`` bytes, each piece into a new buffer then copied into its state (timed apart), as DCP's load and
``torch.load`` + ``load_state_dict`` do, or with ``restore_into=state`` straight into the state. What torch does, and
where: :mod:`experiments.kinds.checkpoint.calls`. The restored bytes are compared with what was written after the
timed phase.

Rank 0 writes the result (JSON) the kind (:mod:`experiments.kinds.checkpoint`) stores: per checkpoint, the bytes,
the slowest rank's time in its calls (Darshan's view), the largest per-rank duration (MLPerf's), fsync and
metadata time, the checksums' and copies' time, latency histograms and the /proc counters' deltas.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from ddlio.errors import KernelError
from ddlio.mpistep import announce_started, last_words
from ddlio.plain import write_json_atomic
from experiments.formats.pcg64 import random_bytes
from experiments.kernel.guards import guarded_barrier, inject
from experiments.kinds.checkpoint.calls import Counter, Phase, read_range, write_file
from experiments.kinds.checkpoint.plan import METADATA, CheckpointPlan
from lustre.io import StorageIO
from lustre.registry import io_for

_ns = time.perf_counter_ns
#: bytes filled per call of the bit generator (bounds the temporary it allocates)
FILL_CHUNK = 64 << 20


def fill(buf: np.ndarray, seed: int, k: int, shard: int) -> None:
    """Fill ``buf`` (uint8) with checkpoint ``k``'s bytes of ``shard``: random (incompressible), deterministic in
    (seed, k, shard), so a restore can be checked against them without keeping a copy (the PCG64 stream datasets
    are generated from: :func:`experiments.formats.pcg64.random_bytes`)."""
    random_bytes((seed, k, shard), len(buf), out=buf)


#: seconds a rank waits for the others at a barrier before it aborts the step (the point's cluster.hang_timeout_s)
HANG_TIMEOUT_S = [600.0]


def together(comm: Any, what: str) -> None:
    """All ranks at ``what``: a barrier that gives up after :data:`HANG_TIMEOUT_S` (a hung or dead rank aborts the
    step, saying where), then a plain one, so that the ranks leave it together to start a timed phase."""
    guarded_barrier(comm, HANG_TIMEOUT_S[0], what)
    comm.Barrier()


def save(comm: Any, io: StorageIO, plan: CheckpointPlan, k: int, buf: np.ndarray, counter: Counter
         ) -> dict[str, Any]:
    """Checkpoint ``k`` by this rank, timed from a barrier all ranks leave together: its figures."""
    rank = comm.rank
    d = plan.directory(k)
    mine = buf[:plan.shard_bytes[rank]]
    phase = Phase()
    c0 = counter.now()
    together(comm, f"the start of checkpoint {k}'s save")
    t0 = _ns()
    write_file(io, phase, d / plan.data_file(rank), mine, plan.offset(rank), plan.transfer_size,
               plan.access == "shared", plan.pieces_of(rank) if plan.serialised else ())
    if plan.indexed:  # the coordinator writes the index once every rank's data is written (DCP's finish step)
        comm.gather(phase.bytes, root=0)
        if rank == 0:
            index = np.frombuffer(plan.index(), dtype=np.uint8)
            write_file(io, phase, d / METADATA, index, 0, plan.transfer_size, False)
        comm.bcast(None, root=0)
    end = _ns()
    return phase.figures(end - t0, (c0, counter.now()))


def restore(comm: Any, io: StorageIO, plan: CheckpointPlan, k: int, buf: np.ndarray, counter: Counter
            ) -> dict[str, Any]:
    """Restore checkpoint ``k`` on this rank (rank ``r`` reads the shard of ``plan.source(r)``), timed from a
    barrier: its figures."""
    rank, src = comm.rank, plan.source(comm.rank)
    d = plan.directory(k)
    want = plan.shard_bytes[src]
    phase = Phase()
    c0 = counter.now()
    together(comm, f"the start of checkpoint {k}'s restore")
    t0 = _ns()
    if plan.indexed:
        index = _read_index(io, phase, d / METADATA, plan.transfer_size) if rank == 0 else None
        index = comm.bcast(index, root=0)
        entry = index["shards"][src]
        if entry["file"] != plan.data_file(src) or sum(p[2] for p in entry["pieces"]) != want:
            raise KernelError(f"checkpoint {k}: its index does not describe shard {src} as written")
    path = d / plan.data_file(src)
    fd = phase.timed_meta(io.open, path)
    phase.files += 1
    try:
        base, at = plan.offset(src), 0
        for _name, size in plan.pieces[src]:
            what = f"checkpoint {k}: rank {rank} read of shard {src} in {path}"
            if not plan.staging:  # restore_into=state: straight into the state's memory
                read_range(io, phase, fd, memoryview(buf)[at:at + size], base + at, plan.transfer_size, what)
                at += size
                continue
            # as DCP's load and torch.load then load_state_dict do: each piece is read into a new tensor, then
            # copied into the model's state (the copy is part of the restore's duration, not of its calls' time;
            # calls.py says where torch does it)
            staging = trainer_memory(size)
            read_range(io, phase, fd, memoryview(staging), base + at, plan.transfer_size, what)
            phase.copy(buf[at:at + size], staging)
            del staging
            at += size
    finally:
        phase.timed_meta(io.close, fd)
    end = _ns()
    return phase.figures(end - t0, (c0, counter.now()))


def _read_index(io: StorageIO, phase: Phase, path: Path, transfer: int) -> dict[str, Any]:
    fd = phase.timed_meta(io.open, path)
    phase.files += 1
    try:
        raw = bytearray(io.size(fd))
        read_range(io, phase, fd, memoryview(raw), 0, transfer, f"the index {path}")
    finally:
        phase.timed_meta(io.close, fd)
    return json.loads(bytes(raw))


def verify(plan: CheckpointPlan, k: int, src: int, buf: np.ndarray) -> None:
    """Compare the restored shard in ``buf`` with the bytes checkpoint ``k`` wrote for it (regenerated a chunk at
    a time, after the timed restore). Raises :class:`KernelError` at the first difference."""
    want = plan.shard_bytes[src]
    expect = np.empty(min(want, FILL_CHUNK), dtype=np.uint8)
    bits = np.random.PCG64([plan.seed, k, src])
    for start in range(0, want, FILL_CHUNK):
        n = min(FILL_CHUNK, want - start)
        words = n // 8
        chunk = expect[:n]
        if words:
            chunk[:words * 8].view(np.uint64)[:] = bits.random_raw(words)
        if n - words * 8:
            chunk[words * 8:] = np.frombuffer(bits.random_raw(1).tobytes()[:n - words * 8], dtype=np.uint8)
        got = buf[start:start + n]
        if not np.array_equal(got, chunk):
            at = start + int(np.argmax(got != chunk))
            raise KernelError(f"checkpoint {k}: the shard of rank {src} read back differs from what was written, "
                              f"first at byte {at} of {want}")


def empty_caches(comm: Any, plan: CheckpointPlan) -> dict[str, Any]:
    """On every node leader: empty the caches of every checkpoint's files and measure what stayed resident; the
    worst node's report (``cache``: cold or unknown, ``resident``: 0..1, ``note``)."""
    from mpi4py import MPI  # lazy: MPI starts up on import (only in an MPI step)

    from experiments.kernel.cachepolicy import cache_state, prepare_cache  # lazy: only a point that restores

    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    files = [plan.directory(k) / name for k in range(plan.count) for name in plan.files()]
    report = prepare_cache("cold", 0, files, node.rank == 0)
    if report is not None:
        report["memory"] = _memory_total()
    reports = [r for r in comm.allgather(report) if r is not None]
    label, _before, after, note = cache_state("cold", reports)
    memory = max((r["memory"] or 0 for r in reports), default=0)
    # MLPerf Storage's alternative to emptying the caches: more checkpoint bytes than 3x a node's memory
    three = bool(memory) and plan.checkpoint_bytes() * plan.count > 3 * memory
    return {"cache": label, "resident": after, "note": note, "nodes": len(reports), "node_memory": memory,
            "over_3x_memory": three}


def _memory_total() -> int | None:
    """This node's memory (``MemTotal``, bytes), None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    except (OSError, ValueError, StopIteration):
        return None


def fault_here(rank: int) -> str | None:
    """Fault injection for testing failure handling, as the kernel's: ``DDLIO_FAULT=crash@RANK[:checkpoint]``,
    ``kill@...`` or ``hang@...`` makes that rank crash, be killed or hang before its first save."""
    kind, _, where = os.environ.get("DDLIO_FAULT", "").partition("@")
    r, _, what = where.partition(":")
    return kind if kind and r.isdigit() and int(r) == rank and what in ("", "checkpoint") else None


def trainer_memory(nbytes: int) -> np.ndarray:
    """``nbytes`` bytes of fresh private anonymous memory, in the 4 KiB pages torch's CPU allocator gives a tensor
    (``posix_memalign``, no ``MADV_HUGEPAGE`` unless ``THP_MEM_ALLOC_ENABLE`` is set): the trainer's state and the
    restore's new buffers. numpy's own allocator asks for transparent huge pages for large arrays, and on a VM
    whose free memory was handed back to its host a cold read into such fresh pages ran at a quarter to a half of
    one into 4 KiB pages (docs/benchmarks.md, the restore beside torch.distributed.checkpoint)."""
    if nbytes <= 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE), dtype=np.uint8)  # unmapped with the array


def run(comm: Any, plan: CheckpointPlan) -> dict[str, Any] | None:
    """This rank's part of the point: the saves, the caches emptied, the restores; rank 0 returns every rank's
    figures, the others None."""
    rank = comm.rank
    io = io_for(plan.root)
    counter = Counter(io)
    size = max(plan.shard_bytes[rank], plan.shard_bytes[plan.source(rank)] if plan.restore else 0)
    buf = trainer_memory(max(1, size))
    saves, restores = [], []
    fault = fault_here(rank)
    for k in range(plan.count):
        fill(buf[:plan.shard_bytes[rank]], plan.seed, k, rank)
        if fault and k == 0:
            inject(fault, rank)
        saves.append(save(comm, io, plan, k, buf, counter))
    guarded_barrier(comm, HANG_TIMEOUT_S[0], "the end of the saves")
    written = time.time()
    cache: dict[str, Any] = {}
    read_start = None
    if plan.restore:
        cache = empty_caches(comm, plan)
        for k in range(plan.count):
            read_start = read_start or time.time()
            restores.append(restore(comm, io, plan, k, buf, counter))
            verify(plan, k, plan.source(rank), buf)  # untimed, after the restore
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()  # a Slurm node's name, as the kernel's
    everyone = comm.gather({"rank": rank, "host": host, "saves": saves, "restores": restores},
                           root=0)
    if rank != 0:
        return None
    return {"ranks": everyone, "cache": cache, "written_unix": written,
            "write_to_read_s": (read_start - written) if read_start else None}


def main(argv: list[str]) -> int:
    """``python -m experiments.kinds.checkpoint.step SPEC.json``: SPEC holds ``plan`` and ``result_path``."""
    spec = json.loads(Path(argv[0]).read_text())
    plan = CheckpointPlan.from_dict(spec["plan"])
    HANG_TIMEOUT_S[0] = float(spec.get("hang_timeout_s", HANG_TIMEOUT_S[0]))
    from mpi4py import MPI  # lazy: MPI starts up on import (only in an MPI step)

    comm = MPI.COMM_WORLD
    announce_started(comm)
    if comm.size != plan.ranks:
        print(f"ddlio checkpoint: the plan is for {plan.ranks} ranks and {comm.size} started", file=sys.stderr)
        return 3
    try:
        result = run(comm, plan)
    except KernelError as e:
        last_words(f"ddlio checkpoint rank {comm.rank}: {e}")
        comm.Abort(3)
        return 3
    except Exception as e:
        last_words(f"ddlio checkpoint rank {comm.rank} failed: {type(e).__name__}: {e}")
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(2)
        return 2
    if result is not None:
        result["mpi_library"] = MPI.Get_library_version().strip().splitlines()[0]
        write_json_atomic(spec["result_path"], result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
