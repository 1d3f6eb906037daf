"""The storage backends (as fsspec's ``known_implementations``): a backend's name maps to the path of its class,
imported on first use (:data:`BACKENDS`), and a file-system type to the backends tried for it, in order
(:data:`CANDIDATES`): the first whose :meth:`~lustre.base.StorageBackend.detect` recognises a path serves it, and
the POSIX backend (no striping) serves whatever no other recognises. CephFS's backend is tried for both of its
clients' types (the kernel's ``ceph`` and ceph-fuse's generic ``fuse``, where it tells CephFS from any other FUSE
file system by its layout xattrs, the POSIX backend taking the others).

A backend from outside the product is tried before the built-in ones of its file-system type: registered in the
process with :func:`register`, or by an entry point of the ``ddlio.storage`` group (``<fs type> = "module:Class"``
in a plug-in's ``[project.entry-points."ddlio.storage"]``), found the first time a path's backend is looked for.

Callers use the functions here (re-exported by :mod:`lustre`), never a backend module: :func:`backend_for` picks the
backend of a path, :func:`apply_layout` and :func:`read_layout` set and read a dataset's layout through it,
:func:`validate_request` checks a request, :func:`describe` labels it, :func:`io_for` hands out its I/O seam.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ddlio.lazy import LazyRegistry
from lustre.base import Layout, LayoutRecord, StorageBackend
from lustre.fs import FsInfo, fs_info
from lustre.io import StorageIO

#: the entry-point group of backends from outside the product (its names are file-system types)
GROUP = "ddlio.storage"
#: backend name -> ``module:Class`` of the built-in backends, each made once on first use
BACKENDS: LazyRegistry = LazyRegistry({
    "lustre": "lustre.lfs:LustreBackend",
    "ceph": "lustre.ceph:CephBackend",
    "posix": "lustre.posix:PosixBackend",
}, get=lambda cls: cls())
#: file-system type (:attr:`lustre.fs.FsInfo.type`) -> the built-in backends tried for it, in order (then POSIX's)
CANDIDATES: dict[str, tuple[str, ...]] = {
    "lustre": ("lustre",),
    "ceph": ("ceph",),
    "fuse": ("ceph",),
}
#: file-system type -> ``module:Class`` of a plug-in's backend (the ``ddlio.storage`` entry points), made once
PLUGINS: LazyRegistry = LazyRegistry({}, get=lambda cls: cls(), group=GROUP)
#: the layout knobs beyond stripe/stripe_size (their owners are the backends whose ``knobs`` name them)
KNOBS = ("object_size", "pool")
#: the backend of every file system that no other candidate recognises
FALLBACK = "posix"
#: whose rules a layout request follows when no file system is named: the stripe fields take ``lfs setstripe``'s
#: values, and a point is checked the same wherever it is composed; its wording labels every layout
DEFAULT_STRIPING = "lustre"

#: file-system type or backend name -> backends registered in this process (:func:`register`), newest first
_registered: dict[str, list[StorageBackend]] = {}


def register(name_or_fs_type: str, backend: StorageBackend | type[StorageBackend]) -> None:
    """Add ``backend`` (an instance, or a class made here) for this process: tried before every other candidate
    for the file-system type ``name_or_fs_type`` (a backend's name works too, where a record names it)."""
    made = backend() if isinstance(backend, type) else backend
    _registered.setdefault(name_or_fs_type, []).insert(0, made)


def candidates(fs_type: str) -> list[StorageBackend]:
    """The backends tried for file-system type ``fs_type``, in order: those registered in this process, a plug-in's
    (entry point), the built-in ones, then the POSIX backend."""
    out = list(_registered.get(fs_type, ()))
    if fs_type not in BACKENDS and fs_type in PLUGINS:  # reads the installed distributions once per process
        out.append(PLUGINS[fs_type])
    out += [BACKENDS[n] for n in CANDIDATES.get(fs_type, ())]
    out.append(BACKENDS[FALLBACK])
    return out


def backend(name: str) -> StorageBackend:
    """The backend named ``name``, or, for a file-system type, the first candidate for it (the POSIX backend for
    a type without one): what a record's ``fs_type`` names, where no path is at hand."""
    if name in BACKENDS and name not in _registered:
        return BACKENDS[name]
    named = _plugin_named(name)
    return named if named is not None else candidates(name)[0]


def _plugin_named(name: str) -> StorageBackend | None:
    """The backend from outside the product (registered, or an entry point's: every plug-in is made) whose
    :attr:`~lustre.base.StorageBackend.name` is ``name``, or None."""
    for made in _registered.values():
        for b in made:
            if b.name == name:
                return b
    for key in PLUGINS:
        if PLUGINS[key].name == name:
            return PLUGINS[key]
    return None


def backend_of(info: FsInfo) -> StorageBackend:
    """The backend of the file system ``info`` describes: the first candidate for its type that detects it."""
    return next(c for c in candidates(info.type) if c.detect(info))


def backend_for(path: str | os.PathLike) -> StorageBackend:
    """The backend of the file system holding ``path`` (or its nearest existing ancestor)."""
    return backend_of(fs_info(path))


def io_for(path: str | os.PathLike) -> StorageIO:
    """The I/O seam (:class:`lustre.io.StorageIO`) of the file system holding ``path``."""
    return backend_for(path).io()


def striping_applies(where: str | os.PathLike | FsInfo) -> bool:
    """Whether the file system holding a path (or described by facts already read) stripes files: its backend
    applies the stripe knobs."""
    return (backend_of(where) if isinstance(where, FsInfo) else backend_for(where)).stripes


def knob_owners() -> dict[str, str]:
    """Each layout knob beyond stripe/stripe_size -> the built-in backends' file systems that have it, in words
    (``CephFS and Lustre``)."""
    made = [BACKENDS[n] for n in sorted(BACKENDS)]
    return {k: " and ".join(b.title for b in made if k in b.knobs) for k in KNOBS}


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
    if not any(getattr(request, k) for k in KNOBS):
        return []
    return chosen.knob_problems(request, fs_type, knob_owners())


def describe(request: Layout, fs_type: str | None = None, named: bool = False) -> str:
    """The layout's part of a configuration label, in the words of ``fs_type``'s backend, or of
    :data:`DEFAULT_STRIPING`'s where it has none of its own (``named``: the special stripe counts by name)."""
    words = backend(fs_type or DEFAULT_STRIPING).describe(request, named)
    return words if words is not None else backend(DEFAULT_STRIPING).describe(request, named) or ""


def label_words(stripe_count: int, fs_type: str | None = None, named: bool = False) -> str:
    """:func:`describe` of a stripe count alone: the label's layout part, as the floor's labels ask for it
    (:mod:`ddlio.identity`, the store's rows)."""
    return describe(Layout(stripe_count=int(stripe_count)), fs_type, named)


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
    if record.files:
        chosen.add_targets(record.files)  # CephFS: where the first objects live, in one call
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
    return backend_of(info).drop_client_cache(files, info)
