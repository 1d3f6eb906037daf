"""The C library through ctypes, without asking ``ldconfig`` where it is.

``ctypes.util.find_library("c")`` runs ``/sbin/ldconfig -p`` in a subprocess on every call: a fork of the calling
process and 10-30 ms here, paid at import by every process that loads a module binding a libc function (the
driver, the job process and each MPI rank, three times in the driver). The C library of a Linux process is
already loaded under its soname (``libc.so.6`` for glibc); ``dlopen`` of a loaded library only returns it.
"""

from __future__ import annotations

import ctypes

#: glibc's soname (the C library every CPython on glibc Linux is linked with)
SONAME = "libc.so.6"


def libc() -> ctypes.CDLL:
    """A handle of the C library with ``use_errno`` (each call a handle of its own, so that the argument types one
    module sets on a function do not change another's). Falls back to ``find_library`` on a C library of another
    name (musl)."""
    try:
        return ctypes.CDLL(SONAME, use_errno=True)
    except OSError:
        from ctypes.util import find_library  # here: it spawns ldconfig

        name = find_library("c")
        if name is None:
            raise
        return ctypes.CDLL(name, use_errno=True)
