"""Any file system without a backend of its own (ext4, xfs, tmpfs, NFS ...): striping does not apply, which is not
an error: the dataset directory is created and the record says why nothing was set."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from lustre import registry
from lustre.base import Layout, LayoutRecord
from lustre.fs import FsInfo, fs_info


class PosixBackend:
    """No striping: :class:`lustre.base.StorageBackend` for every file system the registry has no entry for."""

    name: ClassVar[str] = "posix"
    stripes: ClassVar[bool] = False
    knobs: ClassVar[frozenset[str]] = frozenset()

    def detect(self, info: FsInfo) -> bool:
        return True  # the fallback: any file system that holds data

    def validate(self, request: Layout, where: str | os.PathLike | None = None) -> list[str]:
        return []  # nothing is applied: any stripe request is as good as another

    def apply(self, directory: str | os.PathLike, request: Layout) -> LayoutRecord:
        d = Path(directory)
        info = fs_info(d)
        d.mkdir(parents=True, exist_ok=True)
        return LayoutRecord(False, info.type, request.requested(),
                            reason=f"{info.type} is not Lustre: striping not applied")

    def read_back(self, file: str | os.PathLike) -> dict[str, Any]:
        return {}  # no layout beyond the file system's own

    def describe(self, request: Layout) -> str:
        # the label keeps its form off Lustre (``1N-1P-1OST``): points compare across file systems
        return registry.describe(request)
