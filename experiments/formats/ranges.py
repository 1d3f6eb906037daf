"""Formats whose records lie back to back after a header, at offsets known before a byte is written (``bin``, ``npy``,
``tfrecord``; any size distribution, as the offsets follow from the planned sizes): a file is its header, then each
generation group's records written at their own offset (``pwritev``). So several processes can write one file at
once, each its own contiguous run of groups (:meth:`RangedFormat.write_groups`; :mod:`experiments.dataset.writers`),
and the file holds the bytes one writer writes: a group's bytes depend on the group alone
(:meth:`~experiments.formats.base.FilePayload.iter_groups`).

An HDF5 file of contiguous storage is one too: h5py lays out its metadata and allocates the storage, then the
records go at the storage's address plus their offsets (:meth:`experiments.formats.hdf5.HDF5.begin`); so is an NPZ
archive, zipfile laying out its members around the samples, whose CRC-32 is written last
(:meth:`experiments.formats.npz.NPZ.finish`). Chunked HDF5 files stay one writer's (HDF5 places each chunk as it is
written), as do the images (sizes known only once encoded) and Parquet.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ddlio.lazy import lazy_import
from experiments.formats.base import FilePayload, Format, fsync_path
from experiments.formats.indexed import offsets_of

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

#: pieces one ``writev``/``pwritev`` takes at most (the system's IOV_MAX)
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def write_pieces(fd: int, pieces: list[bytes | memoryview], offset: int | None = None) -> int:
    """Write ``pieces`` back to back with as few calls as IOV_MAX allows (the kernel gathers them: no copy in
    Python): at ``fd``'s position (``writev``), or from byte ``offset`` (``pwritev``, the position unmoved).
    Returns the bytes written."""
    done = 0
    for i in range(0, len(pieces), IOV_MAX):
        batch = pieces[i : i + IOV_MAX]
        want = sum(len(p) for p in batch)
        n = os.writev(fd, batch) if offset is None else os.pwritev(fd, batch, offset + done)
        done += n
        if n < want:  # a short write (a signal, a full quota): the rest one piece at a time
            for p in batch:
                view = memoryview(p)
                if n >= len(view):
                    n -= len(view)
                    continue
                view, n = view[n:], 0
                while view:
                    w = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset + done)
                    view = view[w:]
                    done += w
    return done


#: what a writer of a share of a file is told after each write: (descriptor, offset, bytes)
Written = Callable[[int, int, int], None]

#: bytes one positioned write carries at most (8 MiB, a generation group's size): a group larger than that (one
#: sample over it, e.g. MLPerf's unet3d) goes in calls of this size, each written behind as soon as it is written,
#: so the page cache recycles 8 MiB at a time instead of taking fresh memory for the whole sample
WRITE_CHUNK = 8 * 1024 * 1024


def write_at(fd: int, pieces: list[bytes | memoryview] | list[Any], at: int, written: Written | None = None,
             chunk: int = WRITE_CHUNK) -> int:
    """Write ``pieces`` back to back from byte ``at`` of ``fd`` in the fewest positioned calls of at most ``chunk``
    bytes, all of one size (within a byte): :func:`write_pieces` each, no copy in Python; ``written`` is told of
    every call. Returns the bytes written.

    Equal calls, not full ones and a remainder: a framed group is a little over ``chunk`` (TFRecord's 16 bytes a
    record), and a remainder of a few KiB would be written behind on its own: the writer would then wait for the
    group's 8 MiB to reach storage right after writing them, instead of while it makes the next group."""
    views = []
    for piece in pieces:
        view = memoryview(piece)
        views.append(view if view.ndim == 1 and view.format == "B" else view.cast("B"))
    total = sum(len(v) for v in views)
    calls = max(1, -(-total // max(1, chunk)))
    each, longer = divmod(total, calls)  # the first ``longer`` calls carry one byte more
    done, size, call = 0, 0, 0
    want = each + (call < longer)
    batch: list[memoryview] = []
    for view in views:
        while len(view):
            take = min(len(view), want - size)
            batch.append(view[:take])
            size += take
            view = view[take:]
            if size == want:
                n = write_pieces(fd, batch, at + done)
                if written is not None:
                    written(fd, at + done, n)
                done, size, batch, call = done + n, 0, [], call + 1
                want = each + (call < longer)
    return done


class RangedFormat(Format):
    """A format whose records lie back to back after a header, at offsets known from the planned sizes: written as
    :meth:`begin` (the header), :meth:`write_groups` (every group, or one writer's share of them) and :meth:`finish`
    (fsync, sidecars). One writer's :meth:`write` is the three in a row, so a file written by several processes
    goes through the very code one writer's does."""

    def ranged(self) -> bool:
        """Whether this format's files, as its options lay them out, have their records at offsets known before
        writing (so several processes may write one): True; a format ranged only in some layouts says when."""
        return True

    def header(self, payload: FilePayload) -> bytes:
        """The bytes before the first record (none)."""
        return b""

    def record_lengths(self, payload: FilePayload) -> np.ndarray:
        """Bytes each record takes in the file (int64): the payload sizes, plus any framing."""
        return payload.sizes

    def framing(self, payload: FilePayload) -> Callable[[int, int, np.ndarray], Any] | None:
        """``prepare`` for :meth:`~experiments.formats.base.FilePayload.iter_groups`: a group's payload as the
        pieces to write (TFRecord's frames), or None to write the payload as it is."""
        return None

    def finish(self, path: str | os.PathLike, payload: FilePayload, offsets: np.ndarray,
               parts: Sequence[Any] = ()) -> None:
        """After every record is written: make the file durable and write its sidecars (``offsets``: the records'
        offsets, n+1, from where the first starts; ``parts``: what each writer's :meth:`write_groups` returned, in
        writer order, i.e. in the file's order)."""
        fsync_path(path)

    def begin(self, path: str | os.PathLike, payload: FilePayload, sized: bool = False) -> np.ndarray:
        """Create ``path`` (emptied) holding the header; ``sized``: at its final size already (a file several
        processes write). Returns the byte offset in the file of every record and of the end (int64, n+1)."""
        head = self.header(payload)
        starts = offsets_of(self.record_lengths(payload)) + len(head)
        with open(path, "wb") as f:
            f.write(head)
            if sized:
                f.truncate(int(starts[-1]))
        return starts

    def write_groups(self, path: str | os.PathLike, payload: FilePayload, starts: np.ndarray,
                     part: slice | None = None, written: Written | None = None) -> Any:
        """Write the records of the groups ``part`` (all by default) of :meth:`FilePayload.groups` into the file
        :meth:`begin` made, each group at its offset (``starts``: what :meth:`begin` returned), in calls of at most
        :data:`WRITE_CHUNK` bytes; ``written`` is told of every call. Returns what :meth:`finish` needs of this
        writer's share (here: the bytes written)."""
        prepare = self.framing(payload)
        total = 0
        fd = os.open(path, os.O_WRONLY)
        try:
            for lo, _, data in payload.iter_groups(prepare=prepare, reuse=True, part=part):
                total += write_at(fd, [data] if prepare is None else data, int(starts[lo]), written)
        finally:
            os.close(fd)
        return total

    def write(self, path: str | os.PathLike, payload: FilePayload, written: Written | None = None) -> None:
        """The whole file by this one writer: :meth:`begin`, :meth:`write_groups` (``written`` told of every
        write) and :meth:`finish`."""
        starts = self.begin(path, payload)
        done = self.write_groups(path, payload, starts, None, written)
        self.finish(path, payload, starts - starts[0], [done])
