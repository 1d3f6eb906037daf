"""Exclusive locks across processes and nodes: on a dataset key, so two points that need the same bytes build
them once."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from experiments.dataset.plan import DatasetPlan


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
