"""HDF5 through h5py: one file holds a 1-D uint8 dataset ``data`` (samples back to back) and ``offsets``
(int64, n+1 entries: sample i is ``data[offsets[i]:offsets[i+1]]``), so fixed and variable sample sizes share one
layout. Storage is contiguous or chunked (chunk = ``chunk_samples`` mean-size samples), optionally compressed.
That is ``layout=bytes`` (the default). ``layout=array`` is how HDF5 training sets are written (DeepGalaxy,
CosmoFlow, ImageNet-in-HDF5): one N-d uint8 dataset ``images`` of shape ``(n, *workload.sample_shape)``, chunks of
``chunk_samples`` whole images (shape ``(k, *sample_shape)``; 0 = contiguous), optionally compressed, and an int64
``labels`` dataset of n; a sample is read by image index, ``images[i]``.

HDF5's own knobs decide what the file system is asked for. Reading (out of the dataset key): the data sieve
buffer (``sieve_buf_size``: a contiguous read smaller than it is served by filling the buffer with one read of its
size; a read at least as large goes straight to the file), the chunk cache (``rdcc_nbytes``, ``rdcc_nslots``), the
file driver (``sec2``: ``pread``; ``stdio``: buffered ``fread``; ``core``: the whole file read into memory at open)
and the page buffer (``page_buf_size``, for files written with ``fs_strategy=page``). Writing (in the dataset key):
paged file space management (``fs_strategy=page``, ``fs_page_size``) and ``H5Pset_alignment`` (``alignment``,
``alignment_threshold``). At their defaults (HDF5's own) the knobs stay out of the keys, and files are opened as
before they existed (``h5py.File(path, "r")``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from ddlio.errors import FormatError
from ddlio.lazy import lazy_import
from experiments.formats.base import ArrayReturningReader, FilePayload, FormatConf, Reader, fsync_path
from experiments.formats.indexed import offsets_of
from experiments.formats.ranges import RangedFormat, Written

np = lazy_import("numpy", globals(), "np")  # numpy on first use: see ddlio/lazy.py

COMPRESSIONS = ("none", "gzip", "lzf")
DRIVERS = ("sec2", "stdio", "core")
FS_STRATEGIES = ("default", "page")
LAYOUTS = ("bytes", "array")


@dataclass
class HDF5Conf(FormatConf):
    name: str = "hdf5"
    # bytes: a 1-D uint8 stream + offsets | array: an N-d uint8 dataset `images` (n, *workload.sample_shape)
    # chunked by image, with int64 `labels` (as DeepGalaxy, CosmoFlow write HDF5; needs workload.sample_shape)
    layout: str = LAYOUTS[0]
    # samples per HDF5 chunk; 0 = contiguous storage (no chunking)
    chunk_samples: int = 0
    # none | gzip | lzf (needs chunk_samples >= 1)
    compression: str = "none"
    # --- HDF5's own knobs, at HDF5's own defaults (H5Pcreate(H5P_FILE_ACCESS / H5P_FILE_CREATE) in HDF5 1.14;
    # in a key only when not at their default; see the module's docstring)
    # data sieve buffer, bytes (reading): a read smaller than it fills it with one read of its size
    sieve_buf_size: int = 65536
    # raw-data chunk cache per dataset: bytes and hash slots (reading; chunked storage)
    rdcc_nbytes: int = 1048576
    rdcc_nslots: int = 521
    # file driver for reading: sec2 (pread) | stdio (buffered fread) | core (whole file into memory at open)
    driver: str = "sec2"
    # file space strategy (bytes on disk): default | page (paged aggregation, pages of fs_page_size bytes)
    fs_strategy: str = "default"
    fs_page_size: int = 4096
    # page buffer, bytes (reading; needs fs_strategy=page; 0 = none)
    page_buf_size: int = 0
    # H5Pset_alignment (bytes on disk): objects of at least alignment_threshold bytes start at a multiple of
    # alignment (e.g. the stripe size); 1 = no alignment
    alignment: int = 1
    alignment_threshold: int = 1


#: HDF5's own knobs and their defaults (HDF5Conf's, HDF5's own): at these values they stay out of the keys
DEFAULTS: dict[str, Any] = {k: getattr(HDF5Conf, k) for k in (
    "sieve_buf_size", "rdcc_nbytes", "rdcc_nslots", "driver", "page_buf_size", "fs_strategy", "fs_page_size",
    "alignment", "alignment_threshold")}
READ_KNOBS = ("sieve_buf_size", "rdcc_nbytes", "rdcc_nslots", "driver", "page_buf_size")
#: HDF5's limit on one chunk (bytes)
MAX_CHUNK_BYTES = 2**32 - 1


def open_file(path: str | os.PathLike, options: dict[str, Any]) -> Any:
    """``path`` opened read-only as the options ask: ``h5py.File(path, "r")`` at HDF5's defaults, else through a
    file access property list with the driver, sieve buffer, chunk cache and page buffer set."""
    import h5py  # lazy: start-up (h5py only where HDF5 files are opened)

    knobs = {k: options.get(k, DEFAULTS[k]) for k in READ_KNOBS}
    if all(knobs[k] == DEFAULTS[k] for k in READ_KNOBS):
        return h5py.File(path, "r")
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_EARLIEST, h5py.h5f.LIBVER_LATEST)  # as h5py.File does
    if knobs["driver"] == "stdio":
        fapl.set_fapl_stdio()
    elif knobs["driver"] == "core":
        fapl.set_fapl_core(1 << 20, False)  # read the file into memory at open; never write it back
    else:
        fapl.set_fapl_sec2()
    fapl.set_sieve_buf_size(int(knobs["sieve_buf_size"]))
    mdc, _, _, w0 = fapl.get_cache()
    fapl.set_cache(mdc, int(knobs["rdcc_nslots"]), int(knobs["rdcc_nbytes"]), w0)
    if knobs["page_buf_size"]:
        fapl.set_page_buffer_size(int(knobs["page_buf_size"]), 0, 0)
    fid = h5py.h5f.open(os.fsencode(os.fspath(path)), h5py.h5f.ACC_RDONLY, fapl=fapl)
    return h5py.File(fid)


class HDF5ArrayReader(ArrayReturningReader):
    """``layout=array``: sample i is ``images[i]``, an array of the sample shape."""

    def __init__(self, path: str | os.PathLike, options: dict[str, Any] | None = None) -> None:
        try:
            self._f = open_file(path, options or {})
            self._ds = self._f["images"]
            labels = self._f["labels"]
        except (OSError, KeyError) as e:
            raise FormatError(f"{path}: not a readable ddlio HDF5 image array file ({e})") from e
        if self._ds.dtype != np.uint8 or self._ds.ndim < 2 or labels.shape != self._ds.shape[:1]:
            self._f.close()
            raise FormatError(f"{path}: corrupt: images are {self._ds.dtype} {self._ds.shape}, labels "
                              f"{labels.shape}; expected uint8 (n, *sample_shape) and n labels")
        self.num_samples = int(self._ds.shape[0])
        self.sample_bytes = int(np.prod(self._ds.shape[1:]))
        self._last = np.empty(0, dtype=np.uint8)

    def record_bytes(self, i: int) -> int:
        return self.sample_bytes

    def record_offset(self, i: int) -> int:
        base = self._ds.id.get_offset()  # None for chunked storage
        return -1 if base is None else base + i * self.sample_bytes

    def read(self, i: int, out: np.ndarray) -> int:
        """``images[i]``, as a training script reads an image (h5py's fast path, a new array; ``out`` is not
        used: ``read_direct`` into it measured 9x slower per call here, 150 µs against 17 µs for 48 KiB)."""
        try:
            self._last = self._ds[i]
        except (OSError, ValueError) as e:
            raise FormatError(f"{self._f.filename}: reading sample {i} failed ({e})") from e
        return self._last.nbytes

    def close(self) -> None:
        self._f.close()


class HDF5Reader(ArrayReturningReader):
    def __init__(self, path: str | os.PathLike, options: dict[str, Any] | None = None) -> None:
        try:
            self._f = open_file(path, options or {})
            self._ds = self._f["data"]
            self.offsets = self._f["offsets"][:]
        except (OSError, KeyError) as e:
            raise FormatError(f"{path}: not a readable ddlio HDF5 file ({e})") from e
        self.num_samples = len(self.offsets) - 1
        self._starts = self.offsets.tolist()
        self._last = np.empty(0, dtype=np.uint8)
        if self.offsets[-1] > self._ds.shape[0]:
            raise FormatError(
                f"{path}: offsets point past the end of the data ({self.offsets[-1]} > {self._ds.shape[0]})"
            )

    def record_bytes(self, i: int) -> int:
        return int(self.offsets[i + 1] - self.offsets[i])

    def record_offset(self, i: int) -> int:
        base = self._ds.id.get_offset()  # None for chunked storage: HDF5 decides where each chunk lives
        return -1 if base is None else base + int(self.offsets[i])

    def read(self, i: int, out: np.ndarray) -> int:
        """``ds[a:b]``, as a training script reads an HDF5 sample: h5py's fast path for simple slices, which
        returns a new array (``out`` is not used). ``read_direct`` into a preallocated buffer would avoid that
        allocation but costs ~7x more per call in h5py 3 (44 µs against 6 µs for 16 KiB, measured here)."""
        a, b = self._starts[i], self._starts[i + 1]
        try:
            self._last = self._ds[a:b]
        except (OSError, ValueError) as e:
            raise FormatError(f"{self._f.filename}: reading sample {i} failed ({e})") from e
        return self._last.nbytes

    def close(self) -> None:
        self._f.close()


class HDF5(RangedFormat):
    name = "hdf5"
    writer_libraries = ("h5py",)
    suffix = ".h5"
    conf = HDF5Conf
    read_options = frozenset(READ_KNOBS)
    keyless_defaults: ClassVar[dict[str, Any]] = {**DEFAULTS, "layout": LAYOUTS[0]}
    layouts = LAYOUTS
    shaped_layouts = frozenset({"array"})

    @classmethod
    def problems(cls, options: dict[str, Any], sample_shape: tuple[int, ...] | None = None) -> list[str]:
        out = super().problems(options, sample_shape)
        chunk = options.get("chunk_samples", 0)
        if (sample_shape and options.get("layout") == "array" and isinstance(chunk, int)
                and chunk * int(np.prod(sample_shape)) >= MAX_CHUNK_BYTES):
            out.append(f"format.chunk_samples={chunk} images of workload.sample_shape={list(sample_shape)} make "
                       f"chunks of {chunk * int(np.prod(sample_shape))} bytes: HDF5 chunks are under 4 GiB; use fewer")
        return out

    @classmethod
    def option_problems(cls, options: dict[str, Any]) -> list[str]:
        out = []
        chunk = options.get("chunk_samples", 0)
        comp = options.get("compression", "none")
        if not isinstance(chunk, int) or chunk < 0:
            out.append(f"format.chunk_samples={chunk!r} must be 0 (contiguous) or a number of samples >= 1")
        if comp not in COMPRESSIONS:
            out.append(f"format.compression={comp!r} is unknown: choose one of {', '.join(COMPRESSIONS)}")
        elif comp != "none" and chunk == 0:
            out.append(f"format.compression={comp} needs chunked storage: set format.chunk_samples >= 1")
        o = {**DEFAULTS, **{k: v for k, v in options.items() if k in DEFAULTS}}
        if o["driver"] not in DRIVERS:
            out.append(f"format.driver={o['driver']!r} is unknown: choose one of {', '.join(DRIVERS)}")
        if o["fs_strategy"] not in FS_STRATEGIES:
            out.append(f"format.fs_strategy={o['fs_strategy']!r} is unknown: choose one of {', '.join(FS_STRATEGIES)}")
        for k, low in (("sieve_buf_size", 0), ("rdcc_nbytes", 0), ("rdcc_nslots", 1), ("page_buf_size", 0),
                       ("fs_page_size", 512), ("alignment", 1), ("alignment_threshold", 1)):
            if not isinstance(o[k], int) or isinstance(o[k], bool) or o[k] < low:
                out.append(f"format.{k}={o[k]!r} must be a whole number of bytes >= {low}")
        if isinstance(o["page_buf_size"], int) and o["page_buf_size"] > 0:
            if o["fs_strategy"] != "page":
                out.append("format.page_buf_size needs files written with paged space management: set "
                           "format.fs_strategy=page")
            elif isinstance(o["fs_page_size"], int) and o["page_buf_size"] < o["fs_page_size"]:
                out.append(f"format.page_buf_size={o['page_buf_size']} must hold at least one page "
                           f"(format.fs_page_size={o['fs_page_size']})")
        return out

    def _file_kw(self) -> dict[str, Any]:
        o = {**DEFAULTS, **self.options}
        if o["fs_strategy"] == "page":
            kw_file: dict[str, Any] = {"fs_strategy": "page", "fs_page_size": int(o["fs_page_size"])}
        else:
            kw_file = {}
        if o["alignment"] != 1:
            kw_file.update(alignment_interval=int(o["alignment"]), alignment_threshold=int(o["alignment_threshold"]))
        return kw_file

    def ranged(self) -> bool:
        """``layout=bytes`` with contiguous storage: the samples lie back to back at the storage's address, known
        once h5py has allocated it (:meth:`begin`), so several processes may write one file."""
        return self.layout == "bytes" and not self.options.get("chunk_samples", 0)

    def begin(self, path: str | os.PathLike, payload: FilePayload, sized: bool = False) -> np.ndarray:
        """Contiguous storage: h5py creates the file, ``data`` (HDF5 allocates all of its storage at its first
        write: one byte here, which the records overwrite) and ``offsets``, in the order and at the addresses one
        writer's :meth:`write` has always given them, and closes it; returns the byte offset in the file of every
        record and of the end (int64, n+1). The file is at its final size already (``sized`` changes nothing)."""
        import h5py  # lazy: start-up (h5py only where HDF5 files are written)

        offsets = offsets_of(payload.sizes)
        total = int(offsets[-1])
        with h5py.File(path, "w", **self._file_kw()) as f:
            ds = f.create_dataset("data", shape=(total,), dtype=np.uint8)
            if total:
                ds[0:1] = np.zeros(1, dtype=np.uint8)
            base = ds.id.get_offset() if total else 0
            f.create_dataset("offsets", data=offsets)
        if base is None:  # HDF5 allocated no contiguous storage: a layout this path was not meant for
            raise FormatError(f"{path}: HDF5 gave dataset 'data' no contiguous storage to write into")
        return offsets + int(base)

    def write(self, path: str | os.PathLike, payload: FilePayload, written: Written | None = None) -> None:
        """Contiguous storage (:meth:`ranged`): :meth:`begin`, the records at their offsets (``written`` told of
        every write), fsync; else h5py writes the groups as slabs (chunked storage, ``layout=array``)."""
        if self.ranged():
            return super().write(path, payload, written)
        if self.layout == "array":
            return self._write_array(path, payload)
        import h5py  # lazy: start-up (h5py only where HDF5 files are written)

        sizes = payload.sizes
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        total = int(offsets[-1])
        kw: dict[str, Any] = {}
        chunk = self.options.get("chunk_samples", 0)
        if chunk and total:  # HDF5 cannot chunk an empty dataset
            mean = max(1, total // max(1, len(sizes)))
            kw["chunks"] = (max(1, min(total, chunk * mean)),)
            comp = self.options.get("compression", "none")
            if comp != "none":
                kw["compression"] = comp
        with h5py.File(path, "w", **self._file_kw()) as f:
            ds = f.create_dataset("data", shape=(total,), dtype=np.uint8, **kw)
            for lo, hi, buf in payload.iter_groups(reuse=True):
                ds[offsets[lo] : offsets[hi]] = buf
            f.create_dataset("offsets", data=offsets)
        fsync_path(path)

    def _write_array(self, path: str | os.PathLike, payload: FilePayload) -> None:
        """``layout=array``: ``images`` (n, *shape) uint8 in chunks of k images, and ``labels`` (n,) int64."""
        import h5py  # lazy: start-up (h5py only where HDF5 files are written)

        if not payload.shape:
            raise ValueError("format.layout=array needs workload.sample_shape")
        n, shape = len(payload.sizes), payload.shape
        kw: dict[str, Any] = {}
        chunk = self.options.get("chunk_samples", 0)
        if chunk and n:  # HDF5 cannot chunk an empty dataset
            kw["chunks"] = (min(chunk, n), *shape)
            comp = self.options.get("compression", "none")
            if comp != "none":
                kw["compression"] = comp
        with h5py.File(path, "w", **self._file_kw()) as f:
            ds = f.create_dataset("images", shape=(n, *shape), dtype=np.uint8, **kw)
            for lo, hi, buf in payload.iter_groups(reuse=True):
                ds[lo:hi] = buf.reshape(hi - lo, *shape)
            f.create_dataset("labels", data=payload.labels)
        fsync_path(path)

    def open(self, path: str | os.PathLike) -> Reader:
        if self.layout == "array":
            return HDF5ArrayReader(path, self.options)
        return HDF5Reader(path, self.options)
