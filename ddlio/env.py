"""The environment a result was measured in, recorded with every result: package versions, host, kernel,
CPU and memory, and the project's git commit (as ``h5py.version.info`` does for h5py)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

PACKAGES = ("ddlio", "numpy", "h5py", "mpi4py", "mpich", "crc32c", "submitit", "hydra-core", "omegaconf",
            "tensorflow", "tensorflow-cpu")
PROJECT_DIR = Path(__file__).resolve().parent.parent


def package_versions(hdf5: bool = True) -> dict[str, str]:
    """Installed versions of the packages that shape a measurement (absent ones are left out), with the HDF5
    library's (``hdf5``, as h5py reports it) when ``hdf5`` is true or h5py is loaded anyway: asking h5py imports
    it and numpy (~80 ms, 12 MiB), which a job process of a point that reads no HDF5 file never needs."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    if hdf5 or "h5py" in sys.modules:
        try:
            import h5py  # lazy: h5py and numpy only where HDF5 is read

            out["hdf5"] = h5py.version.hdf5_version
        except ImportError:
            pass
    return out


def git_commit(directory: Path = PROJECT_DIR) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool}`` of the project checkout that ran the measurement."""
    def git(*args: str) -> str | None:
        try:
            p = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return p.stdout.strip() if p.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no") if sha else None
    return {"commit": sha, "dirty": bool(status)}


def memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def collect(hdf5: bool = True) -> dict[str, Any]:
    """Everything about this process's environment worth storing with a result (``hdf5``: see
    :func:`package_versions`)."""
    uname = platform.uname()
    return {
        "host": socket.gethostname(),
        "os": f"{uname.system} {uname.release}",
        "machine": uname.machine,
        "cpus": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "python_executable": sys.executable,
        "packages": package_versions(hdf5),
        "git": git_commit(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
    }
