"""bench/checkpoint_vs_torch.py: one tiny round of ddlio's DCP-layout checkpoint beside a real
torch.distributed.checkpoint save and load (torchrun, 2 gloo ranks); the torch program empties the page cache of
its own files right before its timed load, and says so with mincore."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from conftest import load_bench

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ck() -> object:
    return load_bench("checkpoint_vs_torch")


def test_a_tiny_round_pairs_ddlio_and_dcp_and_both_restore_from_an_emptied_cache(ck, tmp_path, capsys):
    if ck.prerequisites():
        pytest.skip("; ".join(ck.prerequisites()))
    runs = tmp_path / "runs.json"
    rc = ck.main(["--size", "8MiB", "--rounds", "1", "--settle", "0", "--dir", str(tmp_path / "d"),
                  "--runs", str(runs)])
    out = capsys.readouterr().out
    assert rc == 0
    said = json.loads(runs.read_text())
    (d,), (t,) = said["ddlio"], said["torch"]
    assert d["write"] > 0 and d["read"] > 0 and t["write"] > 0 and t["read"] > 0
    assert d["resident"] == 0 and t["resident"] == 0  # DCP's files evicted by the torch program itself
    assert set(t["files"]) == {".metadata", "__0_0.distcp", "__1_0.distcp"}
    assert "residency before the restores <= 0.000" in out
    assert not (tmp_path / "d" / "torch-ckpt").exists()  # DCP's files removed


def test_the_torch_program_evicts_every_file_of_a_directory_and_mincore_sees_it(tmp_path):
    program = Path(__file__).resolve().parents[1] / "bench" / "checkpoint_torch_program.py"
    spec = importlib.util.spec_from_file_location("checkpoint_torch_program", program)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, n in (("a", 3 << 20), ("b", 5000), ("empty", 0)):
        with open(tmp_path / name, "wb") as f:
            f.write(os.urandom(n))
    (tmp_path / "sub").mkdir()
    assert mod.residency(tmp_path) > 0.9  # just written: in the page cache
    assert mod.evict(tmp_path) == 0.0
    with open(tmp_path / "a", "rb") as f:  # the first MiB of a's 3 read back
        f.read(1 << 20)
    assert 0.15 < mod.residency(tmp_path) < 0.9  # what was read, and readahead's window, not all
    assert mod.evict(tmp_path) == 0.0
