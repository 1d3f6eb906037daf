"""What a checkpoint point writes and reads, worked out once from its options (``checkpoint.*``, a preset of
conf/checkpoint/ with its overrides) and the point's ranks and access: each rank's shard (bytes, and the named
pieces it holds, by :mod:`experiments.kinds.checkpoint.shards`' arithmetic, scaled to ``checkpoint.size`` when one
is given), the files a checkpoint has, where each shard lives in them, and whose shard a rank restores.

The layouts (``access`` × ``checkpoint.layout``), as the trainers write them:

- ``fpp`` + ``dcp``: torch.distributed.checkpoint's FileSystemWriter, one ``__<rank>_0.distcp`` file per rank
  holding its shard, then rank 0's ``.metadata`` (the index of every piece: file, offset, bytes), written after
  every rank's data (the coordinator writes it once the ranks' write results are gathered);
- ``fpp`` + ``torch``: one ``torch.save`` file per rank, ``rank<rank>.pt``, and no index;
- ``shared`` (N-1): one ``checkpoint.distcp`` file that every rank writes its shard into at its offset (the shards'
  prefix sums), and rank 0's ``.metadata`` as for ``dcp``.

:func:`check_options` is validation's check of the options (no byte is written before it passes). This module
imports the standard library and the shard arithmetic only: validation imports it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ddlio.units import format_size, parse_size
from experiments.kinds.checkpoint.shards import (
    ModelShape,
    Parallelism,
    datatype_bytes,
    parallelism_problem,
    rank_pieces,
    scaled,
)

#: the file layouts of access=fpp (access=shared writes one file, as N-1 does)
LAYOUTS = ("dcp", "torch")
RESTORES = ("all", "none")
#: where a restore reads each piece: a new buffer then copied into the state (DCP's load, torch.load), or the state
RESTORE_INTO = ("staging", "state")
#: the options the schema adds to a preset's model and parallelism (each with its meaning in docs/checkpoint.md)
RUN_OPTIONS = ("size", "layout", "transfer_size", "count", "restore", "read_shift", "restore_into")
#: rank 0's index of a checkpoint (dcp and shared)
METADATA = ".metadata"
#: the one file of access=shared
SHARED_FILE = "checkpoint.distcp"
#: largest transfer (bytes of one write or read call) a point may ask for; the kernel holds no more in one call
MAX_TRANSFER = 2 * 1024**3
#: most checkpoints one point writes in a row
MAX_COUNT = 1000
#: the share of the node's available memory a point's shards may take (the rest: the ranks' interpreters, MPI)
MEMORY_SHARE = 0.8


def model_of(options: Mapping[str, Any]) -> ModelShape:
    """The model's dimensions of the stored options."""
    return ModelShape(**{f.name: options[f.name] for f in fields(ModelShape)})


def parallelism_of(options: Mapping[str, Any]) -> Parallelism:
    """The parallelism (tensor, pipeline, ZeRO stage) of the stored options."""
    return Parallelism(**{f.name: options[f.name] for f in fields(Parallelism)})


