"""Any file system without a backend of its own (ext4, xfs, tmpfs, NFS ...): striping does not apply, which is not
an error: the dataset directory is created and the record says why nothing was set. Every answer is the base
class's default (:class:`lustre.base.StorageBackend`), I/O included (:class:`lustre.io.PosixIO`)."""

from __future__ import annotations

from typing import ClassVar

from lustre.base import StorageBackend
from lustre.fs import FsInfo


class PosixBackend(StorageBackend):
    """No striping: the backend of every file system for which no other candidate recognises the path."""

    name: ClassVar[str] = "posix"

    def detect(self, info: FsInfo) -> bool:
        return True  # the fallback: any file system that holds data
