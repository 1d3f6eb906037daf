"""The run folder's file names live in one place (ddlio/runpaths.py); they are a contract with the run folders
already on disk (``analysis ingest`` reads any ddlio version's), so they are pinned here, literally."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT
from ddlio.runpaths import RECORDS, RunPaths, local_measurement_lock, runs_dir, slurm_dir

NAMES = ("result.json", "failure.json", "job.json", "kernel.json", "kernel-result.json", "dataset-damaged.txt",
         "repro.sbatch", "kernel.out", "kernel.err", "generate.out", "generate.err", "controller.log")


def test_the_names_of_a_run_folder(tmp_path):
    p = RunPaths.of(tmp_path, "abc", "store1")
    assert p.root == tmp_path / "runs" / "store1" / "abc"
    assert RunPaths.of(tmp_path, "abc").root == tmp_path / "runs" / "abc"  # run folders of older stores
    assert [x.name for x in p.records] == list(RECORDS) == ["result.json", "failure.json"]
    assert (p.result.name, p.failure.name, p.job.name, p.kernel_spec.name, p.kernel_result.name, p.damaged.name,
            p.repro.name) == NAMES[:7]
    assert [x.name for x in p.logs("kernel") + p.logs("generate")] == list(NAMES[7:11])
    assert p.controller_log == p.root / "job" / "controller.log" and p.attempts == p.root / "attempts"
    assert p.trace(3).name == "trace-rank00003.csv" and p.trace(3, "repro-result-7-").name == \
        "trace-repro-result-7-rank00003.csv"
    assert p.repro_output == f"{p.root}/repro-%j.out" and p.repro_result_prefix == f"{p.root}/repro-result-"
    assert runs_dir(tmp_path) == tmp_path / "runs" and slurm_dir(tmp_path) == tmp_path / "runs" / "_slurm"
    assert local_measurement_lock(tmp_path) == tmp_path / "runs" / ".local-measurement.lock"


def test_an_attempts_outcome_is_what_exists(tmp_path):
    p = RunPaths(tmp_path)
    assert p.outcome() == []
    for f in (p.failure, p.kernel_result, p.trace(0), p.logs("kernel")[1], p.repro, p.kernel_spec):
        f.write_text("x")
    # the reproducer and the kernel's spec belong to the point, not to one attempt
    assert [f.name for f in p.outcome()] == ["failure.json", "kernel-result.json", "trace-rank00000.csv",
                                             "kernel.err"]


def test_no_other_module_spells_a_run_folder_file_name():
    spelled = re.compile("|".join(re.escape(f'"{n}"') + "|" + re.escape(f"'{n}'") for n in NAMES))
    offenders = []
    for pkg in ("experiments", "analysis", "lustre", "hydra_plugins", "ddlio", "bench"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.name != "runpaths.py" and spelled.search(path.read_text()):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == [], "run-folder file names belong in ddlio/runpaths.py"
    assert not spelled.search(Path(ROOT / "sweep.py").read_text())