@dataclass(frozen=True)
class CheckpointPlan:
    """One point's checkpoints: sizes in bytes, ``root`` the directory that holds its checkpoints
    (``ckpt-<k>/`` each, a fresh one per checkpoint)."""

    name: str
    access: str
    layout: str
    ranks: int
    #: each rank's pieces (name, bytes), in the order it writes them
    pieces: tuple[tuple[tuple[str, int], ...], ...]
    transfer_size: int
    count: int
    restore: bool
    read_shift: int
    seed: int
    root: str
    #: whether a restore reads each piece into a new buffer and copies it into the state (restore_into=staging)
    staging: bool = True

    @classmethod
    def build(cls, options: Mapping[str, Any], ranks: int, access: str, seed: int, root: str | os.PathLike
              ) -> CheckpointPlan:
        """The plan of stored ``options`` (sizes in bytes) on ``ranks`` ranks with ``access``."""
        pieces = rank_pieces(model_of(options), parallelism_of(options), ranks)
        size = int(options.get("size") or 0)
        if size:
            flat = [b for rank in pieces for _, b in rank]
            it = iter(scaled(flat, size))
            pieces = [[(n, next(it)) for n, _ in rank] for rank in pieces]
        return cls(str(options.get("name", "custom")), access, str(options.get("layout", "dcp")), ranks,
                   tuple(tuple((str(n), int(b)) for n, b in rank) for rank in pieces),
                   int(options["transfer_size"]), int(options["count"]), options.get("restore", "all") == "all",
                   int(options.get("read_shift", 0)), int(seed), str(root),
                   options.get("restore_into", "staging") == "staging")

    # ------------------------------------------------------------------ sizes
    @property
    def shard_bytes(self) -> tuple[int, ...]:
        """Each rank's shard, bytes."""
        return tuple(sum(b for _, b in rank) for rank in self.pieces)

    @property
    def shard_total(self) -> int:
        """One checkpoint's shards, all ranks (bytes; the index file aside)."""
        return sum(self.shard_bytes)

    def offset(self, rank: int) -> int:
        """Where ``rank``'s shard starts in its file (bytes): its prefix sum in the shared file, else 0."""
        return sum(self.shard_bytes[:rank]) if self.access == "shared" else 0

    def pieces_of(self, rank: int) -> tuple[int, ...]:
        """``rank``'s pieces, bytes each, in the order it writes them."""
        return tuple(b for _, b in self.pieces[rank])

    @property
    def serialised(self) -> bool:
        """Whether each piece is a ``torch.save`` record, checksummed as it is written (``access=fpp``: the dcp and
        torch layouts; N-1 is no file torch writes)."""
        return self.access != "shared"

    @property
    def indexed(self) -> bool:
        """Whether rank 0 writes the ``.metadata`` index (dcp and shared)."""
        return self.access == "shared" or self.layout == "dcp"

    # ------------------------------------------------------------------ files
    def directory(self, k: int) -> Path:
        """Checkpoint ``k``'s directory."""
        return Path(self.root) / f"ckpt-{k}"

    def data_file(self, rank: int) -> str:
        """The name of the file ``rank``'s shard goes to."""
        if self.access == "shared":
            return SHARED_FILE
        return f"__{rank}_0.distcp" if self.layout == "dcp" else f"rank{rank}.pt"

    def files(self) -> list[str]:
        """The names of one checkpoint's files (the index last)."""
        names = sorted({self.data_file(r) for r in range(self.ranks)}, key=lambda n: (len(n), n))
        return names + ([METADATA] if self.indexed else [])

    def source(self, rank: int) -> int:
        """Whose shard ``rank`` restores: rank ``(rank + read_shift) mod ranks`` (the failover case)."""
        return (rank + self.read_shift) % self.ranks

    def index(self) -> bytes:
        """The ``.metadata`` index rank 0 writes: every piece's file, offset and bytes (JSON, as DCP's metadata
        maps each tensor to its storage; its size grows with the pieces)."""
        shards = []
        for r, rank in enumerate(self.pieces):
            at = self.offset(r)
            items = []
            for name, b in rank:
                items.append([name, at, b])
                at += b
            shards.append({"rank": r, "file": self.data_file(r), "pieces": items})
        return json.dumps({"checkpoint": self.name, "ranks": self.ranks, "shards": shards},
                          separators=(",", ":")).encode()

    def checkpoint_bytes(self) -> int:
        """One checkpoint's bytes on disk: the shards and the index (bytes)."""
        return self.shard_total + (len(self.index()) if self.indexed else 0)

    def to_dict(self) -> dict[str, Any]:
        """The plan as the MPI step reads it (JSON)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckpointPlan:
        """The plan :meth:`to_dict` wrote."""
        out = dict(d)
        out["pieces"] = tuple(tuple((str(n), int(b)) for n, b in rank) for rank in d["pieces"])
        return cls(**out)


# ---------------------------------------------------------------------------------------------- validation
def _int(problems: list[str], key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        problems.append(f"checkpoint.{key}={value!r} must be an integer in {lo}..{hi}")
        return lo
    return value


def _size(problems: list[str], key: str, value: Any, lo: int, hi: int, zero_ok: bool = False) -> int:
    try:
        n = parse_size(value)
    except ValueError as e:
        problems.append(f"checkpoint.{key}: {e}")
        return lo
    if zero_ok and n == 0:
        return 0
    if not lo <= n <= hi:
        problems.append(f"checkpoint.{key}={value} ({n} bytes) is out of range: must be {format_size(lo)} .. "
                        f"{format_size(hi)}" + (" (0 = the preset's own size)" if zero_ok else ""))
        return lo
    return n


def normalise(problems: list[str], options: Mapping[str, Any]) -> dict[str, Any]:
    """The options with sizes in bytes and every value checked (a problem per wrong one, naming the valid
    values), in the schema's order."""
    out = dict(options)
    for f in fields(ModelShape):
        if f.type in ("int", int):
            out[f.name] = _int(problems, f.name, options.get(f.name), 1, 2**40)
        else:  # a datatype's name
            try:
                datatype_bytes(str(options.get(f.name)))
            except ValueError as e:
                problems.append(f"checkpoint.{f.name}: {e}")
    for name in ("tensor", "pipeline"):
        out[name] = _int(problems, name, options.get(name), 1, 1 << 20)
    out["zero_stage"] = _int(problems, "zero_stage", options.get("zero_stage"), 0, 3)
    out["size"] = _size(problems, "size", options.get("size", 0), 4096, 1 << 60, zero_ok=True)
    if options.get("layout") not in LAYOUTS:
        problems.append(f"checkpoint.layout={options.get('layout')!r} is unknown: choose one of "
                        f"{', '.join(LAYOUTS)} (dcp: torch.distributed.checkpoint's files; torch: one torch.save "
                        "file per rank)")
    out["transfer_size"] = _size(problems, "transfer_size", options.get("transfer_size"), 4096, MAX_TRANSFER)
    out["count"] = _int(problems, "count", options.get("count"), 1, MAX_COUNT)
    if options.get("restore") not in RESTORES:
        problems.append(f"checkpoint.restore={options.get('restore')!r} is unknown: choose one of "
                        f"{', '.join(RESTORES)}")
    out["read_shift"] = _int(problems, "read_shift", options.get("read_shift", 0), 0, 1 << 30)
    into = options.get("restore_into", "staging")
    if into not in RESTORE_INTO:
        problems.append(f"checkpoint.restore_into={into!r} is unknown: choose one of {', '.join(RESTORE_INTO)} "
                        "(staging: each piece into a new buffer, then copied into the state, as DCP's load does; "
                        "state: straight into the state)")
    if into == "staging":  # the default stays out of the stored options, so earlier points keep their keys
        out.pop("restore_into", None)
    return out


