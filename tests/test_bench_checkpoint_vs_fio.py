"""bench/checkpoint_vs_fio.py: fio's job files hold the plan's shards (N-1 at the prefix sums, N-N a file each),
and one tiny run pairs a ddlio checkpoint point with fio in turn and prints its table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import load_bench


@pytest.fixture(scope="module")
def ck() -> object:
    return load_bench("checkpoint_vs_fio")


class Plan:
    """The three things fio_files reads of a checkpoint plan."""

    def __init__(self, shards: list[int], shared: bool) -> None:
        self.ranks, self.shard_bytes, self.shared = len(shards), shards, shared

    def data_file(self, rank: int) -> str:
        return "checkpoint.distcp" if self.shared else f"__{rank}_0.distcp"

    def offset(self, rank: int) -> int:
        return sum(self.shard_bytes[:rank]) if self.shared else 0


def test_n1_jobs_write_one_file_at_the_prefix_sums_and_nn_jobs_a_file_each(ck):
    n1 = ck.fio_job(ck.fio_files(Plan([300, 500], True), Path("/d")), "write", 4096)
    assert "end_fsync=1" in n1 and "bs=4096" in n1 and "fallocate=none" in n1 and "invalidate=0" in n1
    assert "[rank1]\nfilename=/d/checkpoint.distcp\noffset=300\nsize=500\n" in n1
    nn = ck.fio_job(ck.fio_files(Plan([300, 300], False), Path("/d")), "read", 4096)
    assert "end_fsync=0" in nn and "[rank1]\nfilename=/d/__1_0.distcp\noffset=0\nsize=300\n" in nn


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (apt-get install fio)")
def test_a_tiny_run_pairs_ddlio_and_fio_in_turn_and_prints_its_table(ck, tmp_path, capsys):
    runs = tmp_path / "runs.json"
    rc = ck.main(["--size", "8MiB", "--transfers", "1MiB", "--layouts", "n1", "--rounds", "2", "--settle", "0",
                  "--dir", str(tmp_path / "d"), "--runs", str(runs)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "min ratio at transfers >= 1 MiB" in out.splitlines()[-1]
    (cell,) = json.loads(runs.read_text())
    assert cell["shards"] == [4 << 20, 4 << 20] and cell["ddlio_first"] == [True, False]
    for tool in ("ddlio", "fio"):
        assert len(cell[tool]) == 2 and all(r["write"] > 0 and r["read"] > 0 for r in cell[tool])
        assert all(r["resident"] == 0 for r in cell[tool])  # both restores read an emptied cache
    assert not (tmp_path / "d" / "fio-ckpt").exists()  # fio's files removed


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (apt-get install fio)")
def test_the_state_held_through_a_cell_is_taken_once_and_freed_after_it(ck, tmp_path, monkeypatch):
    taken = []
    real = ck.trainer_state
    monkeypatch.setattr(ck, "trainer_state", lambda plan: taken.append(1) or real(plan))
    rc = ck.main(["--size", "8MiB", "--transfers", "1MiB", "--layouts", "nn", "--rounds", "2", "--settle", "0",
                  "--state", "cell", "--dir", str(tmp_path / "d"), "--runs", str(tmp_path / "runs.json")])
    assert rc == 0 and len(taken) == 1  # once for the cell, not once per fio round
    (cell,) = json.loads((tmp_path / "runs.json").read_text())
    assert cell["state"] == "cell" and len(cell["fio"]) == 2
    with pytest.raises(ValueError, match="choose from round, cell, none"):
        ck.measure_cell(None, tmp_path, 1 << 20, 1, state="always")


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed (apt-get install fio)")
def test_warmup_runs_each_tool_once_more_before_its_measured_run_and_keeps_only_that(ck, tmp_path, monkeypatch):
    calls = {"ddlio": 0, "fio": 0}
    real_ddlio, real_fio = ck.run_ddlio, ck.fio_round

    def ddlio(*a, **k):
        calls["ddlio"] += 1
        return real_ddlio(*a, **k)

    def fio(*a, **k):
        calls["fio"] += 1
        return real_fio(*a, **k)

    monkeypatch.setattr(ck, "run_ddlio", ddlio)
    monkeypatch.setattr(ck, "fio_round", fio)
    rc = ck.main(["--size", "8MiB", "--transfers", "1MiB", "--layouts", "n1", "--rounds", "2", "--settle", "0",
                  "--warmup", "--dir", str(tmp_path / "d"), "--runs", str(tmp_path / "runs.json")])
    assert rc == 0 and calls == {"ddlio": 4, "fio": 4}
    (cell,) = json.loads((tmp_path / "runs.json").read_text())
    assert cell["warmup"] is True and len(cell["ddlio"]) == len(cell["fio"]) == 2
