"""The HTML report: self-contained (no network), and rendered by headless Chromium without console errors."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_analysis import build_store, peak_rows

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def render(page: Path, tmp_path: Path, shot: Path) -> list[str]:
    """Open ``page`` in headless Chromium, screenshot it to ``shot``; return the page's console messages."""
    profile = tmp_path / "chromium-profile"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", "--window-size=1280,3000", f"--screenshot={shot}", page.as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    return [line for line in p.stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture
def report(tmp_path: Path) -> Path:
    from analysis.__main__ import main

    build_store(tmp_path, peak_rows(reps=3) + peak_rows(reps=3, nodes=2, format="npz"))
    out = tmp_path / "out" / "report.html"
    assert main(["report", "--db", str(tmp_path / "r.db"), "--out", str(out)]) == 0
    return out


def test_report_is_self_contained_and_has_every_section(report: Path):
    text = report.read_text(encoding="utf-8")
    for heading in ("What was swept", "Configurations", "Guidelines", "Statements", "Stripe layout per scenario",
                    "Format per scenario", "Figures", "Provenance", "Environments", "File systems"):
        assert f">{heading}" in text, heading
    srcs = re.findall(r"""(?:src|href)=['"]([^'"]+)""", text)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)  # nothing fetched, not even a file
    assert "<script" not in text and "http://" not in text and "https://" not in text
    assert "abc123" in text and "numpy 2" in text and "lustre" in text  # provenance: commit, versions, fs
    assert "8OST" in text and "recommend" in text and "1N-1P-8OST" in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium_without_console_errors(report: Path, tmp_path: Path):
    from matplotlib.image import imread

    # the check can fail: a page that logs an error is caught by the same helper
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>console.error('planted')</script></body></html>")
    assert any("planted" in m for m in render(bad, tmp_path, tmp_path / "bad.png"))

    shot = tmp_path / "report.png"
    assert render(report, tmp_path, shot) == []
    img = imread(shot)
    assert img.shape[0] >= 3000 and img.shape[1] >= 1280
    gray = img[..., :3].mean(axis=2)
    assert gray.std() > 0.05 and (gray < 0.3).mean() > 0.001  # text and figures drawn, not a blank page


_MEASURE = """<script>
const out = [...document.querySelectorAll('table')].map((t, i) => ({
  i, head: t.querySelector('th') ? t.querySelector('th').textContent : '', scroll: t.scrollWidth,
  client: t.parentElement.clientWidth, right: Math.round(t.getBoundingClientRect().right),
  page: Math.min(document.documentElement.clientWidth, document.documentElement.getBoundingClientRect().width)}));
const pre = document.createElement('pre'); pre.id = 'measure'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def at_width(page: Path, tmp_path: Path, width: int, script: str = "") -> Path:
    """A copy of ``page`` laid out ``width`` px wide (headless Chromium's window is at least 500 px wide, so a
    phone's width is set on the root element), with ``script`` appended."""
    probe = tmp_path / f"probe-{width}-{len(script)}.html"
    style = f"<style>html{{width:{width}px}}</style>"
    probe.write_text(page.read_text(encoding="utf-8").replace("</head>", style + "</head>")
                     .replace("</body>", script + "</body>"), encoding="utf-8")
    return probe


def measure_tables(page: Path, tmp_path: Path, width: int) -> list[dict]:
    """Each table of ``page`` laid out by headless Chromium at ``width`` px: its scrollWidth, its container's
    clientWidth and its right edge (a copy of the page with a measuring script, read back with --dump-dom)."""
    import json

    probe = at_width(page, tmp_path, width, _MEASURE)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={tmp_path / 'chromium-probe'}", f"--window-size={width},2000",
           "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    found = re.search(r'<pre id="measure">(.*?)</pre>', p.stdout, re.S)
    assert found, p.stdout[-2000:]
    return json.loads(html.unescape(found.group(1)))


def test_report_answers_first_with_readable_columns(report: Path):
    text = report.read_text(encoding="utf-8")
    order = [text.index(h) for h in (">What to use<", ">Figures<", ">Guidelines<", ">What was swept<")]
    assert order == sorted(order)
    answers = text[order[0]:order[1]]
    assert "use stripe layout <b>8OST</b>" in answers and "(n=3)" in answers and "[" in answers
    for raw in ("best_lo", "gain_hi_pct", "best_mean", "runner_up"):
        assert f"<th>{raw}</th>" not in text, raw
    assert "<th>best (low)</th>" in text and "<th>gain % (high)</th>" in text
    assert ">Validity<" in text and "points valid" in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("width", [1400, 390])
def test_no_table_overflows_at_desktop_and_phone_width(report: Path, tmp_path: Path, width: int):
    shot = tmp_path / f"report-{width}.png"
    profile = tmp_path / "chromium-shot"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--no-first-run", f"--user-data-dir={profile}", f"--window-size={width},2400",
                    f"--screenshot={shot}", at_width(report, tmp_path, width).as_uri()], capture_output=True,
                   timeout=120, check=True)
    assert shot.stat().st_size > 10_000
    tables = measure_tables(report, tmp_path, width)
    assert len(tables) >= 5
    for t in tables:
        assert t["scroll"] <= t["client"] + 1 and t["right"] <= t["page"] + 1, t


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_overflow_check_can_fail(tmp_path: Path):
    wide = tmp_path / "wide.html"
    wide.write_text("<!DOCTYPE html><html><head></head><body><div><table style='width:450px'><tr><td>x</td>"
                    "</tr></table></div></body></html>")  # fits Chromium's 500 px window, not a 390 px phone
    (t,) = measure_tables(wide, tmp_path, 390)
    assert t["scroll"] > t["client"] and t["right"] > t["page"]
