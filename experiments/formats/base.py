"""The format abstraction: write a file of samples, open it, read sample ``i`` into a caller's buffer.

Every format module defines one :class:`Format` subclass and registers it (see ``__init__``). Readers count the
bytes that their read calls returned; the kernel compares that count with the plan.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

#: Samples are generated in groups of at most this many bytes, each from its own seeded stream, so a sample's
#: payload can be regenerated on its own (tests) and generation never holds a whole file in memory.
GROUP_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class FilePayload:
    """The deterministic payload of one data file: ``sizes[i]`` bytes for its sample ``i``.

    Bytes are pseudo-random (incompressible), drawn from PCG64 streams keyed by (seed, file index, group).
    """

    seed: int
    file_index: int
    sizes: np.ndarray  # int64, bytes per sample

    def groups(self) -> list[tuple[int, int]]:
        """``[(lo, hi), ...]`` sample ranges generated together (each under GROUP_BYTES, at least one sample)."""
        out, lo, acc = [], 0, 0
        for i, s in enumerate(self.sizes.tolist()):
            if i > lo and acc + s > GROUP_BYTES:
                out.append((lo, i))
                lo, acc = i, 0
            acc += s
        if len(self.sizes):
            out.append((lo, len(self.sizes)))
        return out

    def _group_bytes(self, lo: int, hi: int) -> np.ndarray:
        rng = np.random.Generator(np.random.PCG64([self.seed, self.file_index, lo]))
        n = int(self.sizes[lo:hi].sum())
        return np.frombuffer(rng.bytes(n), dtype=np.uint8)

    def iter_groups(self) -> Iterator[tuple[int, int, np.ndarray]]:
        """Yield ``(lo, hi, bytes of samples lo..hi-1 back to back)``."""
        for lo, hi in self.groups():
            yield lo, hi, self._group_bytes(lo, hi)

    def sample(self, i: int) -> bytes:
        """Sample ``i``'s payload, regenerated (for tests and verification)."""
        for lo, hi in self.groups():
            if lo <= i < hi:
                buf = self._group_bytes(lo, hi)
                start = int(self.sizes[lo:i].sum())
                return buf[start : start + int(self.sizes[i])].tobytes()
        raise IndexError(i)

    @property
    def total_bytes(self) -> int:
        return int(self.sizes.sum())


class Reader:
    """An open data file. ``read(i, out)`` reads sample ``i`` into ``out`` (a uint8 array at least
    ``record_bytes(i)`` long) and returns the number of bytes the read calls returned."""

    num_samples: int

    def read(self, i: int, out: np.ndarray) -> int:
        raise NotImplementedError

    def payload(self, i: int, out: np.ndarray) -> np.ndarray:
        """Read sample ``i`` and return a view of its payload in ``out`` (framing stripped)."""
        n = self.read(i, out)
        return out[:n]

    def record_bytes(self, i: int) -> int:
        """Bytes one read of sample ``i`` returns (payload plus any inline framing)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Format:
    """One file format. Subclasses set ``name``/``suffix`` and implement ``write`` and ``open``."""

    name: ClassVar[str]
    suffix: ClassVar[str]
    #: bytes read per sample beyond its payload (inline framing), for the byte plan
    record_overhead: ClassVar[int] = 0

    def __init__(self, **options: Any) -> None:
        problems = self.option_problems(options)
        if problems:
            from experiments.errors import ConfigError

            raise ConfigError(problems)
        self.options = options

    def expected_record_bytes(self, sizes: np.ndarray) -> np.ndarray | None:
        """Bytes one read of each sample will return, given payload sizes; None where the format cannot know
        before writing (encoded images). Generation checks the files against it."""
        return sizes + self.record_overhead

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        """Every problem with ``options`` (the format's config group values, minus ``name``)."""
        return []

    def write(self, path: str | os.PathLike, payload: FilePayload) -> None:
        """Write all of ``payload``'s samples to ``path``, durably (fsync'd before returning)."""
        raise NotImplementedError

    def open(self, path: str | os.PathLike) -> Reader:
        raise NotImplementedError

    def sidecars(self, path: str | os.PathLike) -> list[Path]:
        """Other files that belong to a data file (an index), for eviction and verification."""
        return []


def fsync_path(path: str | os.PathLike) -> None:
    """Flush a written file to storage, so that page-cache eviction later really empties the cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pread_into(fd: int, out: np.ndarray, nbytes: int, offset: int) -> int:
    """One positioned read of ``nbytes`` at ``offset`` into ``out``; returns what the call returned (bytes)."""
    return os.preadv(fd, [memoryview(out)[:nbytes]], offset)
