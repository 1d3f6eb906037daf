"""A synthetic dataset's plan: which file holds which sample and how big each is (bytes), the names of the files
a dataset directory holds beside its data files, and what a reader needs of a dataset on disk (its files, its
manifest once it is complete)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ddlio.errors import DatasetError
from ddlio.lazy import lazy_import
from experiments.formats import FORMATS, FilePayload, get_format

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

MANIFEST = "manifest.json"
SIZES = "sizes.npy"
#: bytes one read of each sample returns, as measured on the written files (int64, one per global sample id)
RECORDS = "records.npy"
#: bytes one whole load of each file reads (``load=whole``; int64, one per file), from the files' structure
LOADS = "loads.npy"


def sample_sizes(seed: int, samples: int, mean: int, stdev: int) -> np.ndarray:
    """Bytes of every sample (int64): ``mean`` each when ``stdev`` is 0, else drawn per sample from a normal
    distribution, deterministic in ``seed``, clipped to [1, 2*mean]."""
    if stdev == 0:
        return np.full(samples, mean, dtype=np.int64)
    rng = np.random.Generator(np.random.PCG64([seed, 0x5A3]))
    sizes = np.rint(rng.normal(mean, stdev, samples)).astype(np.int64)
    return np.clip(sizes, 1, 2 * mean)


def even_split(n: int, parts: int) -> np.ndarray:
    """Boundaries (parts + 1, int64) cutting 0..n into ``parts`` contiguous ranges whose sizes differ by at most
    one: used for samples over files and samples over ranks alike."""
    return np.linspace(0, n, parts + 1).round().astype(np.int64)


@dataclass(frozen=True)
class DatasetPlan:
    """Where every sample lives. Sample ids are global, 0..samples-1, and files hold contiguous id ranges."""

    key: str
    directory: str
    format: str
    format_options: dict[str, Any]
    samples: int
    sample_size: int
    sample_size_stdev: int
    num_files: int
    seed: int
    payload: str = "random"  # random | zeros | a compressibility ratio (see experiments.formats.base.parse_payload)
    sample_shape: tuple[int, ...] = ()  # every sample a uint8 array of this shape (() = byte strings)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sample_shape", tuple(self.sample_shape))  # a list, from JSON

    @classmethod
    def from_point(cls, spec: Any) -> DatasetPlan:
        """The plan of a :class:`~experiments.config.PointSpec`'s dataset."""
        key = spec.dataset_key
        w = spec.workload
        directory = os.path.join(spec.data_root, "datasets", f"{spec.format.name}-{key}")
        return cls(key, directory, spec.format.name, dict(spec.format.options), w.samples, w.sample_size,
                   w.sample_size_stdev, spec.num_files, spec.seed, w.payload, w.sample_shape)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DatasetPlan:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def sizes(self) -> np.ndarray:
        return sample_sizes(self.seed, self.samples, self.sample_size, self.sample_size_stdev)

    @property
    def file_starts(self) -> np.ndarray:
        """First global sample id of each file, plus ``samples`` at the end (num_files + 1 entries)."""
        return even_split(self.samples, self.num_files)

    def file_name(self, f: int) -> str:
        return f"part-{f:05d}{FORMATS[self.format].suffix}"

    def file_path(self, f: int) -> str:
        return os.path.join(self.directory, self.file_name(f))

    def file_payload(self, f: int, sizes: np.ndarray | None = None) -> FilePayload:
        starts = self.file_starts
        sizes = self.sizes() if sizes is None else sizes
        return FilePayload(self.seed, f, sizes[starts[f] : starts[f + 1]], self.payload, self.sample_shape)

    def record_bytes(self) -> np.ndarray:
        """Bytes one read of each sample returns (payload + inline framing, or the encoded size), as recorded
        from the written files at generation; the kernel's byte plan."""
        return np.load(os.path.join(self.directory, RECORDS))

    def load_bytes(self) -> np.ndarray:
        """Bytes one whole load of each file reads (``load=whole``), as recorded at generation (or when a
        ``load=whole`` point first used a dataset generated before); the kernel's byte plan for whole loads."""
        return np.load(os.path.join(self.directory, LOADS))


def data_files(plan: DatasetPlan) -> list[Path]:
    """Every file of the dataset that a reader touches: data files and their sidecars (indexes)."""
    fmt = get_format(plan.format, **plan.format_options)
    out = []
    for f in range(plan.num_files):
        p = Path(plan.file_path(f))
        out.append(p)
        out += fmt.sidecars(p)
    return out


def load_manifest(plan: DatasetPlan) -> dict[str, Any] | None:
    """The dataset's manifest if the dataset is complete and intact (every file present with its recorded size),
    else None."""
    path = Path(plan.directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    except OSError as e:  # EIO, ESTALE ...: not a reason to delete a dataset others may be reading
        raise DatasetError(f"cannot read {path}: {e}") from e
    d = Path(plan.directory)
    if manifest.get("key") != plan.key or not (d / SIZES).is_file() or not (d / RECORDS).is_file():
        return None
    for entry in manifest.get("files", []):
        p = Path(plan.directory) / entry["name"]
        if not p.is_file() or p.stat().st_size != entry["bytes"]:
            return None
    return manifest
