"""The loader seam, proven from outside the product: a stand-in loader, registered as a plug-in would be (an entry
point of the group ``ddlio.loaders`` in a distribution on PYTHONPATH), measures a real point end to end — the
kernel's MPI ranks, the page cache, the plan check, the store — and no product file names it."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

from conftest import ROOT

#: the stand-in: a loader that opens every file itself (no lane), reads its samples one by one into a buffer of its
#: own in the training loop's thread, and tells the test what it did through a file per rank
STANDIN = '''
import json
import os
import time

import numpy as np

from experiments.kernel.loaders.base import EpochRecord, Loader


class Thing(Loader):
    name = "standin"
    reads_per_sample = False  # its reads are its own: the file-system layer counts them per epoch only

    def __init__(self, ctx):
        super().__init__(ctx)
        self.buf = np.empty(int(ctx.record.max()), dtype=np.uint8)
        self.log = {"epochs": 0, "reads": 0, "closed": False}

    def run_epoch(self, epoch, ids, ep, compute, step):
        ctx, perf = self.ctx, time.perf_counter_ns
        starts = ctx.plan.file_starts
        file_of = np.searchsorted(starts, ids, side="right") - 1
        readers, lat = {}, []
        nbytes = wait = opens = meta = 0
        compute_s = 0.0
        batch = ctx.point.workload.batch_size
        for b in range(0, len(ids), batch):
            t_batch = perf()
            for k in range(b, min(b + batch, len(ids))):
                f = int(file_of[k])
                if f not in readers:
                    t = perf()
                    readers[f] = ctx.fmt.open(ctx.paths[f]).__enter__()
                    meta += perf() - t
                    opens += 1
                t = perf()
                nbytes += readers[f].read(int(ids[k] - starts[f]), self.buf)
                lat.append(perf() - t)
            wait += perf() - t_batch
            if compute[b // batch] > 0:
                compute_s += step(compute[b // batch])
        for r in readers.values():
            t = perf()
            r.__exit__(None, None, None)
            meta += perf() - t
        self.log["epochs"] += 1
        self.log["reads"] += len(lat)
        return EpochRecord(bytes_read=nbytes, samples=len(ids), wait_ns=wait, compute_s=compute_s, lat_ns=lat,
                           read_s=sum(lat) / 1e9, overlapped=False, opens=opens, meta_ns=meta)

    def describe(self):
        return {"standin": dict(self.log)}

    def close(self):
        self.log["closed"] = True
        out = os.path.join(os.environ["STANDIN_LOG"], f"rank{self.ctx.rank}.json")
        with open(out, "w") as fh:
            json.dump(self.log, fh)
'''


def _plugin(tmp_path: Path) -> Path:
    """A distribution under ``tmp_path`` (as ``pip install`` would leave one) whose entry point adds the loader."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "standin_loader.py").write_text(textwrap.dedent(STANDIN))
    info = site / "standin_loader-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: standin-loader\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[ddlio.loaders]\nstandin = standin_loader:Thing\n")
    return site


def test_a_stand_in_loader_measures_a_real_point(tmp_path, sweep):
    site, log = _plugin(tmp_path), tmp_path / "log"
    log.mkdir()
    env = {"PYTHONPATH": f"{site}:{ROOT}", "STANDIN_LOG": str(log)}
    overrides = ("workload=tiny", "reader=standin", "ppn=2", "workload.epochs=2", "workload.compute_time=0.001")
    p = sweep(*overrides, timeout=600, **env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "1 measured" in p.stdout, p.stdout

    with sqlite3.connect(tmp_path / "r.db") as db:
        status, bytes_read, planned, samples, config, run_dir = db.execute(
            "SELECT status, bytes_read, bytes_planned, samples, config, run_dir FROM points").fetchone()
    results = [json.loads(f.read_text()) for f in Path(run_dir).glob("*.json")]
    ranks = next(r["rank_info"] for r in results if "rank_info" in r)
    assert status == "completed"
    # the kernel held the stand-in's bytes to the plan: every sample of the tiny workload, every epoch
    assert bytes_read == planned > 0 and samples == 64
    assert json.loads(config)["reader"] == "standin"
    # every rank set the loader up, read both epochs through it, closed it, and the result records what it said
    logs = [json.loads((log / f"rank{r}.json").read_text()) for r in range(2)]
    assert [entry["epochs"] for entry in logs] == [2, 2] and all(entry["closed"] for entry in logs)
    assert sum(entry["reads"] for entry in logs) == 2 * 64
    assert [r["standin"]["epochs"] for r in ranks] == [2, 2]

    again = sweep(*overrides, timeout=300, **env)  # the stored point is the same point: skipped
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 of 1 points already measured: skipped" in again.stdout, again.stdout


def test_an_unknown_reader_names_the_loaders_plug_ins_included(tmp_path, sweep):
    site = _plugin(tmp_path)
    p = sweep("workload=tiny", "reader=nosuch", PYTHONPATH=f"{site}:{ROOT}")
    assert p.returncode != 0
    assert "reader='nosuch' is unknown: choose one of native, tf, torch, standin" in p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
