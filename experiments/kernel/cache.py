"""Page-cache control: evict a file's pages and measure how much of it is resident, through the I/O seam of the
storage that holds it (:class:`lustre.io.StorageIO`; POSIX: posix_fadvise DONTNEED, and mincore on a read-only
mapping, which does not fault pages in); and what the client can do about the caches below
it (a storage controller's, a Lustre OSS's, a VM host's), which it can neither see nor evict: remember whether a
dataset has been read since it was generated, settle a fresh dataset with untimed reads until its read rate is
steady, or push it out with an untimed read of a large flush file."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from ddlio.lazy import lazy_import
from lustre.io import PosixIO, StorageIO
from lustre.registry import io_for

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py


def io_of(paths: Sequence[str | os.PathLike]) -> StorageIO:
    """The I/O seam (:class:`lustre.io.StorageIO`) of the storage holding the first of ``paths`` (a dataset's
    files share one), POSIX's for none."""
    return io_for(paths[0]) if paths else PosixIO()


def resident_pages(path: str | os.PathLike, io: StorageIO | None = None) -> tuple[int, int]:
    """``(resident pages, total pages)`` of a file in the page cache (pages of :data:`lustre.io.PAGE` bytes),
    through the I/O seam of its storage (``io``, else found for ``path``). Raises OSError if it cannot be
    measured."""
    return (io or io_for(path)).resident(path)


def residency(paths: Iterable[str | os.PathLike], io: StorageIO | None = None) -> float:
    """Fraction (0..1) of the files' pages that are in the page cache; NaN if it cannot be measured."""
    paths = list(paths)
    res = tot = 0
    try:
        io = io or io_of(paths)
        for p in paths:
            r, t = io.resident(p)
            res, tot = res + r, tot + t
    except OSError:
        return float("nan")
    return res / tot if tot else 0.0


def evict(paths: Iterable[str | os.PathLike], io: StorageIO | None = None) -> None:
    """Ask the client to drop the files' clean pages from its caches, through the I/O seam of their storage
    (``io``, else found for the first file; POSIX: ``fdatasync``, then ``POSIX_FADV_DONTNEED``)."""
    paths = list(paths)
    io = io or io_of(paths)
    for p in paths:
        io.evict(p)


def warm(paths: Iterable[str | os.PathLike], block: int = 4 << 20) -> int:
    """Read the files once, sequentially, so their pages are cached; returns bytes read."""
    buf = bytearray(block)
    n = 0
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                got = f.readinto(buf)
                if not got:
                    break
                n += got
    return n


# ---------------------------------------------------------------------------------- caches below the client
def read_marker(directory: str | os.PathLike, stamp: str) -> Path:
    """The file whose existence says that the dataset generated at ``stamp`` has been read."""
    safe = "".join(c if c.isalnum() else "-" for c in stamp)
    return Path(directory) / f".read-since-{safe}"


