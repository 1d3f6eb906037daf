"""The timed calls of the checkpoint kind's MPI step (:mod:`experiments.kinds.checkpoint.step`): a rank's figures of
one save or restore (:class:`Phase`), its /proc I/O counters (:class:`Counter`), and the loops that write a file and
read a range in calls of ``transfer_size`` bytes, each call timed and its returned bytes counted.

Beside the calls, the memory work PyTorch does around them, timed apart from the calls (as fsync is), so that
Darshan's view (the time in the calls) stays the calls' and MLPerf's (the per-rank duration) holds everything a
trainer's save or restore does. What PyTorch does, read from the installed torch 2.13 (paths under
``torch/distributed/checkpoint/`` where no other is given; ``_storage_utils.py`` only picks the reader and writer):

- **Save** (``checkpoint.layout=dcp`` and ``torch``). DCP's ``filesystem.py::_write_files_from_queue`` hands each
  tensor (``_SerialCpuLoader.values``: ``detach()``, ``cpu()``, a ``clone()`` only where the tensor is a view of a
  larger storage, never for a rank's own pieces) to ``filesystem.py::_write_item``, which ``torch.save``\\ s it into
  the file's stream; ``layout=torch`` is one ``torch.save`` of the rank's state. ``torch.save`` makes no copy of
  the bytes (its zip writer hands the stream one ``write`` of a memoryview over the tensor's storage, checked with a
  stream that records what it is given), but it computes the CRC-32 of every storage record before writing it
  (``serialization.py::get_crc32_options``, ``config.save.compute_crc32``, on by default; miniz's
  ``mz_zip_writer_add_mem_ex_v2``): a pass over every byte of the state. :meth:`Phase.checksum` makes that pass
  (``zlib.crc32``, the same polynomial; the same speed as ``torch.save``'s here: 0.049 and 0.047 s for 200 MiB) on
  each piece before the first write that reaches it (``crc_ns``). The zip's own records (about 1.5 KiB an item:
  headers, pickle, version, padding) are not written. ``access=shared`` (N-1) is no file torch writes: no checksum.
- **Restore**. DCP's ``filesystem.py::FileSystemReader.read_data`` ``torch.load``\\ s each item from a view of the
  file (``utils.py::_create_file_view``) into a new tensor (the zip reader ``readinto``\\ s the record into a fresh
  storage: one call, checked), then copies it into the target, ``planner.resolve_tensor(req).detach().copy_``
  (``default_planner.py::DefaultLoadPlanner.resolve_tensor``, ``commit_tensor`` a no-op). ``layout=torch``'s
  ``torch.load`` allocates fresh storages the same way, and ``Module.load_state_dict`` copies them into the
  parameters (``nn/modules/module.py::_load_from_state_dict``: ``param.copy_(input_param)``), so both layouts read
  each piece into a new buffer and copy it (``copy_ns``); so does ``access=shared`` (a loader of any file reads
  into fresh tensors), and ``checkpoint.restore_into=state`` reads straight into the state instead, as an in-place
  loader does. ``torch.load`` checks no CRC (a record with a flipped byte loads: checked), so a restore computes
  none.
"""

from __future__ import annotations

import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ddlio.errors import KernelError
from ddlio.metrics import histogram
from lustre.io import StorageIO

_ns = time.perf_counter_ns


class Counter:
    """This process's /proc I/O counters (``wchar``, ``write_bytes``, ``rchar``, ``read_bytes``: bytes) through the
    storage's I/O seam."""

    FIELDS = (b"wchar", b"write_bytes", b"rchar", b"read_bytes")

    def __init__(self, io: StorageIO) -> None:
        self.io = io
        try:
            self.handle: Any = io.open_counter("/proc/self/io")
        except OSError:
            self.handle = None

    def now(self) -> dict[str, int] | None:
        """The counters now (bytes), None where /proc/self/io cannot be read."""
        if self.handle is None:
            return None
        out = {}
        for line in self.io.read_counter(self.handle).splitlines():
            name, _, value = line.partition(b":")
            if name in self.FIELDS:
                out[name.decode()] = int(value)
        return out


