"""``reader=torch``, the worker side: the map-style ``Dataset`` a DataLoader worker process reads through, and the
collate function that makes its batches.

:class:`FileSamples` is one ``torch.utils.data.Dataset`` over ddlio's files for every format and layout: sample ``i``
is sample ``i - starts[f]`` of file ``f``, read by the format's own reader (h5py's ``images[i]`` for the HDF5
layouts, the TFRecord records through their index, NPZ/NPY members by sample or the whole file loaded once
(``load=whole``), ``bin`` by position, JPEG/PNG's encoded bytes then decoded by Pillow into an ``(H, W, 3)`` uint8
array, as an image folder's loader does). Files open lazily, in the process that reads them, on first use (an
HDF5 file must not cross a fork open), and stay open while the process lives: a worker keeps them for its epoch,
or for the whole run with ``persistent_workers``. Every sample becomes its own tensor (a copy: the reader's buffer
is reused), shaped as ``workload.sample_shape`` when given.

The DataLoader calls :meth:`FileSamples.__getitems__` with a batch's indices. Around it the worker reads its own
thread's I/O counters (``/proc/thread-self/io``: the read calls and the bytes they returned, opens included) and
hands them back with the batch, with the bytes its reader calls returned, each sample's latency (ns, on the
system-wide monotonic clock, so workers' times compare), its opens and whole-file loads. Nothing here imports
mpi4py: a worker never initialises MPI, whatever its start method (:func:`worker_init` makes any later import of
it fail for ``forkserver`` and ``spawn``).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import time
from typing import Any

import numpy as np
import torch

from experiments.formats import get_format

#: formats whose samples are encoded images, decoded by Pillow after the read
IMAGE_FORMATS = ("jpeg", "png")


def worker_init(worker_id: int) -> None:
    """``worker_init_fn``: in a worker that did not inherit the parent by fork, mpi4py cannot be imported at all
    (importing ``mpi4py.MPI`` initialises MPI, which a worker under ``mpiexec`` must never do); and the modules the
    read path loads on first use (h5py's, Pillow's plugins: :attr:`FileSamples.prime_modules`) are imported
    before the first batch, so reading them from disk is not counted as the dataset's reads."""
    info = torch.utils.data.get_worker_info()
    if info is None:
        return
    if "mpi4py" not in sys.modules:
        sys.modules["mpi4py"] = None  # type: ignore[assignment]  # `import mpi4py` now raises ImportError
    for name in getattr(info.dataset, "prime_modules", ()):
        if name not in sys.modules:
            with contextlib.suppress(ImportError):  # a module only its package imports: loaded when needed
                importlib.import_module(name)
    if "PIL.Image" in sys.modules:
        sys.modules["PIL.Image"].init()  # every image plugin, as the parent's first decode loaded them


