"""Page-cache control: evict a file's pages (posix_fadvise DONTNEED) and measure how much of it is resident
(mincore on a read-only mapping, which does not fault pages in)."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable

import numpy as np

PAGE = mmap.PAGESIZE
_WINDOW = 1 << 30  # map at most 1 GiB at a time

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_pages(path: str | os.PathLike) -> tuple[int, int]:
    """``(resident pages, total pages)`` of a file in the page cache. Raises OSError if it cannot be measured."""
    fd = os.open(path, os.O_RDONLY)
    try:
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
    finally:
        os.close(fd)


def residency(paths: Iterable[str | os.PathLike]) -> float:
    """Fraction (0..1) of the files' pages that are in the page cache; NaN if it cannot be measured."""
    res = tot = 0
    try:
        for p in paths:
            r, t = resident_pages(p)
            res, tot = res + r, tot + t
    except OSError:
        return float("nan")
    return res / tot if tot else 0.0


def evict(paths: Iterable[str | os.PathLike]) -> None:
    """Ask the kernel to drop the files' clean pages from the page cache (POSIX_FADV_DONTNEED)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # dirty pages cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


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
