"""No output replaces a file ddlio did not write (analysis/outputs.py): report, figures, export and
import-darshan's --workload-out are checked before any work, refused with exit 2 naming the path, and leave no
partial file behind, a full disk (a real tmpfs) included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.__main__ import main as analysis_main
from conftest import ROOT, SWEEP, cli_env


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store with one measured point (a real tiny sweep)."""
    d = tmp_path_factory.mktemp("store")
    p = subprocess.run([sys.executable, str(SWEEP), "workload=tiny", f"data_root={d / 'data'}", f"db={d / 'r.db'}"],
                       cwd=d, env=cli_env(d), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return d / "r.db"


@pytest.fixture
def analysis(capsys, monkeypatch, tmp_path):
    """``analysis(*args)``: ``python -m analysis ARGS`` run in this process (its main, as the command runs it)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DDLIO_TRACEBACK", raising=False)

    def _run(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        code = analysis_main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return _run


def refused(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and "unexpected" not in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    for w in words:
        assert w in p.stderr, p.stderr


def files_below(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


FOREIGN = ("report", "export", "export-parquet", "figures-file")


@pytest.mark.parametrize("cmd", FOREIGN)
def test_an_output_that_ddlio_did_not_write_is_refused_and_kept(store, tmp_path, cmd, analysis):
    mine = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", mine)
    args = {"report": ["report"], "export": ["export"], "export-parquet": ["export", "--format", "parquet"],
            "figures-file": ["figures"]}[cmd]
    p = analysis(*args, "--db", str(store), "--out", str(mine))
    refused(p, str(mine))
    assert mine.read_bytes() == (ROOT / "pyproject.toml").read_bytes()
    assert files_below(tmp_path) == ["pyproject.toml"]
    if cmd != "figures-file":  # --force replaces it (a directory is never replaced by figures)
        assert analysis(*args, "--db", str(store), "--out", str(mine), "--force").returncode == 0
        assert mine.read_bytes() != (ROOT / "pyproject.toml").read_bytes()


@pytest.mark.parametrize(("args", "name"), [
    (["report"], "r.html"), (["export"], "e.csv"), (["export", "--format", "parquet"], "e.parquet")])
def test_ddlios_own_output_is_replaced_and_keeps_its_mode(store, tmp_path, args, name, analysis):
    out = tmp_path / name
    assert analysis(*args, "--db", str(store), "--out", str(out)).returncode == 0
    out.chmod(0o640)
    first = out.stat().st_mtime_ns
    p = analysis(*args, "--db", str(store), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert out.stat().st_mtime_ns >= first and out.stat().st_mode & 0o777 == 0o640
    # no temporary file left; a CSV (no mark of its own) is listed in its directory's manifest
    assert files_below(tmp_path) == sorted([name, *([".ddlio-outputs"] if name.endswith(".csv") else [])])


def test_report_into_a_directory_is_refused_and_leaves_no_tmp(store, tmp_path, analysis):
    (tmp_path / "out").mkdir()
    refused(analysis("report", "--db", str(store), "--out", str(tmp_path / "out")), "is a directory")
    assert files_below(tmp_path) == ["out"]


def test_figures_replace_their_own_files_only(store, tmp_path, analysis):
    figs = tmp_path / "figs"
    assert analysis("figures", "--db", str(store), "--out", str(figs)).returncode == 0
    assert analysis("figures", "--db", str(store), "--out", str(figs)).returncode == 0  # its own: fine
    other = tmp_path / "other"
    other.mkdir()
    (other / "latency.png").write_bytes(b"my own picture")
    refused(analysis("figures", "--db", str(store), "--out", str(other)), "latency.png", "--force")
    assert files_below(other) == ["latency.png"] and (other / "latency.png").read_bytes() == b"my own picture"


@pytest.mark.parametrize("target", ["conf/workload/tiny.yaml", "conf/config.yaml"])
def test_a_shipped_preset_is_never_replaced_even_with_force(store, tmp_path, target, analysis):
    shipped = ROOT / target
    before = shipped.read_bytes()
    refused(analysis("report", "--db", str(store), "--out", str(shipped), "--force"), "never replaced")
    assert shipped.read_bytes() == before


@pytest.mark.parametrize(("out", "words"), [
    ("/proc/ddlio-x.yaml", ["/proc/ddlio-x.yaml", "cannot write"]),
    ("{tmp}/a-file/x.yaml", ["is not a directory"]),
    ("{root}/conf/workload/tiny.yaml", ["never replaced"]),
])
def test_import_darshan_checks_its_output_before_storing_anything(tmp_path, out, words, analysis):
    darshan = pytest.importorskip("darshan", reason="pydarshan is not installed: pip install 'ddlio[darshan]'")
    log = Path(darshan.__file__).parent / "examples/example_logs/ior_hdf5_example.darshan"
    (tmp_path / "a-file").write_text("x")
    out = out.format(tmp=tmp_path, root=ROOT)
    before = (ROOT / "conf/workload/tiny.yaml").read_bytes()
    p = analysis("import-darshan", str(log), "--db", str(tmp_path / "r.db"), "--workload-out", out,
                 "--force")
    refused(p, "--workload-out", *words)
    assert not (tmp_path / "r.db").exists()
    assert (ROOT / "conf/workload/tiny.yaml").read_bytes() == before


@pytest.fixture
def full_disk(tmp_path) -> Path:
    """A real 64 KiB tmpfs under tmp_path (needs root to mount; skipped otherwise)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize(("args", "out"), [(["report"], "r.html"), (["figures"], "figs")])
def test_a_full_disk_leaves_no_partial_output(store, tmp_path, full_disk, args, out, analysis):
    p = analysis(*args, "--db", str(store), "--out", str(full_disk / out))
    refused(p, str(full_disk / out), "No space left on device")
    left = [p for p in full_disk.rglob("*") if p.is_file()]
    assert not [p for p in left if p.suffix == ".tmp" or (p.stat().st_size == 0 and p.name != ".ddlio-figures")]
    if out == "r.html":
        assert left == []


def test_outputs_are_checked_before_the_store_is_opened(tmp_path, analysis):
    p = analysis("export", "--db", str(tmp_path / "none.db"), "--out", "/proc/x.csv")
    refused(p, "/proc/x.csv")  # not "no results store at ...": the output is checked first
