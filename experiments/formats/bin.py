"""Indexed raw binary (``bin``): the samples' bytes back to back in ``<file>.bin``, nothing else, and their offsets
in a sidecar index ``<file>.bin.idx`` (as Megatron-LM's ``.bin`` + ``.idx`` pairs). A sample is one ``os.preadv``
of its bytes into the caller's buffer: the least work any format can do, and the same requests fio makes on the
same file, which makes ``bin`` the reference the other formats (and the kernel itself) are measured against.

The data file carries no framing or checksum: damage to its bytes cannot be detected (as with fio's files); a
missing, corrupt or inconsistent index, or a truncated data file, is a clear :class:`FormatError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.formats.base import FilePayload, FormatConf, Reader, fsync_path
from experiments.formats.indexed import IndexedReader, index_path, write_index
from experiments.formats.ranges import RangedFormat

if TYPE_CHECKING:
    import numpy as np


@dataclass
class BinConf(FormatConf):
    name: str = "bin"


class Bin(RangedFormat):
    name = "bin"
    suffix = ".bin"
    conf = BinConf
    detects_corrupt_data = False

    def finish(self, path: str | os.PathLike, payload: FilePayload, offsets: np.ndarray,
               parts: Sequence[Any] = ()) -> None:
        fsync_path(path)
        write_index(path, offsets)

    def open(self, path: str | os.PathLike) -> Reader:
        return IndexedReader(path)

    def sidecars(self, path: str | os.PathLike) -> list[Path]:
        return [index_path(path)]