def claim_first_read(directory: str | os.PathLike, stamp: str) -> bool:
    """Atomically mark the dataset generated at ``stamp`` as read; True if this call is its first read since it
    was generated (the marker did not exist), False if something read it before (O_EXCL: one winner, also
    across nodes on a shared file system)."""
    try:
        fd = os.open(read_marker(directory, stamp), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def read_through(paths: Iterable[str | os.PathLike], block: int = 4 << 20, limit: int | None = None
                 ) -> tuple[int, float]:
    """Read the files sequentially (at most ``limit`` bytes in all, from the first file on) with the page cache
    dropped before and after each file: ``(bytes, seconds)``. Used for reads that must reach the storage (a
    settling read, a flush) without leaving pages in this client."""
    buf = memoryview(bytearray(block))
    n = 0
    cap = float("inf") if limit is None else limit
    t0 = time.perf_counter()
    for p in paths:
        if n >= cap:
            break
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # this read must reach below the client
            # a read cut short by the limit must not leave readahead in flight: pages still under I/O when the
            # file is dropped below would stay cached (reading to the end waits for all of them)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL if limit is None else os.POSIX_FADV_RANDOM)
            while n < cap:
                got = os.readv(fd, [buf[: int(min(block, cap - n))]])
                if not got:
                    break
                n += got
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return n, time.perf_counter() - t0


#: Settling: after the first read-through, a fresh dataset is read through again (at most SETTLE_PROBE_BYTES of it,
#: from its first file on) until SETTLE_WINDOW consecutive passes agree within SETTLE_TOLERANCE of their median,
#: or SETTLE_BUDGET_S seconds have gone by. Measured on this VM: reads within ~10 s of writing 256 MiB ran at
#: 0.2-0.5x the rate of later reads (the host still writing the data back), so one pass is not always enough.
SETTLE_PROBE_BYTES = 512 << 20
SETTLE_WINDOW = 3
SETTLE_TOLERANCE = 0.10
SETTLE_BUDGET_S = 60.0


def settle(paths: Iterable[str | os.PathLike], probe_bytes: int = SETTLE_PROBE_BYTES, window: int = SETTLE_WINDOW,
           tolerance: float = SETTLE_TOLERANCE, budget_s: float = SETTLE_BUDGET_S) -> dict[str, object]:
    """Settle a freshly generated dataset below the client, untimed: read it all through once (its first read,
    served by the device), then read its first ``probe_bytes`` through again until ``window`` consecutive passes
    agree within ``tolerance`` of their median (the caches below the client have taken the data and finished
    writing it back), or ``budget_s`` seconds have passed. Nothing is left in the page cache.

    Returns ``settle_bytes`` (all passes), ``settle_s``, ``passes_mib_s`` (each pass's rate, MiB/s; the first is
    the whole-dataset read) and ``stable`` (whether the window agreed within the budget)."""
    paths = list(paths)
    t0 = time.perf_counter()
    n, secs = read_through(paths)
    total, rates = n, [n / secs / 2**20 if secs > 0 else float("inf")]
    stable = False
    while time.perf_counter() - t0 < budget_s:
        got, secs = read_through(paths, limit=probe_bytes)
        if not got:
            break
        total += got
        rates.append(got / secs / 2**20 if secs > 0 else float("inf"))
        last = rates[1:][-window:]
        if len(last) == window:
            mid = float(np.median(last))
            if all(abs(r - mid) <= tolerance * mid for r in last):
                stable = True
                break
    return {"settle_bytes": total, "settle_s": time.perf_counter() - t0,
            "passes_mib_s": [round(r, 1) for r in rates], "stable": stable}


#: the first bytes of every flush file ddlio writes (the rest is random): the proof that it may replace one
FLUSH_MARK = b"ddlio storage_cold flush file\n"


def flush_file_problem(path: str | os.PathLike, size: int) -> str | None:
    """Why the flush file ``path`` of ``size`` bytes must not be used or written, as one sentence; None when it
    may: absent (it is written), of that size (read through as it is, never written), or ddlio's own (it starts
    with :data:`FLUSH_MARK`) of another size (replaced). A file of another size that ddlio did not write, or
    anything that is not a plain file, is never replaced."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_file() and path.stat().st_size == size:
        return None
    if path.is_file() and not path.is_symlink():
        try:
            with open(path, "rb") as f:
                if f.read(len(FLUSH_MARK)) == FLUSH_MARK:
                    return None
        except OSError:
            pass
    what = "is not a plain file" if path.is_symlink() or not path.is_file() else (
        f"holds {path.stat().st_size} bytes, not workload.flush_size={size}, and was not written by ddlio (it "
        "lacks ddlio's flush-file mark)")
    return (f"the storage_cold flush file {path} {what}: ddlio never replaces it; move it away, or use another "
            "data_root")


def ensure_flush_file(path: str | os.PathLike, size: int, block: int = 8 << 20) -> bool:
    """Create the storage-cold flush file (``size`` bytes: :data:`FLUSH_MARK`, then incompressible data, fsync'd,
    not left in the page cache) unless it exists with that size; True if it was written now. Written to a
    temporary name and renamed, so a half-written file is never used; a file that ddlio did not write is never
    replaced (:func:`flush_file_problem`: FileExistsError)."""
    path = Path(path)
    problem = flush_file_problem(path, size)
    if problem is not None:
        raise FileExistsError(problem)
    if path.exists() and path.stat().st_size == size:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    rng = np.random.default_rng()
    io = io_for(path.parent)
    handle = io.create(tmp)
    try:
        done = 0
        while done < size:
            n = min(block, size - done)
            data = rng.bytes(n) if done else (FLUSH_MARK + rng.bytes(n))[:n]
            done += io.write(handle, data)
        io.sync(handle)
    finally:
        io.close(handle)
    io.evict(tmp)  # written through to storage: not left in the page cache
    os.replace(tmp, path)
    return True
