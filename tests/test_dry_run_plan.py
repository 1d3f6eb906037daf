"""The dry run shows the job script that is submitted: packed points (``cluster.points_per_task``) included, and
arrays cut at Slurm's MaxArraySize. The submission runs for real through submitit, with a stand-in ``sbatch`` on
PATH (the process boundary) that keeps each script it receives; the dry run's script must equal the first."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from experiments.executors.slurm import SiteInfo, submit
from helpers import point

SBATCH = """#!/bin/bash
n=$(ls {keep} | wc -l)
cp "$1" {keep}/$n.sh
echo "Submitted batch job $((4200 + n))"
"""


def _job(point_dict: dict, run_dir: str) -> None:  # what each job would run (never run here)
    raise AssertionError("not run in this test")


@dataclass
class _Report:
    submitted: int = 0


@dataclass
class _Host:
    root: Path
    report: _Report = field(default_factory=_Report)
    job: object = _job
    lines: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    def echo(self, line: str) -> None:
        self.lines.append(line)

    def prepare(self, spec) -> Path:
        d = self.root / spec.point_key
        d.mkdir(parents=True, exist_ok=True)
        return d

    def submitted(self, spec, job_id, run_dir, folder, executor) -> None:
        self.ids.append(job_id)


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch):
    keep = tmp_path / "received"
    keep.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", SBATCH.format(keep=keep)), ("sacct", "#!/bin/sh\n"), ("scancel", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return keep


def _shown(lines: list[str]) -> str:
    return "\n".join(ln[4:] for ln in "\n".join(lines).splitlines() if ln.startswith("  | "))


@pytest.mark.parametrize(("n", "per_task", "max_array", "array"), [
    (5, 2, 3, "0-1%2"),   # 2 points per task, 2 tasks per sbatch (MaxArraySize 3): the first sbatch has 4 points
    (4, 3, 1001, "0-1%2"),  # 3 + 1 points in 2 tasks, each task's limit 3 x the point's
    (3, 1, 1001, "0-2%3"),  # one point per task
    (1, 1, 1001, None),     # one job, no array
])
def test_the_dry_run_shows_the_script_sbatch_receives(tmp_path, fake_sbatch, monkeypatch, n, per_task, max_array,
                                                     array):
    site = SiteInfo(config={"MaxArraySize": str(max_array)})
    monkeypatch.setattr(submit, "site_answer", lambda: site)
    specs = [point(tmp_path, "cluster=slurm", f"repeat={i}", f"cluster.points_per_task={per_task}",
                     "cluster.timeout_min=7", "cluster.array_parallelism=4") for i in range(n)]
    shown = submit.describe(specs)
    out = submit.submit_points(specs, _Host(tmp_path / "runs"))
    assert len(out.pending) == n and not out.held
    received = sorted(fake_sbatch.iterdir(), key=lambda p: int(p.stem))
    first = "\n".join(ln for ln in received[0].read_text().splitlines() if ln)
    assert _shown(shown) == first  # what the dry run shows is what sbatch got, byte for byte but blank lines
    assert f"#SBATCH --time={7 * min(per_task, n)}" in first
    if array:
        assert f"#SBATCH --array={array}" in first
    else:
        assert "--array" not in first
    tasks = -(-n // per_task)
    assert len(received) == -(-tasks // (max_array - 1))  # sbatches: arrays cut below MaxArraySize
    assert (len(received) > 1) == any("more point(s) in further submissions" in ln for ln in shown)


def test_the_plan_of_a_sweep_the_site_cannot_answer_is_the_submissions(tmp_path):
    specs = [point(tmp_path, "cluster=slurm", f"repeat={i}", "cluster.points_per_task=3") for i in range(7)]
    assert submit.array_plan(specs, SiteInfo(error="no controller")) == (3, submit.MAX_ARRAY)
    assert submit.array_plan(specs, None) == (3, submit.MAX_ARRAY)
    assert [len(t) for t in itertools.islice(submit.packs(7, 3), 5)] == [3, 3, 1]


def test_the_dry_run_totals_the_node_hours_asked_for(sweep, tmp_path):
    p = sweep("-m", "repeat=0,1,2", "cluster.timeout_min=20", "workload=tiny", "dry_run=true", timeout=120)
    assert p.returncode == 0, p.stderr
    assert "asked for: 1 node-hour(s) at most (nodes x time limit, summed over 3 point(s))" in p.stdout
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()
