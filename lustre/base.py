"""The storage-backend base class: what ddlio asks of the file system that holds a dataset, each question with a
default answer (as fsspec's ``AbstractFileSystem``), so that a backend overrides only what its file system does
differently and no caller probes for a method.

A backend knows one kind of file system (Lustre, CephFS, or any file system without striping). It answers:

- :meth:`StorageBackend.detect`: does ``path`` lie on this kind of file system? (several backends may be candidates
  for one file-system type: the first that recognises the path serves it);
- :meth:`StorageBackend.validate`: every reason a layout request cannot be applied, in the backend's own words,
  and :meth:`StorageBackend.knob_problems` for the layout knobs it does not have;
- :meth:`StorageBackend.apply`: create a dataset directory and set its layout there before any file exists;
- :meth:`StorageBackend.read_back` / :meth:`StorageBackend.add_targets`: the layout one file really got, and where
  its data lives;
- :meth:`StorageBackend.describe`: the label text of a layout (Lustre's, the default wording of every backend);
- :meth:`StorageBackend.drop_client_cache`: empty a cache the file system's client keeps of its own;
- :meth:`StorageBackend.io`: its I/O seam (:class:`lustre.io.StorageIO`; POSIX by default);
- :attr:`StorageBackend.install`: how to install what the backend needs.

Backends are found through :mod:`lustre.registry` (file-system type -> candidate backends; :func:`lustre.register`
and the ``ddlio.storage`` entry points add more), never imported by callers directly. The request
(:class:`Layout`) and the record (:class:`LayoutRecord`) are the same for all.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from lustre.fs import FsInfo, fs_info
from lustre.io import PosixIO, StorageIO


@dataclass(frozen=True)
class Layout:
    """A requested plain layout: ``stripe_count`` as ``lfs setstripe -c`` takes it (-1 = all storage targets, 0 =
    the file system's default, N >= 1) and ``stripe_size`` in bytes (0 = the file system's default); ``object_size`` in
    bytes and ``pool``, on the backends that have them (CephFS; Lustre has pools), 0 / "" = the file system's."""

    stripe_count: int = 1
    stripe_size: int = 1024 * 1024
    object_size: int = 0
    pool: str = ""

    def requested(self) -> dict[str, Any]:
        """The request as a layout record stores it (``object_size`` and ``pool`` only when given)."""
        out: dict[str, Any] = {"stripe_count": self.stripe_count, "stripe_size": self.stripe_size}
        if self.object_size:
            out["object_size"] = self.object_size
        if self.pool:
            out["pool"] = self.pool
        return out


@dataclass
class LayoutRecord:
    """What layout a dataset really has, as stored with every result.

    ``applicable`` is False where the file system does not stripe (with the ``reason``); ``applied`` holds what the
    backend read back for the directory, ``files`` per file (Lustre: ``stripe_count``, ``stripe_size`` in bytes,
    ``pattern``, ``stripe_offset``, ``osts``, ``components``; CephFS: ``stripe_count``, ``stripe_size``,
    ``object_size`` in bytes, ``pool``, ``inode``, ``targets``: the OSDs of its first objects)."""

    applicable: bool
    fs_type: str
    requested: dict[str, int]
    applied: dict[str, Any] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class StorageBackend:
    """One kind of file system (see the module's docstring). Every method has a default: a file system that does
    not stripe, reached through POSIX calls. A backend is a subclass that overrides what differs, registered in
    :mod:`lustre.registry` (or through :func:`lustre.register` / the ``ddlio.storage`` entry points)."""

    #: the backend's name (its key in the registry, and a striping point's ``fs_type``): every backend sets its own
    name: ClassVar[str] = ""
    #: whether this file system stripes a file over storage targets (the stripe knobs apply here)
    stripes: ClassVar[bool] = False
    #: the layout knobs beyond stripe and stripe_size it applies (``object_size``, ``pool``); others are refused
    knobs: ClassVar[frozenset[str]] = frozenset()
    #: the file system's name in messages (``CephFS``): which backends have a knob is said in these words
    title: ClassVar[str] = ""
    #: how to install what the backend needs (its command-line tools, a client library), said where it is missing
    install: ClassVar[str] = ""

    def detect(self, info: FsInfo) -> bool:
        """True when the file system these facts describe (statfs and the mount table, read once by
        :func:`lustre.fs.fs_info`; ``info.path`` is the path asked about) is this backend's. Default: every file
        system of the type the backend is registered for."""
        return True

    def validate(self, request: Layout, where: str | os.PathLike | None = None) -> list[str]:
        """Every reason ``request`` cannot be applied here (at ``where``, when known: a backend may read the layout
        a new directory there would inherit), each naming what is valid ([] when it can). Default: none."""
        return []

    def knob_problems(self, request: Layout, fs_type: str, owners: dict[str, str]) -> list[str]:
        """One message per layout knob (``object_size``, ``pool``) given in ``request`` that this backend does not
        apply (:attr:`knobs`); ``owners``: each knob's file systems, in words (``CephFS and Lustre``)."""
        given = [k for k in owners if getattr(request, k)]
        return [f"{k}={getattr(request, k)!r} is a layout knob of {owners[k]} only, and data_root is on {fs_type}: "
                f"leave {k} at its default ({'0' if k == 'object_size' else 'empty'}) here"
                for k in given if k not in self.knobs]

    def apply(self, directory: str | os.PathLike, request: Layout) -> LayoutRecord:
        """Create ``directory`` and set its layout before any file exists in it; the record of what was set.
        Default: nothing is set (no striping), which is not an error: the record says why."""
        d = Path(directory)
        info = fs_info(d)
        d.mkdir(parents=True, exist_ok=True)
        return LayoutRecord(False, info.type, request.requested(),
                            reason=f"{info.type} is not Lustre: striping not applied")

    def read_back(self, file: str | os.PathLike) -> dict[str, Any]:
        """The layout ``file`` really got. Default: {} (no layout beyond the file system's own)."""
        return {}

    def add_targets(self, files: dict[str, dict[str, Any]]) -> None:
        """Add where each file's data lives to the read-back layouts ``files`` (file name -> layout), in place and
        in one go. Default: nothing to add."""

    def describe(self, request: Layout, named: bool = False) -> str | None:
        """The layout's part of a configuration label, in this backend's words; with ``named``, the special stripe
        counts by name (the file system's default, all targets) as summaries show them. Default: None, the
        default striping backend's words (:func:`lustre.describe`), so that points compare across file systems."""
        return None

    def drop_client_cache(self, files: list[Path], info: FsInfo) -> dict[str, Any]:
        """cache=cold, beyond the page cache: empty the cache the client keeps of its own (ceph-fuse's object
        cache): what is left (``client_cache_bytes``, bytes) or an ``error``. Default: {} (the client keeps
        none)."""
        return {}

    def io(self) -> StorageIO:
        """This file system's I/O seam (open, read a range, write, list, evict, count). Default: POSIX's."""
        return PosixIO()
