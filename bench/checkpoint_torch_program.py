"""A real PyTorch checkpoint, save or load, with torch.distributed.checkpoint (DCP) on CPU ranks: no ddlio code.

Run by bench/checkpoint_vs_torch.py under ``torchrun --standalone --nproc_per_node N`` (gloo; torchrun sets
``OMP_NUM_THREADS=1`` per rank). Every rank holds each piece (``--pieces``: the bytes of each piece of a rank's
shard, the same on every rank) as a uint8 DTensor sharded ``Shard(0)`` over a CPU device mesh of all ranks, as
FSDP2 holds a model's and optimizer's states: rank ``r``'s local part is its shard of that piece, rows of
:data:`ROW` bytes (a weight's rows; DCP's DTensor offsets cost an ``arange`` over the sharded dimension, which a
1-D tensor of a billion bytes would make the checkpoint's largest cost) and the piece's last ``n % ROW`` bytes as
a 1-D DTensor of their own.

- ``--mode save``: fill every local part with seeded random bytes (untimed), barrier, then time ``dcp.save`` with
  DCP's own ``FileSystemWriter(sync_files=True)`` (each rank's ``__<rank>_0.distcp``, fsync'd; rank 0's
  ``.metadata`` after the ranks' writes);
- ``--mode load``: allocate the same DTensors and zero them (preallocated and touched, untimed: a model's
  tensors exist when it restores), empty the checkpoint's page cache (rank 0, ``posix_fadvise`` DONTNEED on every
  file, then ``mincore`` says what stayed resident), barrier, time ``dcp.load`` with ``FileSystemReader`` into
  them, then compare every byte with the seeded bytes (untimed). The cache is emptied here, right before the
  timed call, as ddlio's step empties it right before its restore: on a VM whose freed memory goes back to its
  host, memory freed seconds earlier is several times slower to take again than memory freed just now
  (docs/benchmarks.md), so where the eviction happens must be the same for both.

Rank 0 writes ``--out`` (JSON): each rank's seconds in the timed call and its payload bytes, and for a load the
fraction of the checkpoint's pages still resident after the eviction (``resident``, 0: emptied).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard

sys.path.insert(0, str(Path(__file__).resolve().parent / "fidelity"))
import pagecache  # bench/fidelity's page-cache helper: posix_fadvise and mincore, no ddlio code

#: bytes of a row of a piece's 2-D tensor
ROW = 4096


def local_bytes(n: int, seed: int, rank: int, piece: int) -> torch.Tensor:
    """Rank ``rank``'s part of piece ``piece``: ``n`` random bytes, the same for the same arguments."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + rank * 1009 + piece)
    return torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)


def files_of(directory: Path) -> list[str]:
    """The files of ``directory`` (not below it)."""
    return [str(p) for p in sorted(directory.iterdir()) if p.is_file()]


def residency(directory: Path) -> float:
    """The fraction of the pages of ``directory``'s files in the page cache, by ``mincore``
    (bench/fidelity/pagecache.py, the fidelity applications' helper: no ddlio code)."""
    return pagecache.resident_fraction(files_of(directory))


def evict(directory: Path) -> float:
    """Drop ``directory``'s files from the page cache (``fdatasync``, then ``posix_fadvise`` DONTNEED): the
    fraction of their pages still resident after."""
    return pagecache.evict(files_of(directory))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("save", "load"), required=True)
    ap.add_argument("--dir", required=True, help="the checkpoint's directory")
    ap.add_argument("--pieces", required=True, help="bytes of each piece of one rank's shard, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="rank 0's JSON result")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    sizes = [int(s) for s in args.pieces.split(",")]
    state: dict[str, DTensor] = {}
    for i, n in enumerate(sizes):  # each part its own tensor, as a model's parameters are (none a view)
        full = local_bytes(n, args.seed, rank, i) if args.mode == "save" else None
        rows = n // ROW
        for name, shape, lo, hi in ((f"piece{i}", (rows, ROW), 0, rows * ROW),
                                    (f"piece{i}_tail", (n - rows * ROW,), rows * ROW, n)):
            if hi > lo:
                local = (full[lo:hi].clone().view(shape) if full is not None  # the model's tensors exist, touched
                         else torch.empty(shape, dtype=torch.uint8).fill_(0))
                state[name] = DTensor.from_local(local, mesh, [Shard(0)], run_check=False)
        del full
    resident = evict(Path(args.dir)) if args.mode == "load" and rank == 0 else None
    dist.barrier()
    t0 = time.perf_counter()
    if args.mode == "save":
        dcp.save(state, storage_writer=dcp.FileSystemWriter(args.dir, sync_files=True))
    else:
        dcp.load(state, storage_reader=dcp.FileSystemReader(args.dir))
    seconds = time.perf_counter() - t0
    ok = True
    if args.mode == "load":  # untimed: every byte as saved
        for i, n in enumerate(sizes):
            full, rows = local_bytes(n, args.seed, rank, i), n // ROW
            if rows:
                ok &= torch.equal(state[f"piece{i}"].to_local().flatten(), full[:rows * ROW])
            if n % ROW:
                ok &= torch.equal(state[f"piece{i}_tail"].to_local(), full[rows * ROW:])
    said: list[dict | None] = [None] * world
    dist.all_gather_object(said, {"rank": rank, "seconds": seconds, "bytes": sum(sizes), "ok": ok,
                                  "pid": os.getpid()})
    if rank == 0:
        Path(args.out).write_text(json.dumps({"mode": args.mode, "ranks": said, "torch": torch.__version__,
                                              "resident": resident}))
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
