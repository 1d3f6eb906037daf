"""ddlio's storage layer: file-system facts (:mod:`lustre.fs`) and a registry of storage backends
(:mod:`lustre.registry`: Lustre's in :mod:`lustre.lfs`, CephFS's in :mod:`lustre.ceph`, every other file system's
in :mod:`lustre.posix`), each meeting the protocol of :mod:`lustre.base`. Callers use the names re-exported here."""

from lustre.base import Layout, LayoutRecord, StorageBackend
from lustre.fs import PSEUDO_FS, FsInfo, existing_ancestor, fs_info, is_lustre
from lustre.registry import (
    BACKENDS,
    apply_layout,
    backend,
    backend_for,
    backend_of,
    describe,
    drop_client_cache,
    read_back,
    read_layout,
    striping_applies,
    validate_at,
    validate_request,
)

__all__ = [
    "BACKENDS", "PSEUDO_FS", "FsInfo", "Layout", "LayoutRecord", "StorageBackend", "apply_layout", "backend",
    "backend_for", "backend_of", "describe", "drop_client_cache", "existing_ancestor", "fs_info", "is_lustre",
    "read_back", "read_layout", "striping_applies", "validate_at", "validate_request",
]
