"""The storage backends, by file-system type (as fsspec's ``known_implementations``): a type maps to the path of
its backend class, imported on first use. A file system without an entry is served by the POSIX backend (no
striping). Adding a backend is one module holding its class and one line in :data:`BACKENDS` (CephFS's is
registered for both of its clients' types: the kernel's ``ceph`` and ceph-fuse's generic ``fuse``; its
``detect`` tells CephFS from any other FUSE file system by its layout xattrs).

Callers use the functions here (re-exported by :mod:`lustre`), never a backend module: :func:`backend_for` picks the
backend of a path, :func:`apply_layout` and :func:`read_layout` set and read a dataset's layout through it,
:func:`validate_request` checks a request, :func:`describe` labels it.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from lustre.base import Layout, LayoutRecord, StorageBackend
from lustre.fs import FsInfo, fs_info

#: file-system type (:attr:`lustre.fs.FsInfo.type`) -> ``module:Class`` of its backend
BACKENDS: dict[str, str] = {
    "lustre": "lustre.lfs:LustreBackend",
    "ceph": "lustre.ceph:CephBackend",
    "fuse": "lustre.ceph:CephBackend",
    "posix": "lustre.posix:PosixBackend",
}
#: the layout knobs beyond stripe/stripe_size, and which backends' file systems have them (for the message)
KNOBS: dict[str, str] = {"object_size": "CephFS", "pool": "CephFS and Lustre"}
#: the backend of every file system without an entry of its own
FALLBACK = "posix"
#: whose rules a layout request follows when no file system is named: the stripe fields take ``lfs setstripe``'s
#: values, and a point is checked the same wherever it is composed
DEFAULT_STRIPING = "lustre"

_loaded: dict[str, StorageBackend] = {}


def backend(name: str) -> StorageBackend:
    """The backend registered under ``name`` (a file-system type), imported on first use; the POSIX backend for
    a type without an entry."""
    key = name if name in BACKENDS else FALLBACK
    if key not in _loaded:
        module, _, cls = BACKENDS[key].partition(":")
        _loaded[key] = getattr(importlib.import_module(module), cls)()
    return _loaded[key]


def backend_of(info: FsInfo) -> StorageBackend:
    """The backend of the file system ``info`` describes: the one registered for its type if that backend detects
    it, else the POSIX backend."""
    chosen = backend(info.type)
    return chosen if chosen.detect(info) else backend(FALLBACK)


def backend_for(path: str | os.PathLike) -> StorageBackend:
    """The backend of the file system holding ``path`` (or its nearest existing ancestor)."""
    return backend_of(fs_info(path))


def striping_applies(where: str | os.PathLike | FsInfo) -> bool:
    """Whether the file system holding a path (or described by facts already read) stripes files: its backend
    applies the stripe knobs."""
    return (backend_of(where) if isinstance(where, FsInfo) else backend_for(where)).stripes


def validate_request(request: Layout, fs_type: str | None = None) -> list[str]:
    """Every reason ``request`` cannot be applied on ``fs_type`` (default: by :data:`DEFAULT_STRIPING`'s rules)."""
    chosen = backend(fs_type or DEFAULT_STRIPING)
    return knob_problems(request, chosen, fs_type or DEFAULT_STRIPING) + chosen.validate(request)


def validate_at(request: Layout, info: FsInfo) -> list[str]:
    """Every reason ``request`` cannot be applied on the file system ``info`` describes, by its backend's rules
    (a file system that does not stripe takes any stripe request, checked by :data:`DEFAULT_STRIPING`'s rules so
    that a point is the same wherever it is composed; a knob it does not have is refused)."""
    chosen = backend_of(info)
    where = chosen if chosen.stripes else backend(DEFAULT_STRIPING)
    return knob_problems(request, chosen, info.type) + where.validate(request, info.path)


def knob_problems(request: Layout, chosen: StorageBackend, fs_type: str) -> list[str]:
    """One message per layout knob (``object_size``, ``pool``) given where ``chosen`` does not apply it."""
    given = [k for k in KNOBS if getattr(request, k)]
    return [f"{k}={getattr(request, k)!r} is a layout knob of {KNOBS[k]} only, and data_root is on {fs_type}: "
            f"leave {k} at its default ({'0' if k == 'object_size' else 'empty'}) here"
            for k in given if k not in chosen.knobs]


def describe(request: Layout, fs_type: str | None = None) -> str:
    """The layout's part of a configuration label (``1OST``), by ``fs_type``'s backend (default
    :data:`DEFAULT_STRIPING`'s)."""
    return backend(fs_type or DEFAULT_STRIPING).describe(request)


def apply_layout(directory: str | os.PathLike, request: Layout) -> LayoutRecord:
    """Create ``directory`` and set its layout before any file exists in it, by the backend of its file system.

    Where striping does not apply nothing is set and the record says why; that is not an error. Where it applies,
    a failure to set it is (:class:`~ddlio.errors.LayoutError`)."""
    return backend_for(directory).apply(directory, request)


def read_layout(record: LayoutRecord, files: list[str | os.PathLike]) -> LayoutRecord:
    """Add the layout each of ``files`` really got to ``record`` (where striping applies; else unchanged)."""
    if not record.applicable:
        return record
    chosen = backend(record.fs_type)
    for f in files:
        record.files[Path(f).name] = chosen.read_back(f)
    add_targets = getattr(chosen, "add_targets", None)  # CephFS: where the first objects live, in one call
    if add_targets is not None and record.files:
        add_targets(record.files)
    return record


def read_back(file: str | os.PathLike) -> dict[str, Any]:
    """The layout one file really got, by the backend of its file system."""
    return backend_for(file).read_back(file)


def drop_client_cache(files: list[Path]) -> dict[str, Any]:
    """cache=cold, beyond the kernel's page cache: empty the caches the file system's client keeps of its own
    (ceph-fuse's object cache), by the backend of the files' file system; what is left (``client_cache_bytes``)
    or an ``error`` when it could not be done. {} where the client keeps none."""
    if not files:
        return {}
    info = fs_info(files[0])
    drop = getattr(backend_of(info), "drop_client_cache", None)
    return drop(files, info) if drop is not None else {}
