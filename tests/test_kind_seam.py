"""The workload-kind seam, proven from outside the product: a stand-in kind, written under tmp_path and registered
through an entry point of group ``ddlio.kinds`` (as ``pip install`` of a plug-in would leave it), measures a real
point of its own through ``sweep.py``: a real MPI step whose ranks each write and fsync a file. Its point is stored
as measured, its metrics land in ``point_metrics``, the analyses that do not apply to it leave it out, and the same
sweep run again skips it. No product file knows the stand-in's name."""

from __future__ import annotations

import shutil
import sqlite3
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

#: the stand-in kind's module: what a plug-in's author writes (experiments/kinds/base.py's protocol)
KIND = '''
"""A stand-in workload kind: each rank writes and fsyncs a file of its own (a real MPI step)."""

import json
import time
from pathlib import Path

from ddlio import env as envinfo
from experiments.kinds.base import JobContext, Measured, Metric, WorkloadKind

#: bytes each rank writes
SIZE = 256 * 1024


class StandinKind(WorkloadKind):
    name = "standin"
    metrics = (
        Metric("bytes_written", "bytes", "bytes the ranks wrote, all ranks"),
        Metric("write_time_slowest_s", "s", "the slowest rank's time to write and fsync its file"),
        Metric("ranks", "", "MPI ranks that wrote"),
    )

    def run(self, ctx: JobContext) -> Measured:
        out = ctx.run_dir / "standin.json"
        out.unlink(missing_ok=True)
        directory = Path(ctx.spec.data_root) / "standin" / ctx.spec.point_key
        started = time.time()
        ctx.steps("standin_write", [str(out), str(directory), str(SIZE)], ctx.spec.ranks, "standin")
        finished = time.time()
        said = json.loads(out.read_text())
        values = {"bytes_written": said["bytes"], "write_time_slowest_s": said["seconds"], "ranks": said["ranks"]}
        return Measured(self.record(ctx, values, started, finished), envinfo.collect(hdf5=False))
'''

#: the MPI program the stand-in's job phase runs
STEP = '''
"""The stand-in kind's MPI program: ``python -m standin_write OUT.json DIR BYTES``."""

import json
import os
import sys
import time

if __name__ == "__main__":
    from mpi4py import MPI

    from ddlio.mpistep import announce_started

    comm = MPI.COMM_WORLD
    announce_started(comm)
    out, directory, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(directory, exist_ok=True)
    payload = os.urandom(size)
    comm.Barrier()
    t0 = time.perf_counter()
    fd = os.open(os.path.join(directory, f"rank{comm.rank}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        done = 0
        while done < size:
            done += os.write(fd, payload[done:])
        os.fsync(fd)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - t0
    written = comm.reduce(done, op=MPI.SUM, root=0)
    slowest = comm.reduce(seconds, op=MPI.MAX, root=0)
    if comm.rank == 0:
        with open(out + ".tmp", "w") as f:
            json.dump({"bytes": written, "seconds": slowest, "ranks": comm.size}, f)
        os.replace(out + ".tmp", out)
'''


def _plugin(root: Path) -> Path:
    """The stand-in kind as an installed distribution on ``root`` (a dist-info with one ``ddlio.kinds`` entry)."""
    root.mkdir()
    (root / "standin_kind.py").write_text(textwrap.dedent(KIND))
    (root / "standin_write.py").write_text(textwrap.dedent(STEP))
    info = root / "standin_kind-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: standin-kind\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[ddlio.kinds]\nstandin = standin_kind:StandinKind\n")
    return root


