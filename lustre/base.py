"""The storage-backend protocol: what ddlio asks of the file system that holds a dataset.

A backend knows one kind of file system (Lustre, or any file system without striping). It answers:

- :meth:`StorageBackend.detect`: does ``path`` lie on this kind of file system?
- :meth:`StorageBackend.validate`: every reason a layout request cannot be applied, in the backend's own words;
- :meth:`StorageBackend.apply`: create a dataset directory and set its layout there before any file exists;
- :meth:`StorageBackend.read_back`: the layout one file really got;
- :meth:`StorageBackend.describe`: the label text of a layout (Lustre's ``4OST``).

Backends are found through :mod:`lustre.registry` (file-system type -> backend class path), never imported by
callers directly. The request (:class:`Layout`) and the record (:class:`LayoutRecord`) are the same for all.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol

from lustre.fs import FsInfo


@dataclass(frozen=True)
class Layout:
    """A requested plain layout: ``stripe_count`` as ``lfs setstripe -c`` takes it (-1 = all OSTs, 0 = the file
    system's default, N >= 1) and ``stripe_size`` in bytes (0 = the file system's default); ``object_size`` in
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


class StorageBackend(Protocol):
    """One kind of file system (see the module's docstring); a class with these methods, registered in
    :data:`lustre.registry.BACKENDS`."""

    #: the backend's name (the registry's key)
    name: ClassVar[str]
    #: whether this file system stripes a file over storage targets (the stripe knobs apply here)
    stripes: ClassVar[bool]
    #: the layout knobs beyond stripe and stripe_size it applies (``object_size``, ``pool``); others are refused
    knobs: ClassVar[frozenset[str]]

    def detect(self, info: FsInfo) -> bool:
        """True when the file system these facts describe (statfs and the mount table, read once by
        :func:`lustre.fs.fs_info`; ``info.path`` is the path asked about) is this kind of file system."""
        ...

    def validate(self, request: Layout, where: str | os.PathLike | None = None) -> list[str]:
        """Every reason ``request`` cannot be applied here (at ``where``, when known: a backend may read the layout
        a new directory there would inherit), each naming what is valid ([] when it can)."""
        ...

    def apply(self, directory: str | os.PathLike, request: Layout) -> LayoutRecord:
        """Create ``directory`` and set its layout before any file exists in it; the record of what was set."""
        ...

    def read_back(self, file: str | os.PathLike) -> dict[str, Any]:
        """The layout ``file`` really got."""
        ...

    def describe(self, request: Layout) -> str:
        """The layout's part of a configuration label (Lustre: ``<stripe_count>OST``)."""
        ...
