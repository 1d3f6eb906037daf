"""Helpers for tests that build datasets and run MPI steps for real (mpiexec from the mpich wheel)."""

from __future__ import annotations

import os
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT
from experiments.config import PointSpec, register_configs
from experiments.config.validate import validate

register_configs()


def point(tmp_path: Path, *overrides: str) -> PointSpec:
    """A validated point with data_root and db under tmp_path (tiny workload unless overridden)."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["workload=tiny", f"data_root={tmp_path / 'data'}",
                                           f"db={tmp_path / 'r.db'}", *overrides])
    return validate(OmegaConf.to_container(cfg, resolve=True), tmp_path)


def mpi_generation(spec: PointSpec, run_dir: Path):
    """The generation callback ensure_dataset takes: a real MPI step with the point's launch line."""
    from experiments.run.job import step_runner as _step_runner

    step = _step_runner(spec, run_dir)
    calls: list[int] = []

    def gen(plan_path: str, ranks: int) -> None:
        calls.append(ranks)
        step("experiments.dataset", [plan_path], ranks, "generate")

    gen.calls = calls  # type: ignore[attr-defined]
    return gen


def kernel_pids(root: object) -> list[int]:
    """The processes whose command line names a kernel spec under ``root`` (the local job's MPI step)."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            if "experiments.kernel" in cmd and str(root) in cmd:
                pids.append(int(d))
    return pids
