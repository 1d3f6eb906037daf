"""The run folders under ``data_root/runs``: every file name a point's run folder holds, in one place.

A point's run folder is ``data_root/runs/<store id>/<point key>`` (:meth:`RunPaths.of`). The job that measures the
point writes its record there (``result.json``, or ``failure.json``), and ``python -m analysis ingest`` finds the
records of any ddlio version by these names: they are a contract with run folders already on disk, never renamed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: a measured point's record (``kind: ddlio.result``)
RESULT = "result.json"
#: a point that could not be measured: its config and the error (``kind: ddlio.failure``)
FAILURE = "failure.json"
#: the names of the records a job leaves, the result first
RECORDS = (RESULT, FAILURE)
#: the MPI steps of a point's job, each logging into ``<step>.out`` and ``<step>.err``
STEPS = ("generate", "kernel")


def runs_dir(data_root: str | os.PathLike) -> Path:
    """``data_root/runs``: the run folders of every store that uses this data_root."""
    return Path(data_root) / "runs"


def slurm_dir(data_root: str | os.PathLike) -> Path:
    """submitit's folder for the Slurm jobs (job scripts, pickles, ``<job id>_<task>_log.out/err``)."""
    return runs_dir(data_root) / "_slurm"


def local_measurement_lock(data_root: str | os.PathLike) -> Path:
    """The lock that lets one local measurement run at a time on this machine, across sweeps."""
    return runs_dir(data_root) / ".local-measurement.lock"


@dataclass(frozen=True)
class RunPaths:
    """The files of one point's run folder ``root``."""

    root: Path

    @classmethod
    def of(cls, data_root: str | os.PathLike, point_key: str, store_id: str = "") -> RunPaths:
        """The run folder of point ``point_key``: ``data_root/runs/<store id>/<point key>``, so that stores (and
        their sweeps) that share a data_root never share a run folder. Without a store id (stores of older ddlio
        recorded such run folders, and they keep working): ``data_root/runs/<point key>``."""
        runs = runs_dir(data_root)
        return cls(runs / store_id / point_key if store_id else runs / point_key)

    # ------------------------------------------------------------------------------------------ records
    @property
    def result(self) -> Path:
        """The point's result record, written by its job."""
        return self.root / RESULT

    @property
    def failure(self) -> Path:
        """The point's failure record, written by its job (or by the driver for a job that left none)."""
        return self.root / FAILURE

    @property
    def records(self) -> tuple[Path, Path]:
        """:attr:`result` and :attr:`failure`, in the order to look for them."""
        return self.result, self.failure

    @property
    def job(self) -> Path:
        """What the driver noted when the scheduler took the job: job id, submitit folder, executor, time."""
        return self.root / "job.json"

    @property
    def job_folder(self) -> Path:
        """submitit's folder for a local job (its pickles and logs)."""
        return self.root / "job"

    @property
    def controller_log(self) -> Path:
        """Where submitit's local controller wrote its own tracebacks, in run folders of ddlio before 2026-12-04
        (a local job has no controller since: its process writes ``<job id>_0_log.out/err`` from its first byte)."""
        return self.job_folder / "controller.log"

    # ---------------------------------------------------------------------------------------- the kernel
    @property
    def kernel_spec(self) -> Path:
        """The kernel's input: the point, the dataset plan and where to write its result."""
        return self.root / "kernel.json"

    @property
    def kernel_result(self) -> Path:
        """The kernel's own result (rank 0), which the job turns into :attr:`result`."""
        return self.root / "kernel-result.json"

    @property
    def damaged(self) -> Path:
        """Written by the kernel when the dataset's bytes failed verification (a checksum, a header): the job then
        invalidates the dataset so that the next run rebuilds it."""
        return self.root / "dataset-damaged.txt"

    def logs(self, step: str) -> tuple[Path, Path]:
        """``(stdout, stderr)`` of an MPI step (:data:`STEPS`): ``<step>.out``, ``<step>.err``."""
        return self.root / f"{step}.out", self.root / f"{step}.err"

    def started(self, step: str) -> Path:
        """The mark rank 0 of an MPI step leaves once every rank is through MPI start-up: ``<step>.started``."""
        return self.root / f"{step}.started"

    def gate(self, step: str) -> Path:
        """The file whose creation lets an MPI step started ahead go on (``ddlio.mpistep.wait_for_gate``):
        ``<step>.go``."""
        return self.root / f"{step}.go"

    def trace(self, rank: int, prefix: str = "") -> Path:
        """Rank ``rank``'s access log (``workload.trace=true``); ``prefix`` keeps a rerun's beside the original's."""
        return self.root / f"trace-{prefix}rank{rank:05d}.csv"

    def traces(self) -> list[Path]:
        """Every access log in the folder."""
        return sorted(self.root.glob("trace-*.csv"))

    # ----------------------------------------------------------------------------------- the reproducer
    @property
    def repro(self) -> Path:
        """The standalone batch script that reruns the point's kernel with plain sbatch."""
        return self.root / "repro.sbatch"

    @property
    def repro_output(self) -> str:
        """The reproducer's job output, as sbatch's ``--output`` pattern (``%j``: the job id)."""
        return str(self.root / "repro-%j.out")

    @property
    def repro_result_prefix(self) -> str:
        """The reproducer's result file without its ending: ``<prefix><job id>.json`` beside the original."""
        return str(self.root / "repro-result-")

    # --------------------------------------------------------------------------------------- attempts
    @property
    def attempts(self) -> Path:
        """Earlier attempts' outcomes, one numbered folder each (``attempts/000`` ...)."""
        return self.root / "attempts"

    def outcome(self) -> list[Path]:
        """The files of an attempt's outcome that exist: moved aside before the point runs again."""
        files = [self.result, self.failure, self.kernel_result, self.job, self.damaged, *self.traces()]
        files += [log for step in STEPS for log in self.logs(step)]
        return [p for p in files if p.exists()]
