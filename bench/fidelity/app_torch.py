"""A PyTorch training program: a map-style ``Dataset`` read by a ``DataLoader`` with ``num_workers`` worker
processes, a ``DistributedSampler`` (reshuffled every epoch by ``set_epoch``) and ``prefetch_factor``, feeding a
small CNN (``torch_models.galaxy_cnn``: forward, loss, backward, Adam step per batch); a cold page cache each epoch.

    python bench/fidelity/app_torch.py hdf5 FILE.h5 --workers 2 --epochs 2 --batch 8 --prefetch 2
    python bench/fidelity/app_torch.py jpeg DIR_OR_FILES... --workers 2 --epochs 2 --batch 8

``hdf5``: one file holding ``images`` (N, H, W, C) uint8 and ``labels`` (N,); each worker opens the file itself on
its first ``__getitem__`` (an h5py file must not cross a fork open) and reads ``images[i]``. ``jpeg``: a folder of
image files (``*.jpeg``, ``*.jpg``, ``*.png``), one sample each, decoded with Pillow to (H, W, 3) uint8, as an
image-folder dataset does; label ``i % 10``. Prints one JSON line per epoch (samples/s). It shares no code with
ddlio.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import pagecache
import torch
import torch_models
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class H5Images(Dataset):
    """``images[i]`` and ``labels[i]`` of one HDF5 file, the file opened lazily in the process that reads."""

    def __init__(self, path: str) -> None:
        import h5py

        self.path, self.f, self.images = path, None, None
        with h5py.File(path, "r") as f:
            self.labels = f["labels"][:]  # a few KiB: read once, as training scripts do
            self.shape = tuple(f["images"].shape[1:])

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.images is None:
            import h5py

            self.f = h5py.File(self.path, "r")
            self.images = self.f["images"]
        return torch.from_numpy(self.images[i]), int(self.labels[i])


class ImageFolder(Dataset):
    """One image file per sample, decoded by Pillow to (H, W, 3) uint8."""

    def __init__(self, files: list[str]) -> None:
        self.files = files
        self.shape = self[0][0].shape

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        with Image.open(self.files[i]) as img:
            return torch.from_numpy(np.asarray(img.convert("RGB")).copy()), i % 10


def image_files(args: list[str]) -> list[str]:
    if len(args) == 1 and os.path.isdir(args[0]):
        return sorted(str(p) for p in Path(args[0]).iterdir() if p.suffix.lower() in (".jpeg", ".jpg", ".png"))
    return list(args)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("hdf5", "jpeg"))
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="galaxy_cnn")
    ap.add_argument("--compute-threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    ap.add_argument("--sleep", type=float, default=None, metavar="SECONDS",
                    help="no model: iterate the loader and sleep SECONDS per batch instead of training")
    a = ap.parse_args(argv)
    if a.compute_threads:
        torch.set_num_threads(a.compute_threads)
    if a.kind == "hdf5":
        files = [a.paths[0]]
        ds: Any = H5Images(files[0])
    else:
        files = image_files(a.paths)
        ds = ImageFolder(files)
    sampler = DistributedSampler(ds, num_replicas=1, rank=0, shuffle=True, seed=a.seed)
    loader = DataLoader(ds, batch_size=a.batch, sampler=sampler, num_workers=a.workers,
                        prefetch_factor=a.prefetch if a.workers else None)
    model = opt = loss_fn = None
    if a.sleep is None:
        model, opt, loss_fn = getattr(torch_models, a.model)(tuple(ds.shape))
        x = torch.zeros((a.batch, *ds.shape), dtype=torch.uint8)
        for _ in range(3):  # warm-up, untimed (the calibration excludes its first steps too)
            opt.zero_grad()
            loss_fn(model(x), torch.zeros(a.batch, dtype=torch.long)).backward()
            opt.step()
    n = len(ds)
    for epoch in range(a.epochs):
        left = pagecache.evict(files)
        sampler.set_epoch(epoch)
        t0, cpu0 = time.perf_counter(), os.times()
        steps = 0
        for x, y in loader:
            if model is None:
                time.sleep(a.sleep)
            else:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
            steps += 1
        seconds, cpu1 = time.perf_counter() - t0, os.times()
        if steps != -(-n // a.batch):
            raise SystemExit(f"torch: epoch {epoch} ran {steps} steps, expected {-(-n // a.batch)}")
        print(json.dumps({"app": f"torch-{a.kind}", "mode": "train" if model is not None else f"sleep {a.sleep:g}",
                          "epoch": epoch, "samples": n, "seconds": round(seconds, 4),
                          "samples_per_s": round(n / seconds, 2),
                          "cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 3),
                          "resident_after_evict": round(left, 4)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
