"""ddlio's storage layer: file-system facts (:mod:`lustre.fs`), the backends behind one base class of defaults
(:mod:`lustre.base`: Lustre's in :mod:`lustre.lfs`, CephFS's in :mod:`lustre.ceph`, every other file system's in
:mod:`lustre.posix`), found by file-system type and detection through :mod:`lustre.registry` (plug-ins join with
:func:`register` or the ``ddlio.storage`` entry points), and the I/O seam each backend hands out (:mod:`lustre.io`:
open, read a range, write, list, evict, count; POSIX today). Callers use the names re-exported here."""

from lustre.base import Layout, LayoutRecord, StorageBackend
from lustre.fs import PSEUDO_FS, FsInfo, existing_ancestor, fs_info, is_lustre
from lustre.io import PosixIO, StorageIO
from lustre.registry import (
    BACKENDS,
    apply_layout,
    backend,
    backend_for,
    backend_of,
    candidates,
    describe,
    drop_client_cache,
    io_for,
    label_words,
    read_back,
    read_layout,
    register,
    striping_applies,
    validate_at,
    validate_request,
)

__all__ = [
    "BACKENDS", "PSEUDO_FS", "FsInfo", "Layout", "LayoutRecord", "PosixIO", "StorageBackend", "StorageIO",
    "apply_layout", "backend", "backend_for", "backend_of", "candidates", "describe", "drop_client_cache",
    "existing_ancestor", "fs_info", "io_for", "is_lustre", "label_words", "read_back", "read_layout", "register",
    "striping_applies", "validate_at", "validate_request",
]
