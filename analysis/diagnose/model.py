"""The two records of a diagnosis: a :class:`Subject` (what is diagnosed: one configuration of emulated points, or
one observed run from a Darshan log, reduced to the facts the findings need) and a :class:`Finding`."""

from __future__ import annotations

import dataclasses
import enum
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload


class Level(enum.IntEnum):
    """How bad a finding is; ordered so ``level >= Level.WARN`` reads as "warn or worse"."""

    OK = 0
    INFO = 1
    WARN = 2
    HIGH = 3

    def __str__(self) -> str:
        return self.name.lower()


@dataclasses.dataclass
class Finding:
    """One coded finding about one subject. ``value`` is what was measured, ``threshold`` what it was compared with
    (same unit, named in ``unit``); ``evidence`` names ranks, files and epochs; ``fix`` holds ddlio overrides to sweep
    next; ``snippet`` the Lustre or HDF5 change where the fix is outside ddlio."""

    code: str
    level: Level
    title: str
    message: str
    value: float | None = None
    threshold: float | None = None
    unit: str = ""
    evidence: list[str] = dataclasses.field(default_factory=list)
    fix: list[str] = dataclasses.field(default_factory=list)
    snippet: str = ""
    counted: dict[str, Any] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["level"] = str(self.level)
        return d


@dataclasses.dataclass(slots=True)
class EpochFacts:
    """One epoch of an emulated point: seconds are means over ranks unless named slowest/fastest. Slotted: a
    diagnosis holds one per epoch of the store."""

    point_key: str
    epoch: int
    samples: int
    meta_ops: int
    au: float | None
    wall_s: float
    read_s: float
    meta_s: float
    compute_s: float
    rank_io_s: list[float]
    first_read: bool | None
    cache: str
    cache_note: str


class EpochTable(Sequence[EpochFacts]):
    """A configuration's epochs held as columns (typed arrays; the texts shared), each made an
    :class:`EpochFacts` only when read: about 130 bytes an epoch where the objects take about 1 KB, so a
    diagnosis of a million epochs holds ~130 MiB of them."""

    def __init__(self) -> None:
        self._keys: list[str] = []  # per epoch: its point's key, cache state and note (shared text objects)
        self._cache: list[str] = []
        self._note: list[str] = []
        self._ints = array("q")  # epoch, samples, meta_ops, first_read (-1: unknown)  per epoch
        self._floats = array("d")  # au (NaN: none), wall_s, read_s, meta_s, compute_s  per epoch
        self._has_au = array("b")
        self._ranks = array("d")  # every epoch's rank I/O times, one after the other
        self._rank_end = array("q")

    def add(self, point_key: str, epoch: int, samples: int, meta_ops: int, au: float | None, wall_s: float,
            read_s: float, meta_s: float, compute_s: float, rank_io_s: Iterable[float], first_read: bool | None,
            cache: str, cache_note: str) -> None:
        """Append one epoch (seconds as :class:`EpochFacts` has them)."""
        self._keys.append(point_key)
        self._cache.append(cache)
        self._note.append(cache_note)
        self._ints.extend((epoch, samples, meta_ops, -1 if first_read is None else int(first_read)))
        self._has_au.append(au is not None)
        self._floats.extend((float("nan") if au is None else au, wall_s, read_s, meta_s, compute_s))
        self._ranks.extend(rank_io_s)
        self._rank_end.append(len(self._ranks))

    def __len__(self) -> int:
        return len(self._keys)

    @overload
    def __getitem__(self, i: int) -> EpochFacts: ...

    @overload
    def __getitem__(self, i: slice) -> list[EpochFacts]: ...

    def __getitem__(self, i: int | slice) -> EpochFacts | list[EpochFacts]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        epoch, samples, meta_ops, first = self._ints[4 * i:4 * i + 4]
        au, wall, read, meta, compute = self._floats[5 * i:5 * i + 5]
        start = self._rank_end[i - 1] if i else 0
        return EpochFacts(point_key=self._keys[i], epoch=epoch, samples=samples, meta_ops=meta_ops,
                          au=au if self._has_au[i] else None, wall_s=wall, read_s=read, meta_s=meta,
                          compute_s=compute, rank_io_s=self._ranks[start:self._rank_end[i]].tolist(),
                          first_read=None if first < 0 else bool(first), cache=self._cache[i],
                          cache_note=self._note[i])

    def __iter__(self) -> Iterator[EpochFacts]:
        return (self[i] for i in range(len(self)))


@dataclasses.dataclass
class Subject:
    """What one diagnosis looks at. Counts are read calls at the file-system (POSIX) layer; bytes are bytes."""

    kind: str  # "configuration" (emulated points) | "observed" (a Darshan log)
    key: str
    label: str
    points: list[str]
    ranks: int = 0
    access: str = ""
    format: str = ""
    format_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    shuffle: str = ""
    sample_size: int = 0
    num_files: int = 0
    file_bytes: int = 0  # bytes of one data file (mean)
    reads: int = 0
    writes: int = 0
    small_reads: int = 0
    small_writes: int = 0
    app_bytes: int | None = None  # bytes the application (loader, MPI-IO) asked for
    fs_bytes: int | None = None  # bytes the read calls returned
    storage_bytes: int | None = None  # bytes fetched from storage
    below_max_offset: int | None = None  # sum over files of their highest offset read + 1 (observed)
    file_not_aligned: int | None = None
    alignment: int | None = None  # bytes: the stripe size of the layout applied (Darshan's POSIX_FILE_ALIGNMENT)
    random_reads: int | None = None
    shared_reads: int = 0
    shared_small_reads: int = 0
    shared_writes: int = 0
    shared_small_writes: int = 0
    shared_files: list[str] = dataclasses.field(default_factory=list)
    # shared files whose slowest rank differs from the fastest (observed): (file, bytes fraction, time fraction)
    shared_imbalance: list[tuple[str, float, float]] = dataclasses.field(default_factory=list)
    # per-file read imbalance across ranks (observed): (file, (max - min) / max)
    file_imbalance: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    file_write_imbalance: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    stripe_count: int | None = None  # of the layout applied; None when striping does not apply
    stripe_size: int | None = None
    epochs: Sequence[EpochFacts] = dataclasses.field(default_factory=list)  # an EpochTable when read
    cache_policy: str = ""
    repro: str = ""  # observed: the command that emulates the run (import-darshan --workload-out)
    fs_type: str = ""  # the data's file system (lustre, cephfs, ext4, ...; "" unknown): the advice fits it
    reader: str = ""  # the loader (native, tf, torch; "" for an observed run): the advice fits it
    size_bins: bool = True  # whether the read calls' size bins were recorded (small reads can be judged)
