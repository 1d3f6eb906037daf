"""The I/O seam: how ddlio opens, reads, writes, lists, evicts and counts the bytes of a dataset's files.

:class:`StorageIO` names each operation once; :class:`PosixIO`, a mounted POSIX file system's, is its one
implementation today (``os.open``, ``os.preadv``, ``posix_fadvise(DONTNEED)``, ``mincore`` and ``/proc/self/io``).
Each storage backend hands out its own (:meth:`lustre.base.StorageBackend.io`, :func:`lustre.io_for`), so that a
store that is not a mounted path (an object store) is one module with a subclass of its own.

Handles are what the store's ``open`` returns (a file descriptor on POSIX); sizes and offsets are in bytes. The
readers' hot loops read through the handle they got here, with the calls of their own (the C loop's ``preadv``):
only the acquisition of a handle goes through the seam, never a sample's read.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ddlio.lazy import lazy_import
from ddlio.libc import libc

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

#: the page size, in bytes (the unit of :meth:`StorageIO.resident`)
PAGE = mmap.PAGESIZE
_WINDOW = 1 << 30  # residency maps at most 1 GiB of a file at a time

_libc = libc()
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """libc's ``sync_file_range`` (Linux), or None."""
    try:
        fn = _libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2
#: SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER: start the range's writeback and wait until it is written
_SYNC_FILE_RANGE_WAIT_ALL = 1 | 2 | 4
#: seconds between two write-behind requests (see :meth:`StorageIO.write_behind`): short, so that the page-cache memory
#: generation recycles stays small (0.05 s gave 0.38-0.40 of fio here, 0.01 s 0.55, 0.005 s 0.51-0.78)
WRITE_BEHIND_S = 0.005


#: ranges a :class:`RangeWriteBehind` keeps in flight: queued for writeback, not yet waited for. With one, the
#: writer waited for each range right after writing the next, and two writers of one file beat one; with three
#: (24 MiB of 8 MiB calls) one writer beats two, on less CPU (256 MiB here: bin 1179 against 1044 MiB/s,
#: 0.74 against 0.87 CPU-s/GiB; tfrecord 957-1048 against 875, hdf5 982-1018 against 931)
WRITE_BEHIND_DEPTH = 3


