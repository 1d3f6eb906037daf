"""The HTML report: self-contained (no network), and rendered by headless Chromium without console errors."""

from __future__ import annotations

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
