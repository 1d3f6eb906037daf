"""ddlio's diagnosis of real Darshan logs against Drishti's (drishti-io, the HPC I/O community's tool), on every log
shipped in the ``darshan`` wheel: for every trigger both tools define, ddlio's finding fires exactly where
Drishti's does, with the same counted values.

Drishti runs as its own command (``drishti --code --csv``), in a subprocess; its fired codes come from its CSV, its
counted values from its text. Where ddlio deliberately differs it is named here:

- random reads that are the loader's shuffle are info in ddlio (``observed_loader_shuffle``; emulated points under
  ``shuffle=sample``), a problem (high) in Drishti; the default agrees with Drishti, the declared case is tested;
- redundant reads: Drishti's P09 fires when the highest offset read is above the bytes read (the reverse of its
  message); ddlio's ``redundant-reads`` counts bytes read above each file's highest offset, so they are not compared;
- ``dxt.darshan`` has an empty executable line, on which Drishti 0.8 raises IndexError when it prints its header
  (after its triggers ran): the wrapper below gives it the name ``unknown``, nothing else.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

darshan = pytest.importorskip("darshan", reason="pydarshan is not installed: pip install 'ddlio[darshan]'")
pytest.importorskip("drishti", reason="drishti-io is not installed: pip install 'ddlio[diagnose]'")

from analysis.diagnose import DRISHTI, Level  # noqa: E402
from analysis.diagnose.cli import from_logs  # noqa: E402
from analysis.diagnose.thresholds import Thresholds  # noqa: E402

BASE = Path(darshan.__file__).parent
LOGS = sorted([*BASE.glob("examples/example_logs/*.darshan"), *BASE.glob("tests/input/*.darshan")])
#: the triggers both tools define (Drishti's codes)
COMPARED = set(DRISHTI.values())
#: run Drishti's own CLI; an empty executable line gets the name "unknown" (see the module docstring)
WRAPPER = """
import sys, darshan
_init = darshan.DarshanReport.__init__
def _init_named(self, *a, **k):
    _init(self, *a, **k)
    if not str(self.metadata.get("exe") or "").split():
        self.metadata["exe"] = "unknown"
darshan.DarshanReport.__init__ = _init_named
sys.argv = ["drishti", *sys.argv[1:]]
from drishti.reporter import main
main()
"""


def drishti(log: Path, out: Path) -> tuple[set[str], dict[str, str]]:
    """(codes Drishti fired, code -> its message) for one log."""
    out.mkdir(parents=True)
    r = subprocess.run([sys.executable, "-c", WRAPPER, "--code", "--csv", "--export_dir", str(out), str(log)],
                       cwd=out, capture_output=True, text=True, timeout=180,
                       env={"COLUMNS": "400", "PATH": "/usr/bin", "HOME": str(out)})  # wide: one line per finding
    assert r.returncode == 0, r.stderr[-2000:]
    rows = list(csv.reader((next(out.glob("*.csv"))).read_text().splitlines()))
    fired = {code for code, v in zip(rows[0], rows[1], strict=True) if v == "True"}
    messages = {}
    for m in re.finditer(r"\[(P\d\d)\] (.+?)\s*│", r.stdout):
        messages.setdefault(m.group(1), m.group(2))
    return fired, messages


def check_values(code: str, finding, message: str) -> None:
    """ddlio's counted values are those in Drishti's message."""
    numbers = re.findall(r"\((\d+(?:\.\d+)?)%?\)", message)
    if code in ("P05", "P06", "P15", "P16"):  # (N) small requests ... represents X% of all
        assert int(numbers[0]) == finding.counted["small"], message
        assert re.search(rf"{100 * finding.value:.2f}%", message), message
    elif code == "P11":  # (N) of random read operations (X%)
        assert int(numbers[0]) == finding.counted["random"], message
        assert f"({100 * finding.value:.2f}%)" in message, message
    elif code == "P08":  # (X%) of misaligned file requests
        assert f"({100 * finding.value:.2f}%)" in message, message
    else:  # P18 P19 P21 P22: when accessing N shared / individual file(s)
        assert int(re.search(r"accessing (\d+)", message).group(1)) == finding.counted["files"], message


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_ddlio_fires_where_drishti_fires_with_the_same_counts(log, tmp_path):
    fired, messages = drishti(log, tmp_path / "drishti")
    (diag,) = from_logs([str(log)], Thresholds())
    ours = {DRISHTI[f.code]: f for f in diag.findings if f.code in DRISHTI}
    ours_fired = {code for code, f in ours.items() if f.level >= Level.HIGH}
    assert ours_fired == fired & COMPARED, (log.name, sorted(ours_fired), sorted(fired & COMPARED))
    for code in ours_fired:
        check_values(code, ours[code], messages[code])


def test_random_reads_declared_the_loaders_shuffle_are_info_where_drishti_says_high(tmp_path):
    log = BASE / "examples/example_logs/dxt.darshan"
    fired, messages = drishti(log, tmp_path / "drishti")
    assert "P11" in fired
    (default,) = from_logs([str(log)], Thresholds())
    (shuffled,) = from_logs([str(log)], Thresholds(observed_loader_shuffle=True))
    f = {x.code: x for x in default.findings}["random-reads"]
    g = {x.code: x for x in shuffled.findings}["random-reads"]
    assert f.level == Level.HIGH and g.level == Level.INFO  # the one deliberate difference
    assert f.counted == g.counted and f"({f.counted['random']})" in messages["P11"]
