"""A failure for want of a resource (space, inodes, quota, open files), said in one sentence: which resource, where,
how much was left and, where known, how much was needed. Used wherever a point can fail so (its run folder made,
its dataset written, its record written), so that the stored error is that sentence, never a traceback."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ddlio.units import format_size

#: errno values that mean a resource ran out (not a bug, not bad input)
RESOURCE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE})


def resource_oserror(e: BaseException | None) -> OSError | None:
    """The OSError for want of a resource in ``e`` or the exceptions it was raised from (its cause/context), or
    None."""
    seen = 0
    while e is not None and seen < 16:
        if isinstance(e, OSError) and e.errno in RESOURCE_ERRNOS:
            return e
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def _existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (statvfs needs one)."""
    p = path
    while not p.exists() and p.parent != p:
        p = p.parent
    return p


def resource_sentence(e: OSError, where: str | os.PathLike | None = None, needed_bytes: int | None = None) -> str:
    """One sentence for ``e`` (ENOSPC, EDQUOT, EMFILE, ENFILE): which resource ran out, where (``e.filename``, else
    ``where``), what the file system had left and, when given, how many bytes the step needed."""
    path = e.filename or where
    at = f" at {path}" if path else ""
    left = ""
    if path and e.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            st = os.statvfs(_existing(Path(os.fsdecode(path))))
        except OSError:
            st = None
        if st is not None:
            free_inodes = st.f_favail if st.f_favail >= 0 else st.f_ffree
            if e.errno == errno.ENOSPC and st.f_files and free_inodes == 0:
                return (f"no free inodes (files) on the file system{at}: all {st.f_files} are used; delete files "
                        "there or give a data_root on another file system")
            left = f" ({format_size(st.f_bavail * st.f_frsize)} free of {format_size(st.f_blocks * st.f_frsize)}"
            left += f", {free_inodes} inodes free)"
    need = f"; the step needed {format_size(needed_bytes)}" if needed_bytes else ""
    if e.errno == errno.ENOSPC:
        return f"no space left on the device{at}{left}{need}: free space there or give a data_root with room"
    if e.errno == errno.EDQUOT:
        return f"disk quota exceeded{at}{left}{need}: free space in your quota or give a data_root with room"
    return (f"too many open files{at} ({os.strerror(e.errno or 0)}): raise the limit (ulimit -n) or open fewer "
            "files at once")
