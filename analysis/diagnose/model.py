"""The two records of a diagnosis: a :class:`Subject` (what is diagnosed: one configuration of emulated points, or
one observed run from a Darshan log, reduced to the facts the findings need) and a :class:`Finding`."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


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
    epochs: list[EpochFacts] = dataclasses.field(default_factory=list)
    cache_policy: str = ""
    repro: str = ""  # observed: the command that emulates the run (import-darshan --workload-out)
