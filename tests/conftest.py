"""Shared fixtures. Tests use real files, real MPI ranks (mpiexec from the mpich wheel), a real SQLite file and
real subprocesses of ``sweep.py``; everything they write stays under ``tmp_path``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "sweep.py"


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Environment for a ddlio subprocess whose scratch files (Hydra's, MPI's) land under tmp_path."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(TMPDIR=str(tmp), PYTHONPATH=str(ROOT), HYDRA_FULL_ERROR="0", **extra)
    env.pop("DDLIO_DB", None)
    return env


def run_cli(
    args: list[str], cwd: Path, tmp_path: Path, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess:
    """Run ``python <args>`` (``sweep.py ...`` or ``-m analysis ...``) in ``cwd``; time-boxed."""
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=cli_env(tmp_path, **env), capture_output=True, text=True,
        timeout=timeout,
    )


@pytest.fixture
def sweep(tmp_path: Path) -> Any:
    """``sweep(*overrides)``: run sweep.py in tmp_path with data_root and db under it."""

    def _run(*overrides: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        args = [str(SWEEP), *overrides]
        if not any(o.startswith("data_root=") for o in overrides):
            args.append(f"data_root={tmp_path / 'data'}")
        if not any(o.startswith("db=") for o in overrides):
            args.append(f"db={tmp_path / 'r.db'}")
        return run_cli(args, tmp_path, tmp_path, timeout=timeout, **env)

    return _run


@pytest.fixture
def analysis(tmp_path: Path) -> Any:
    """``analysis(*args)``: run ``python -m analysis ...`` in tmp_path."""

    def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return run_cli(["-m", "analysis", *args], tmp_path, tmp_path, timeout=timeout)

    return _run