class RangeWriteBehind:
    """One writer's write-behind of its own writes to a file written in place, by others too or at its final size
    from the start (the path-watching :meth:`StorageIO.write_behind` follows a file's growing end, which neither
    has), told of each write (``written(fd, offset, bytes)``) by the writer itself: each write's whole pages are
    queued for writeback (``sync_file_range(SYNC_FILE_RANGE_WRITE)``) as they are written, and once ``depth``
    ranges are in flight the oldest is waited for and dropped from the page cache, as the path-watching one does
    (the last ones are left to the fsync that ends the file).

    Ranges are whole pages (:data:`PAGE`): a write that ends inside a page leaves that page to the range of the next
    write that continues it (or to the fsync). A page queued while half written is dirtied again by the write that
    fills it, and the wait for its range then writes it once more, alone, while the writer waits; records that are
    not a page's multiple (TFRecord's framing, NPY's and HDF5's headers) did that at every write."""

    def __init__(self, depth: int = WRITE_BEHIND_DEPTH) -> None:
        self._depth = max(1, int(depth))
        self._queued: list[tuple[int, int]] = []  # (offset, bytes) queued, oldest first
        self._written_end = -1  # where the last write ended
        self._queued_end = 0  # where the last range queued ended (a page boundary)

    def __call__(self, fd: int, offset: int, n: int) -> None:
        """``n`` bytes were just written at ``offset`` of ``fd``: queue their whole pages (with the page the write
        before left unqueued, when this one continues it); wait for and drop the oldest range beyond ``depth``."""
        sync = _SYNC_FILE_RANGE  # libc's sync_file_range (Linux), or None: no write-behind
        if sync is None or n <= 0:
            return
        start = self._queued_end if offset == self._written_end else -(-offset // PAGE) * PAGE
        end = (offset + n) // PAGE * PAGE
        self._written_end = offset + n
        if end <= start:  # no whole page yet: the write that continues this one queues from ``start``
            self._queued_end = start
            return
        self._queued_end = end
        sync(fd, start, end - start, _SYNC_FILE_RANGE_WRITE)
        self._queued.append((start, end - start))
        while len(self._queued) > self._depth:
            before, m = self._queued.pop(0)
            sync(fd, before, m, _SYNC_FILE_RANGE_WAIT_ALL)
            os.posix_fadvise(fd, before, m, os.POSIX_FADV_DONTNEED)


class StorageIO:
    """The operations ddlio asks of the storage that holds a dataset; every one has the POSIX behaviour here, so a
    subclass overrides only what its store does differently (an object store: all of them).

    Handles are file descriptors on POSIX (ints); an implementation may hand out any object its own methods take.
    Sizes and offsets are in bytes."""

    #: the name of the implementation (recorded nowhere yet; for messages)
    name = "posix"

    # ------------------------------------------------------------------ reading
    def open(self, path: str | os.PathLike) -> Any:
        """A handle for reading ``path`` (POSIX: a read-only file descriptor)."""
        return os.open(path, os.O_RDONLY)

    def close(self, handle: Any) -> None:
        """Release a handle from :meth:`open` or :meth:`create`."""
        os.close(handle)

    def size(self, handle: Any) -> int:
        """The size in bytes of the file behind ``handle``."""
        return os.fstat(handle).st_size

    def read_into(self, handle: Any, buf: Any, offset: int) -> int:
        """Read up to ``len(buf)`` bytes at ``offset`` into the writable buffer ``buf``; the bytes read (0 at the
        end of the file)."""
        return os.preadv(handle, [buf], offset)

    # ------------------------------------------------------------------ writing and listing
    def create(self, path: str | os.PathLike, mode: int = 0o644) -> Any:
        """A handle for writing ``path`` from its start (created, or truncated where it exists)."""
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def write(self, handle: Any, data: Any) -> int:
        """Write all of ``data`` (bytes-like) at the handle's position; the bytes written (``len(data)``)."""
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            view = view[os.write(handle, view):]
        return total

    def open_shared(self, path: str | os.PathLike, mode: int = 0o644) -> Any:
        """A handle for writing ``path`` at offsets (:meth:`write_at`), created where it is missing and never
        truncated: every rank of an N-1 write opens the one file so."""
        return os.open(path, os.O_WRONLY | os.O_CREAT, mode)

    def write_at(self, handle: Any, data: Any, offset: int) -> int:
        """Write all of ``data`` (bytes-like) at ``offset`` (bytes) without moving the handle's position; the bytes
        the write calls returned, summed (``len(data)``)."""
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += os.pwrite(handle, view[done:], offset + done)
        return done

    def sync(self, handle: Any) -> None:
        """Make what was written through ``handle`` durable (fsync)."""
        os.fsync(handle)

    def listdir(self, path: str | os.PathLike) -> list[str]:
        """The names in directory ``path``, sorted."""
        return sorted(os.listdir(path))


    # ------------------------------------------------------------------ generation
    @contextlib.contextmanager
    def staged(self, path: str | os.PathLike) -> Iterator[str]:
        """The local path at which a format's library writes the file that is to be ``path`` (HDF5, zip and PIL
        write to paths, not handles): the store holds it once the block exits. POSIX: ``path`` itself (a store that
        is not a mounted path stages it locally and uploads it here)."""
        yield os.fspath(path)

    @contextlib.contextmanager
    def write_behind(self, path: str | os.PathLike, interval_s: float = WRITE_BEHIND_S) -> Iterator[None]:
        """While a format writes ``path``, start the writeback of its dirty pages every ``interval_s`` seconds
        (``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which queues the writes and returns), from a thread that
        watches the file by name, whoever writes it (h5py, zipfile, plain writes). The bytes then travel to storage
        while the next ones are generated, instead of all at the fsync that ends every format's ``write``, and dirty
        memory stays small. What was queued one interval before is waited for and dropped from the page cache
        (drop-behind), so generation recycles a few intervals' worth of page-cache memory instead of taking fresh
        memory for every byte it writes: in a VM whose host reclaims the guest's free memory, taking fresh pages cost
        5-9x the write itself here (256 MiB written at 190-340 MiB/s without, 1650-1970 with). A region a format
        writes again later (a header) is read back by the kernel where needed: the page cache stays coherent. The
        fsync still decides durability; without ``sync_file_range`` this does nothing."""
        if _SYNC_FILE_RANGE is None:
            yield
            return
        stop = threading.Event()

        def run() -> None:
            fd = -1
            queued = dropped = 0  # writeback started for [0, queued); [0, dropped) dropped from the page cache
            try:
                while not stop.wait(interval_s):
                    if fd < 0:
                        try:
                            fd = os.open(path, os.O_RDONLY)
                        except OSError:
                            continue
                    if queued > dropped:  # queued an interval ago: wait until written, then drop it
                        _SYNC_FILE_RANGE(fd, dropped, queued - dropped, _SYNC_FILE_RANGE_WAIT_ALL)
                        os.posix_fadvise(fd, dropped, queued - dropped, os.POSIX_FADV_DONTNEED)
                        dropped = queued
                    size = os.fstat(fd).st_size
                    if size > queued:
                        _SYNC_FILE_RANGE(fd, queued, size - queued, _SYNC_FILE_RANGE_WRITE)
                        queued = size
            finally:
                if fd >= 0:
                    os.close(fd)

        watcher = threading.Thread(target=run, name="ddlio-write-behind", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()

    # ------------------------------------------------------------------ caches
    def evict(self, path: str | os.PathLike) -> None:
        """Drop ``path``'s clean pages from this client's caches (POSIX: ``fdatasync``, as dirty pages cannot be
        dropped, then ``posix_fadvise(POSIX_FADV_DONTNEED)``)."""
        fd = self.open(path)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            self.close(fd)

    def resident(self, path: str | os.PathLike) -> tuple[int, int]:
        """``(resident pages, total pages)`` of ``path`` in this client's page cache (pages of :data:`PAGE` bytes;
        POSIX: ``mincore`` on a read-only mapping, which faults no page in). OSError if it cannot be measured."""
        fd = self.open(path)
        try:
            return _resident_fd(fd, path)
        finally:
            self.close(fd)

    # ------------------------------------------------------------------ counting
    def open_counter(self, path: str = "/proc/self/io") -> Any:
        """A handle on this process's (or, with ``/proc/thread-self/io``, this thread's) I/O counters."""
        return os.open(path, os.O_RDONLY)

    def read_counter(self, handle: Any) -> bytes:
        """The counters' text now (``syscr``, ``rchar``, ``read_bytes`` ...: calls and bytes); reading it is itself
        one read call returning ``len(text)`` bytes."""
        return os.pread(handle, 512, 0)


class PosixIO(StorageIO):
    """A mounted POSIX file system's I/O (every :class:`StorageIO` default): Lustre's, CephFS's and any local
    file system's."""

    name = "posix"


def _resident_fd(fd: int, path: str | os.PathLike) -> tuple[int, int]:
    size = os.fstat(fd).st_size
    total = (size + PAGE - 1) // PAGE
    resident = 0
    for start in range(0, size, _WINDOW):
        length = min(_WINDOW, size - start)
        addr = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
        if addr in (None, _MAP_FAILED):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap failed: {os.strerror(err)}", str(path))
        try:
            vec = np.zeros((length + PAGE - 1) // PAGE, dtype=np.uint8)
            if _libc.mincore(addr, length, vec.ctypes.data) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore failed: {os.strerror(err)}", str(path))
            resident += int(np.count_nonzero(vec & 1))
        finally:
            _libc.munmap(addr, length)
    return resident, total

