"""What a running point shows (issue 37): its phase written to its run folder (generating, settling, epoch k of
n), shown in place on a terminal with an estimate and not at all elsewhere, read back by ``analysis status``; the
point's line splits generation from the epochs."""

from __future__ import annotations

import io
import json
import re
import sqlite3
from pathlib import Path

from conftest import run_cli
from ddlio import phase


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_phase_is_written_read_and_described(tmp_path):
    assert phase.read(tmp_path) is None
    phase.write(tmp_path, "epoch", epoch=2, epochs=5, epoch_s=[2.0, 4.0])
    ph = phase.read(tmp_path)
    assert ph is not None and ph["phase"] == "epoch"
    # 2 epochs done, 3 to go including this one: 3 x 3 s, less the 1 s this one has run
    assert phase.describe(ph, now=ph["since"] + 1) == "epoch 3 of 5 (~8 s left)"
    phase.write(tmp_path, "epoch", epoch=0, epochs=5, epoch_s=[])
    ph = phase.read(tmp_path)
    assert phase.describe(ph, now=ph["since"] + 2) == "epoch 1 of 5 (2 s so far)"
    phase.write(tmp_path, "generating")
    ph = phase.read(tmp_path)
    assert phase.describe(ph, now=ph["since"] + 12) == "generating the dataset (12 s so far)"
    phase.write(tmp_path / "missing", "settling")  # a folder that cannot take it: nothing said, nothing raised
    assert phase.read(tmp_path / "missing") is None


def test_the_live_line_is_rewritten_in_place_on_a_terminal_only(tmp_path):
    phase.write(tmp_path, "settling")
    plain = io.StringIO()
    line = phase.LiveLine(plain, every_s=0)
    line.running("npz/shared 1N-1P", tmp_path)
    line.tick()
    line.done()
    assert plain.getvalue() == ""
    tty = Tty()
    line = phase.LiveLine(tty, every_s=0)
    line.running("npz/shared 1N-1P", tmp_path)
    line.tick()
    phase.write(tmp_path, "epoch", epoch=1, epochs=3, epoch_s=[1.0])
    line.tick()
    line.done()
    out = tty.getvalue()
    assert out.startswith("\r  npz/shared 1N-1P: settling the fresh dataset (0 s so far)\x1b[K")
    assert re.search(r"\r  npz/shared 1N-1P: epoch 2 of 3 \(~\d s left\)\x1b\[K\r\x1b\[K$", out), repr(out)
    assert "\n" not in out


def test_a_local_point_says_its_phase_and_splits_its_time(sweep, tmp_path):
    p = sweep("workload=tiny", "workload.epochs=3")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "\r" not in p.stdout and "\x1b" not in p.stdout  # not a terminal: nothing but the lines
    line = next(x for x in p.stdout.splitlines() if x.startswith("[1/1]"))
    assert re.search(r"\(\d+\.\d s: generation \d+\.\d s, epochs \d+\.\d s\)$", line), line
    with sqlite3.connect(tmp_path / "r.db") as c:
        [(run_dir,)] = c.execute("SELECT run_dir FROM points").fetchall()
    ph = json.loads((Path(run_dir) / phase.FILE).read_text())
    assert ph["phase"] == "epoch" and ph["epoch"] == 2 and ph["epochs"] == 3 and len(ph["epoch_s"]) == 2
    # as `status` sees a point still running: its phase
    with sqlite3.connect(tmp_path / "r.db") as c:
        c.execute("UPDATE points SET status = 'submitted'")
    st = run_cli(["-m", "analysis", "status", "--db", str(tmp_path / "r.db")], tmp_path, tmp_path, timeout=120)
    assert st.returncode == 0, st.stdout + st.stderr
    assert re.search(r"submitted \(queued or running\) .* job \S+: epoch 3 of 3 \(~\d+ s left\)", st.stdout), \
        st.stdout
    p = sweep("workload=tiny", "workload.epochs=2")  # the same dataset, there already: no generation in the line
    line = next(x for x in p.stdout.splitlines() if x.startswith("[1/1]"))
    assert re.search(r"\((\d+\.\d s: )?epochs \d+\.\d s\)$", line) and "generation" not in line, line