def check_options(problems: list[str], options: Mapping[str, Any], ranks: int, ppn: int, access: str,
                  data_root: Path | None, seed: int, memory: int | None) -> dict[str, Any]:
    """Validation of a ``kind=checkpoint`` point's options: every problem (added to ``problems``, each naming the
    valid values) before anything is written — values out of range, a parallelism the ranks cannot hold, the
    torch layout on a shared file, a read shift that reads a rank's own shard (or with one rank), too little free
    space at ``data_root`` for ``count`` checkpoints, shards larger than ``memory`` (bytes available to the ranks
    of one node; None: not known here) can hold. The stored options (sizes in bytes)."""
    before = len(problems)
    out = normalise(problems, options)
    if len(problems) > before or ranks < 1:
        return out
    why = parallelism_problem(parallelism_of(out), ranks, model_of(out))
    if why:
        problems.append(why)
        return out
    if access == "shared" and out["layout"] == "torch":
        problems.append("checkpoint.layout=torch writes one torch.save file per rank, and access=shared writes one "
                        "file: use access=fpp with checkpoint.layout=torch, or checkpoint.layout=dcp")
    shift = out["read_shift"]
    if shift and ranks == 1:
        problems.append(f"checkpoint.read_shift={shift} needs two ranks or more (one rank can only restore its own "
                        "shard): raise ppn or nodes, or set checkpoint.read_shift=0")
    elif shift and shift % ranks == 0:
        problems.append(f"checkpoint.read_shift={shift} with {ranks} ranks restores every rank's own shard "
                        f"({shift} mod {ranks} = 0): use 1..{ranks - 1} (ppn={ppn} to restore from the next node)")
    plan = CheckpointPlan.build(out, ranks, access, seed, data_root or ".")
    need = plan.checkpoint_bytes() * out["count"]
    if data_root is not None:
        free = _free_bytes(data_root)
        if free is not None and need > free:
            problems.append(f"{out['count']} checkpoint(s) of {format_size(plan.checkpoint_bytes())} need "
                            f"{format_size(need)} and the file system at data_root has {format_size(free)} free: "
                            "lower checkpoint.size or checkpoint.count, or free space")
    if memory is not None:
        # a rank holds its shard, and while restoring the piece it is reading (before it is copied into the state)
        held = [b + (max((p for _, p in plan.pieces[plan.source(r)]), default=0) if plan.staging else 0)
                for r, b in enumerate(plan.shard_bytes)]
        node = max(sum(held[n * ppn:(n + 1) * ppn]) for n in range(max(1, ranks // max(1, ppn))))
        if node > memory * MEMORY_SHARE:
            problems.append(f"the ranks of one node hold {format_size(node)} of shards in memory (a trainer's state "
                            f"is in memory when it saves it), more than {MEMORY_SHARE:.0%} of the "
                            f"{format_size(memory)} available there: lower checkpoint.size, or spread the ranks "
                            "over more nodes")
    return out


def _free_bytes(path: Path) -> int | None:
    """Free bytes (for an unprivileged user) of the file system holding ``path`` or its nearest existing parent."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize

