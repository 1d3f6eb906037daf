"""Package layering: ``lustre`` imports nothing from ``experiments`` (which imports ``lustre``); both share the
exception hierarchy through ``ddlio.errors``."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_lustre_imports_nothing_from_experiments():
    code = ("import sys, lustre, lustre.fs, lustre.lfs, lustre.posix\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('experiments', 'analysis')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_the_errors_are_the_same_classes_under_both_names():
    import ddlio.errors

    for name in ("DdlioError", "ConfigError", "LayoutError", "LaunchError", "TimeLimitError"):
        assert getattr(ddlio.errors, name) is getattr(ddlio.errors, name)


def test_one_answer_to_is_this_lustre(tmp_path):
    from lustre.fs import LUSTRE_MAGIC, FsInfo, fs_info, is_lustre

    here = fs_info(tmp_path)
    assert here.is_lustre is is_lustre(tmp_path) is (here.magic == LUSTRE_MAGIC)
    named = FsInfo("/x", "lustre", 0xEF53, "/x", "lustre", "", 1, 1)  # a mount table's name is not the test
    assert not named.is_lustre
    assert FsInfo("/x", "lustre", LUSTRE_MAGIC, "/x", "lustre", "", 1, 1).is_lustre
