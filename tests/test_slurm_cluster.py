"""Smoke tests of the Slurm test cluster itself (tests/cluster/slurm.sh): two nodes that srun sees as two, submitit
jobs that return, MPI ranks spread over both nodes, accounting that makes a cancelled job an error instead of a
hang. They skip where no Slurm answers (see the ``slurm_cluster`` fixture)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import submitit
from submitit.helpers import CommandFunction

from conftest import SlurmCluster

pytestmark = pytest.mark.slurm

# Debian's Open MPI: what `srun --mpi=pmix` can launch. The venv's mpi4py loads it instead of the mpich wheel when
# MPI4PY_LIBMPI names it in the ranks' environment.
OPENMPI_LIB = "/usr/lib/x86_64-linux-gnu/libmpi.so.40"

MPI_PROBE = """
import json, os
from mpi4py import MPI
c = MPI.COMM_WORLD
print(json.dumps({"rank": c.Get_rank(), "size": c.Get_size(), "sum": c.allreduce(c.Get_rank()),
                  "node": os.environ.get("SLURMD_NODENAME"), "lib": MPI.Get_library_version().strip("\\x00 \\n")}))
"""


def two_nodes(cluster: SlurmCluster) -> tuple[str, str]:
    if len(cluster.nodes) < 2:
        pytest.fail(f"the test cluster should have 2 usable nodes, sinfo shows {cluster.nodes}")
    return cluster.nodes[0], cluster.nodes[1]


def executor(cluster: SlurmCluster, folder: Path, **params: object) -> submitit.SlurmExecutor:
    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
    ex.update_parameters(partition=cluster.partition, time=5, **params)
    return ex


def sacct_state(job_id: str, timeout: float = 30) -> str:
    """The job's state in accounting, once it has a final one (slurmdbd lags the job's end by about a second)."""
    end = time.monotonic() + timeout
    state = ""
    while time.monotonic() < end:
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"],
                             capture_output=True, text=True, timeout=10)
        state = out.stdout.strip()
        if state and state not in ("PENDING", "RUNNING", "COMPLETING"):
            return state
        time.sleep(0.5)
    return state


def test_srun_spans_two_nodes(slurm_cluster: SlurmCluster) -> None:
    nodes = two_nodes(slurm_cluster)
    out = subprocess.run(
        ["srun", "-p", slurm_cluster.partition, "-N2", "-n2", "--ntasks-per-node=1", "-t1",
         "printenv", "SLURMD_NODENAME"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(nodes)


def test_submitit_job_returns_value_from_inside_slurm(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    ex = executor(slurm_cluster, tmp_path / "submitit", nodes=1, ntasks_per_node=1)
    job = ex.submit(os.getenv, "SLURM_JOB_ID")
    assert job.result() == job.job_id  # the value was computed inside that very Slurm job
    assert sacct_state(job.job_id) == "COMPLETED"


def test_submitit_mpi_job_four_ranks_on_two_nodes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """2 nodes x 2 tasks through submitit, each task an MPI rank: srun --mpi=pmix + Debian's Open MPI."""
    two_nodes(slurm_cluster)
    ex = executor(
        slurm_cluster, tmp_path / "submitit", nodes=2, ntasks_per_node=2, cpus_per_task=1,
        srun_args=["--mpi=pmix"], setup=[f"export MPI4PY_LIBMPI={OPENMPI_LIB}"],
    )
    job = ex.submit(CommandFunction([sys.executable, "-c", MPI_PROBE], verbose=False))
    ranks = sorted((json.loads(out) for out in job.results()), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert {r["size"] for r in ranks} == {4}
    assert {r["sum"] for r in ranks} == {6}
    assert sorted(r["node"] for r in ranks) == sorted(2 * list(slurm_cluster.nodes[:2]))
    assert all(r["lib"].startswith("Open MPI") for r in ranks), ranks[0]["lib"]


def test_cancelled_job_is_an_error_not_a_hang(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    ex = executor(slurm_cluster, tmp_path / "submitit", nodes=1, ntasks_per_node=1)
    job = ex.submit(time.sleep, 300)
    subprocess.run(["scancel", job.job_id], check=True, timeout=10)
    t0 = time.monotonic()
    with pytest.raises(submitit.core.utils.UncompletedJobError, match="CANCELLED"):
        job.result()  # submitit learns it from sacct, polling with back-off: ~20 s
    assert time.monotonic() - t0 < 120
    assert sacct_state(job.job_id).startswith("CANCELLED")
