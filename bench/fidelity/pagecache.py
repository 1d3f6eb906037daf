"""Cold page cache for the fidelity applications, independent of ddlio: drop a file's pages
(``posix_fadvise(POSIX_FADV_DONTNEED)`` after ``fdatasync``, as ``experiments/cache.py`` does) and check with
``mincore`` on a read-only mapping (which faults nothing in) how much of it stayed cached."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def _resident(path: str) -> tuple[int, int]:
    """(resident pages, pages) of one file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pages = -(-size // mmap.PAGESIZE)
        if not size:
            return 0, 0
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed", path)
        try:
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed", path)
            return sum(b & 1 for b in bytes(vec)), pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def resident_fraction(paths: Iterable[str]) -> float:
    """Fraction (0..1) of the files' pages in the page cache."""
    res = tot = 0
    for p in paths:
        r, t = _resident(p)
        res, tot = res + r, tot + t
    return res / tot if tot else 0.0


def evict(paths: list[str]) -> float:
    """Drop the files from the page cache; returns the fraction still resident afterwards (0.0 when cold)."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return resident_fraction(paths)
