"""Synthetic datasets: the plan (which file holds which sample, how big each is), MPI-parallel generation, the
manifest, and a content-keyed cache under ``data_root/datasets``.

A dataset directory is ``<data_root>/datasets/<format>-<dataset_key>``. Its ``manifest.json`` is written last and
is the completion mark: a directory without one, or whose files differ in size from it, is rebuilt, never read.
Generation holds an exclusive lock (``flock``) so two points that need the same bytes build them once.

Run as an MPI program, ``python -m experiments.dataset PLAN.json``: rank r writes files r, r+P, r+2P, ...
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.errors import DatasetError
from experiments.formats import FORMATS, FilePayload, get_format

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
        directory = os.path.join(spec.data_root, "datasets", f"{spec.format}-{key}")
        return cls(key, directory, spec.format, dict(spec.format_options), spec.samples, spec.sample_size,
                   spec.sample_size_stdev, spec.num_files, spec.seed, spec.payload,
                   tuple(getattr(spec, "sample_shape", ())))

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


# ----------------------------------------------------------------------------------------------- generation
def generate_files(plan: DatasetPlan, rank: int, size: int) -> list[str]:
    """Write the files this rank owns (f % size == rank); returns their names."""
    fmt = get_format(plan.format, **plan.format_options)
    sizes = np.load(os.path.join(plan.directory, SIZES))
    written = []
    for f in range(rank, plan.num_files, size):
        fmt.write(plan.file_path(f), plan.file_payload(f, sizes))
        written.append(plan.file_name(f))
    return written


def _mpi_main(plan_path: str) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    plan = DatasetPlan.from_dict(json.loads(Path(plan_path).read_text()))
    try:
        generate_files(plan, comm.rank, comm.size)
    except Exception as e:  # one rank's failure must end the step, not hang it
        print(f"rank {comm.rank}: dataset generation failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        comm.Abort(1)
    comm.Barrier()
    return 0


# ------------------------------------------------------------------------------------------- cache + manifest
@contextlib.contextmanager
def exclusive(path: Path, stale_s: float = 6 * 3600) -> Iterator[None]:
    """An exclusive lock on ``path`` across processes and nodes: ``flock``, and where the file system refuses it
    (Lustre mounted without ``flock``: ENOSYS/EOPNOTSUPP) a lock file created with O_EXCL, holding its owner,
    polled, and taken over once older than ``stale_s`` seconds (its owner died)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except OSError as e:
            if e.errno not in (errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK):
                raise
        else:
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
            return
    excl = path.with_name(path.name + ".excl")
    while True:
        try:
            fd = os.open(excl, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            try:
                if time.time() - excl.stat().st_mtime > stale_s:
                    excl.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
            time.sleep(1.0)
    try:
        os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
        os.close(fd)
        yield
    finally:
        excl.unlink(missing_ok=True)


def dataset_lock(plan: DatasetPlan) -> contextlib.AbstractContextManager[None]:
    """Exclusive lock on a dataset key (a lock file beside the dataset directory)."""
    return exclusive(Path(plan.directory).parent / f".{Path(plan.directory).name}.lock")


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


def invalidate_dataset(plan: DatasetPlan, reason: str) -> str:
    """Mark a dataset whose bytes failed verification while being read (a checksum, a header) as incomplete: its
    manifest is renamed (kept, with the reason beside it, for inspection), so the next run that needs it rebuilds
    it. Returns the manifest's new name (or a note that another job already did it)."""
    d = Path(plan.directory)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    with dataset_lock(plan):
        if not (d / MANIFEST).exists():
            return "already invalidated"
        dest = d / f"{MANIFEST}.invalid-{stamp}"
        os.replace(d / MANIFEST, dest)
        (d / f"invalid-{stamp}.txt").write_text(reason)
    return dest.name


def whole_loads(plan: DatasetPlan) -> np.ndarray | None:
    """Bytes one whole load of each file reads (int64 per file, from each file's structure: no data is read), or
    None for a format that cannot load files whole."""
    fmt = get_format(plan.format, **plan.format_options)
    loads = [fmt.whole_load_bytes(plan.file_path(f)) for f in range(plan.num_files)]
    return None if any(n is None for n in loads) else np.array(loads, dtype=np.int64)


def verify_dataset(plan: DatasetPlan, sizes: np.ndarray) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Open every file and check its sample count (and, where the format can predict them, its record sizes)
    against the plan. Returns the files' manifest entries and the bytes per record of every sample."""
    fmt = get_format(plan.format, **plan.format_options)
    starts = plan.file_starts
    entries = []
    records = np.zeros(plan.samples, dtype=np.int64)
    for f in range(plan.num_files):
        path = plan.file_path(f)
        if not os.path.isfile(path):
            raise DatasetError(f"generation left no file {path}")
        n_want = int(starts[f + 1] - starts[f])
        with fmt.open(path) as r:
            got = np.array([r.record_bytes(i) for i in range(r.num_samples)], dtype=np.int64)
        want = fmt.expected_record_bytes(sizes[starts[f] : starts[f + 1]])
        if len(got) != n_want or (want is not None and not np.array_equal(got, want)) or np.any(got <= 0):
            raise DatasetError(
                f"{path}: holds {len(got)} samples / {int(got.sum())} bytes, planned {n_want}"
                + (f" / {int(want.sum())}" if want is not None else "")
            )
        records[starts[f] : starts[f + 1]] = got
        entries.append({"name": plan.file_name(f), "bytes": os.path.getsize(path), "samples": len(got)})
        for side in fmt.sidecars(path):
            entries.append({"name": side.name, "bytes": side.stat().st_size, "samples": 0})
    return entries, records


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write JSON so that readers see the old file or the whole new one: temp file, fsync, rename."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class DatasetInfo:
    """A ready dataset: its plan, manifest, and whether this call generated it (and in how many seconds)."""

    plan: DatasetPlan
    manifest: dict[str, Any]
    generated: bool
    seconds: float


def ensure_dataset(
    plan: DatasetPlan,
    layout: Any,
    run_generation: Callable[[str, int], None],
    ranks: int,
) -> DatasetInfo:
    """Reuse the dataset if complete, else (re)build it: lock, empty directory with its Lustre layout set before
    any file exists, parallel generation through ``run_generation(plan_json_path, ranks)``, verification, then
    the manifest last.

    ``layout`` is a :class:`lustre.layout.Layout`.
    """
    from lustre.layout import apply_layout

    with dataset_lock(plan):
        manifest = load_manifest(plan)
        if manifest is not None:
            d = Path(plan.directory)
            if not (d / LOADS).is_file() and get_format(plan.format, **plan.format_options).loads_whole:
                loads = whole_loads(plan)  # generated before whole loads were planned: add their plan
                if loads is not None:
                    np.save(d / LOADS, loads)
            return DatasetInfo(plan, manifest, False, 0.0)
        t0 = time.perf_counter()
        d = Path(plan.directory)
        if d.exists():
            shutil.rmtree(d)  # incomplete or damaged: never read, rebuilt
        record = apply_layout(d, layout)
        sizes = plan.sizes()
        np.save(d / SIZES, sizes)
        plan_path = d / "plan.json"
        write_json_atomic(plan_path, plan.to_dict())
        gen_ranks = max(1, min(ranks, plan.num_files))
        run_generation(str(plan_path), gen_ranks)
        entries, records = verify_dataset(plan, sizes)
        np.save(d / RECORDS, records)
        loads = whole_loads(plan)
        if loads is not None:
            np.save(d / LOADS, loads)
        from lustre.layout import read_layout

        record = read_layout(record, [d / e["name"] for e in entries if e["samples"]][:8])
        manifest = {
            "key": plan.key,
            "plan": plan.to_dict(),
            "files": entries,
            "payload_bytes": int(sizes.sum()),
            "record_bytes": int(records.sum()),
            "disk_bytes": sum(e["bytes"] for e in entries),
            "layout": record.to_dict(),
            "generated_on": socket.gethostname(),
            "generation_ranks": gen_ranks,
            "generation_s": time.perf_counter() - t0,
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            # reads are tracked (experiments.cache.claim_first_read): the first one since generation is known
            "tracks_reads": True,
        }
        write_json_atomic(d / MANIFEST, manifest)
        return DatasetInfo(plan, manifest, True, time.perf_counter() - t0)


if __name__ == "__main__":
    sys.exit(_mpi_main(sys.argv[1]))