def test_a_stand_in_kind_measures_a_real_point_and_a_rerun_skips_it(sweep, tmp_path):
    path = _plugin(tmp_path / "plugin")
    args = ("workload=tiny", "ppn=2", "kind=standin", f"data_root={tmp_path / 'd'}", f"db={tmp_path / 'r.db'}")
    first = sweep(*args, timeout=300, PYTHONPATH=f"{path}:{ROOT}")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "standin hdf5/shared 1N-2P-1OST: bytes_written 5.243e+05 bytes" in first.stdout, first.stdout

    with sqlite3.connect(tmp_path / "r.db") as c:
        [(key, status, kind, label)] = c.execute("SELECT point_key, status, kind, label FROM points").fetchall()
        metrics = dict(((m, k), (v, u)) for m, k, v, u in
                       c.execute("SELECT metric, kind, value, unit FROM point_metrics WHERE point_key = ?", (key,)))
    assert (status, kind) == ("completed", "standin") and label.startswith("standin "), label
    assert metrics[("bytes_written", "standin")] == (2 * 256 * 1024, "bytes")
    assert metrics[("ranks", "standin")] == (2.0, "")
    seconds, unit = metrics[("write_time_slowest_s", "standin")]
    assert unit == "s" and 0 < seconds < 60
    written = sorted((tmp_path / "d" / "standin" / key).iterdir())
    assert [f.name for f in written] == ["rank0.bin", "rank1.bin"] and all(f.stat().st_size == 256 * 1024
                                                                           for f in written)
    assert not (tmp_path / "d" / "datasets").exists() or not list((tmp_path / "d" / "datasets").iterdir())

    again = sweep(*args, timeout=300, PYTHONPATH=f"{path}:{ROOT}")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 of 1 points already measured: skipped" in again.stdout, again.stdout
    with sqlite3.connect(tmp_path / "r.db") as c:
        assert c.execute("SELECT count(*) FROM measurements").fetchone() == (1,)

    # beside a train point, the analyses of train's wide row leave the stand-in's point out (it declares none)
    train = sweep("workload=tiny", "workload.epochs=1", f"data_root={tmp_path / 'd'}", f"db={tmp_path / 'r.db'}")
    assert train.returncode == 0, train.stdout + train.stderr
    _analyses_take_their_kinds(tmp_path / "r.db", key)


def _analyses_take_their_kinds(db: Path, standin_key: str) -> None:
    from analysis.diagnose.sources import emulated_subjects
    from analysis.query import analysis_frame
    from ddlio.store import open_store_for_reading

    store = open_store_for_reading(str(db))
    try:
        everything = set(analysis_frame(store)["point_key"])
        for analysis in ("figures", "guidelines", "diagnose"):
            taken = set(analysis_frame(store, analysis=analysis)["point_key"])
            assert taken == everything - {standin_key} and len(taken) == 1, (analysis, taken)
        diagnosed = {k for subject in emulated_subjects(store) for k in subject.points}  # its own reading
        assert diagnosed == everything - {standin_key}, diagnosed
    finally:
        store.close()
    assert standin_key in everything


def test_an_upgrade_to_version_5_gives_a_store_the_kinds_and_keeps_its_points_train(tmp_path):
    """A store written by 0dae8e7 (version 4, six train points): a reader asks for the upgrade and touches nothing,
    a writer adds ``points.kind`` (NULL: train) and ``point_metrics``, and every analysis takes the six points."""
    from analysis.query import analysis_frame
    from ddlio.store import SCHEMA_VERSION, Store, StoreError, open_store_for_reading

    db = tmp_path / "old.db"
    shutil.copyfile(ROOT / "tests" / "fixtures" / "stores" / "store-0dae8e7.db", db)
    with sqlite3.connect(db) as c:
        assert "kind" not in [r[1] for r in c.execute("pragma table_info(points)")]
    with pytest.raises(StoreError, match="schema version 4"):
        open_store_for_reading(str(db))
    Store(str(db)).engine.dispose()  # a writer upgrades
    assert SCHEMA_VERSION == 5
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT value FROM ddlio_meta WHERE key = 'schema_version'").fetchone() == ("5",)
        assert c.execute("SELECT count(*), count(kind) FROM points").fetchone() == (6, 0)
        assert c.execute("SELECT count(*) FROM point_metrics").fetchone() == (0,)
    store = open_store_for_reading(str(db))
    try:
        for analysis in (None, "figures", "guidelines", "diagnose"):
            assert len(analysis_frame(store, analysis=analysis)) == 6, analysis
    finally:
        store.close()


@pytest.mark.parametrize("name", ["train"])
def test_the_built_in_kinds_declare_their_metrics_and_analyses(name):
    from experiments.registry import KIND_ANALYSES, KINDS

    kind = KINDS[name]
    assert kind.name == name and kind.metrics and all(m.unit is not None for m in kind.metrics)
    assert kind.analyses == KIND_ANALYSES[name]  # read without importing the kind, held to its class here


def test_an_analysis_takes_the_kinds_whose_declaration_names_it():
    from experiments.registry import ANALYSES, kinds_for

    for analysis in ANALYSES:
        assert kinds_for(analysis, ["train", "not-installed"]) == ["train"]  # a kind not here: none apply


def test_the_job_names_no_kind():
    """The job runs whichever kind ``KINDS[spec.kind]`` gives: no branch on, and no import of, a kind by name."""
    source = (ROOT / "experiments" / "run" / "job.py").read_text()
    assert "KINDS[spec.kind]" in source
    assert "kinds.train" not in source and "== \"train\"" not in source and "'train'" not in source
