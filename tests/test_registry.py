"""The registries of implementations take plug-ins from outside the product through entry points
(:class:`ddlio.lazy.LazyRegistry` with a ``group``), looked up only when a name is not built in."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import ROOT


def _plugin(tmp_path: Path, group: str, name: str, module: str, body: str) -> Path:
    """A distribution on ``tmp_path`` (as ``pip install`` would leave one) with one entry point."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))
    info = tmp_path / "standin_plugin-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: standin-plugin\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {module}:Thing\n")
    return tmp_path


def _run(code: str, path: Path) -> str:
    env = {"PYTHONPATH": f"{path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_an_entry_point_of_the_group_is_a_name_of_the_registry(tmp_path):
    path = _plugin(tmp_path, "ddlio.kinds", "standin", "standin_mod", "class Thing:\n    answer = 42\n")
    out = _run(textwrap.dedent("""
        from experiments.registry import KINDS
        assert "train" in KINDS and "standin" in KINDS and "nosuch" not in KINDS
        print(sorted(KINDS), KINDS["standin"].answer, KINDS.path("standin"))
    """), path)
    assert out.split("\n")[0] == "['checkpoint', 'standin', 'train'] 42 standin_mod:Thing"


def test_a_built_in_name_never_reads_the_installed_distributions(tmp_path):
    path = _plugin(tmp_path, "ddlio.loaders", "native", "standin_mod", "class Thing:\n    pass\n")
    out = _run(textwrap.dedent("""
        import importlib.metadata

        def scan(**kw):
            raise AssertionError("the installed distributions were read for a built-in name")

        importlib.metadata.entry_points = scan
        from experiments.registry import LOADERS
        assert "native" in LOADERS
        print(LOADERS.path("native"))
        del importlib.metadata.entry_points
    """), path)
    # no scan for a built-in name, and a plug-in cannot take a built-in name
    assert out.split() == ["experiments.kernel.loaders.native:NativeLoader"]


def test_an_unknown_name_is_refused_with_every_name_listed(tmp_path):
    from experiments.registry import KINDS, unknown

    assert unknown(KINDS, "kind", "nosuch").startswith("kind='nosuch' is unknown: choose one of ")
    assert "train" in unknown(KINDS, "kind", "nosuch")