class FileSamples(torch.utils.data.Dataset):
    """The samples of ddlio's files (``paths``; file ``f`` holds global ids ``starts[f]..starts[f+1]-1``), read by
    the format ``fmt_name`` with ``options``; ``shape``: every sample's shape (() keeps them flat);
    ``buf_bytes``: the largest record; ``trace``: also hand back each read's file offset."""

    def __init__(self, fmt_name: str, options: dict[str, Any], paths: list[str], starts: np.ndarray,
                 shape: tuple[int, ...], buf_bytes: int, trace: bool = False) -> None:
        self.image = fmt_name in IMAGE_FORMATS
        self.fmt_name = fmt_name
        # an image is decoded here, as a training loop needs it, not by the reader's own check
        self.options = {**options, "decode": False} if self.image else dict(options)
        self.paths, self.starts = list(paths), np.asarray(starts, dtype=np.int64)
        self.shape, self.buf_bytes, self.trace = tuple(shape), int(buf_bytes), bool(trace)
        #: modules the read path imported on its first use in the parent (worker_init imports them up front)
        self.prime_modules: list[str] = []
        #: the fault armed for the processes that read (:meth:`arm`)
        self.fault: str | None = None
        self._reset()

    def _reset(self) -> None:
        self._fault = getattr(self, "fault", None)  # this process's fault, not yet done
        self._pid = -1
        self._fmt: Any = None
        self._readers: dict[int, Any] = {}
        self._held: Any = None
        self._io_fd = -1
        self._buf = np.empty(0, dtype=np.uint8)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for a spawned worker without the open files of this process (they are opened where read)."""
        state = dict(self.__dict__)
        state.update(_fault=self.fault, _pid=-1, _fmt=None, _readers={}, _held=None, _io_fd=-1,
                     _buf=np.empty(0, dtype=np.uint8))
        return state

    def prime(self) -> None:
        """In the parent, before anything is measured: read sample 0 once, note the modules that read imported
        (:attr:`prime_modules`), and close it all again (the kernel then evicts the file)."""
        before = set(sys.modules)
        if len(self):
            self.__getitems__([0])
        self.prime_modules = sorted(set(sys.modules) - before)
        self.close()

    def close(self) -> None:
        """Close this process's files and counter (the next read opens them again)."""
        if self._pid == os.getpid():
            for r in self._readers.values():
                r.close()
            if self._io_fd >= 0:
                os.close(self._io_fd)
        self._reset()

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _own(self) -> None:
        """This process's own state: a forked child forgets what it inherited (the parent's files and counters)."""
        if self._pid != os.getpid():
            self._reset()
            self._pid = os.getpid()
            self._fmt = get_format(self.fmt_name, **self.options)
            self._io_fd = os.open("/proc/thread-self/io", os.O_RDONLY)
            self._buf = np.empty(max(1, self.buf_bytes), dtype=np.uint8)
        # (/proc/thread-self/io opened by the main thread of this process: the thread __getitems__ runs in)

    def _reader(self, f: int, meta: dict[str, Any], k: int = 0) -> Any:
        r = self._readers.get(f)
        if r is None:
            snaps = meta.get("snaps")
            if snaps is not None:  # the open bracketed apart: its reads are binned by themselves
                snaps[0].append(os.pread(self._io_fd, 512, 0))
                snaps[1].append((meta["k0"], k))
            t = time.perf_counter_ns()
            r = self._readers[f] = self._fmt.open(self.paths[f])
            dt = time.perf_counter_ns() - t
            if snaps is not None:
                snaps[0].append(os.pread(self._io_fd, 512, 0))
                snaps[1].append((-1, -1))
                meta["k0"] = k
            meta["meta_ns"] += dt
            meta["opens"] += 1
            meta["open_events"].append((t, dt, f))
        if self._fmt.loads_whole and self._held is not r:  # a whole-loaded file is held until the next one
            if self._held is not None:
                self._held.release()
            self._held = r
        return r

    def _sample(self, nbytes: int, sample: np.ndarray) -> torch.Tensor:
        if self.image:
            from PIL import Image  # lazy: Pillow, only for image formats

            with Image.open(io.BytesIO(sample[:nbytes].tobytes())) as img:
                return torch.from_numpy(np.asarray(img.convert("RGB")).copy())
        arr = np.array(sample, dtype=np.uint8, copy=True)
        return torch.from_numpy(arr.reshape(self.shape) if self.shape else arr.reshape(-1))

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.__getitems__([i])["x"][0]

    def __getitems__(self, indices: list[int]) -> dict[str, Any]:
        """One batch's samples (``x``: a tensor each) and what reading them cost (see the module's docstring)."""
        self._own()
        if self._fault == "hang":
            self._inject()
        perf = time.perf_counter_ns
        io0 = os.pread(self._io_fd, 512, 0)
        ids = [int(i) for i in indices]
        fo = (np.searchsorted(self.starts, ids, side="right") - 1).tolist()
        snaps: tuple[list[bytes], list[tuple[int, int]]] = ([io0], [])
        meta: dict[str, Any] = {"meta_ns": 0, "opens": 0, "open_events": [], "snaps": snaps, "k0": 0}
        out, lat, start, sizes, offsets, loads = [], [], [], [], [], []
        nbytes = 0
        for k, (i, f) in enumerate(zip(ids, fo, strict=True)):
            r = self._reader(f, meta, k)
            before = r.loads
            t = perf()
            n, sample = r.fetch(i - int(self.starts[f]), self._buf)
            x = self._sample(n, sample)
            lat.append(perf() - t)
            start.append(t)
            out.append(x)
            nbytes += n
            sizes.append(n)
            if r.loads != before:  # (file, loads made): one whole load, or Parquet's bytes of row-group loads
                loads.append((f, r.loads - before))
            if self.trace:
                offsets.append(r.record_offset(i - int(self.starts[f])))
        snaps[0].append(os.pread(self._io_fd, 512, 0))
        snaps[1].append((meta.pop("k0"), len(ids)))
        if self._fault:
            self._inject()
        return {"x": out, "ids": ids, "files": fo, "bytes": nbytes, "lat": lat, "start": start, "size": sizes,
                "offset": offsets, "loads": loads, "pid": os.getpid(), "mpi": "mpi4py.MPI" in sys.modules, **meta}

    def arm(self, fault: str | None, rank: int = 0) -> None:
        """The ``DDLIO_FAULT`` the processes that read inject for rank ``rank``
        (:func:`experiments.kernel.guards.fault_of`): each process that reads (every worker the DataLoader starts
        while it is armed, or this one) hangs before its first read (``hang``), or crashes or is killed after its
        first batch; None disarms."""
        self.fault, self.rank = fault, rank

    def _inject(self) -> None:
        """Do the armed fault once in this process. A hung worker ends itself once its parent (the rank) is gone,
        so that no process outlives the aborted step."""
        fault, self._fault = self._fault, None
        if fault == "hang":
            parent = os.getppid()
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)
        from experiments.kernel.guards import inject  # lazy: only under fault injection (it loads no MPI)

        inject(fault or "", getattr(self, "rank", 0))


def collate(part: dict[str, Any]) -> dict[str, Any]:
    """``collate_fn``: the samples stacked into one batch tensor (a list when their shapes differ: variable
    sizes, images of different sizes), the reading figures passed on."""
    xs = part["x"]
    same = all(x.shape == xs[0].shape for x in xs)
    return {**part, "x": torch.stack(xs) if xs and same else xs}