class Phase:
    """One rank's calls in one save or restore: bytes the data calls returned, their latencies (ns), and the time
    in open/create/close (``meta_ns``), fsync (``fsync_ns``) and data calls (``data_ns``); apart from the calls,
    the restore's copies into the state (``copy_ns``) and the save's checksums (``crc_ns``, each piece's CRC-32 in
    ``crcs``), as PyTorch does them (see the module's docstring)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lat: list[int] = []
        self.meta_ns = 0
        self.fsync_ns = 0
        self.data_ns = 0
        self.copy_ns = 0
        self.crc_ns = 0
        self.crcs: list[int] = []
        self.files = 0

    def timed_meta(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, its time counted as metadata time."""
        t = _ns()
        out = fn(*args)
        self.meta_ns += _ns() - t
        return out

    def checksum(self, piece: np.ndarray) -> None:
        """The CRC-32 of ``piece``'s bytes, as ``torch.save`` computes one for each storage before writing it."""
        t = _ns()
        crc = zlib.crc32(piece)
        self.crc_ns += _ns() - t
        self.crcs.append(crc)

    def copy(self, into: np.ndarray, staging: np.ndarray) -> None:
        """Copy what was read into ``staging`` into the state's ``into``, as DCP's ``copy_`` does."""
        t = _ns()
        into[:] = staging
        self.copy_ns += _ns() - t

    def figures(self, duration_ns: int, counters: tuple[dict[str, int] | None, dict[str, int] | None]
                ) -> dict[str, Any]:
        """The rank's figures (seconds, bytes, the latency histogram). ``io_s`` is the time in the calls only;
        ``duration_s`` holds the copies and checksums too."""
        before, after = counters
        delta = {k: after[k] - before[k] for k in after} if before and after else {}
        io_ns = self.meta_ns + self.fsync_ns + self.data_ns
        return {"bytes": self.bytes, "calls": len(self.lat), "io_s": io_ns / 1e9,
                "meta_s": self.meta_ns / 1e9, "fsync_s": self.fsync_ns / 1e9, "data_s": self.data_ns / 1e9,
                "duration_s": duration_ns / 1e9, "files": self.files, "copy_s": self.copy_ns / 1e9,
                "crc_s": self.crc_ns / 1e9, "crc32": self.crcs,
                "hist": histogram(np.asarray(self.lat, dtype=np.int64)).tolist() if self.lat else [],
                "proc": delta}


def write_file(io: StorageIO, phase: Phase, path: Path, data: np.ndarray, offset: int, transfer: int,
               shared: bool, pieces: tuple[int, ...] = ()) -> None:
    """Create (or open, ``shared``) ``path``, write ``data`` at ``offset`` in calls of ``transfer`` bytes, each
    timed, fsync, close. ``pieces`` (bytes, summing to ``len(data)``): the items ``torch.save`` serialises one
    after another, each checksummed before the first call that reaches it (no pieces: no checksum). The calls are
    the same with and without pieces."""
    fd = phase.timed_meta(io.open_shared if shared else io.create, path)
    phase.files += 1
    todo, start = list(pieces), 0  # the pieces not yet checksummed, and where the first of them starts
    try:
        for at in range(0, len(data), transfer):
            end = min(at + transfer, len(data))
            while todo and start < end:
                size = todo.pop(0)
                phase.checksum(data[start:start + size])
                start += size
            t = _ns()
            phase.bytes += io.write_at(fd, data[at:end], offset + at)
            dt = _ns() - t
            phase.lat.append(dt)
            phase.data_ns += dt
        t = _ns()
        io.sync(fd)
        phase.fsync_ns += _ns() - t
    finally:
        phase.timed_meta(io.close, fd)


def read_range(io: StorageIO, phase: Phase, fd: Any, view: memoryview, offset: int, transfer: int,
               what: str) -> None:
    """Read ``len(view)`` bytes at ``offset`` into ``view`` in calls of ``transfer`` bytes, each timed; the bytes
    counted are those the calls returned. Raises :class:`KernelError` (naming ``what``) where the file ends
    first."""
    at, want = 0, len(view)
    while at < want:
        t = _ns()
        n = io.read_into(fd, view[at:at + transfer], offset + at)
        dt = _ns() - t
        phase.lat.append(dt)
        phase.data_ns += dt
        if n <= 0:
            raise KernelError(f"{what}: the file ends {want - at} bytes before the shard or index does")
        at += n
        phase.bytes += n
