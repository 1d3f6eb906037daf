"""The sweep's front door: a swept group's options are checked against each point's own option (Hydra composes
the sweep's config with the swept group's default: ``format=npz,npy format.load=whole`` was refused for hdf5's
lack of ``load``), misspelt group names and group options get a "did you mean", and a Hydra plug-in that is not
installed gets its install line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, SWEEP, cli_env
from experiments.config.validate.keys import unknown_key_problem
from helpers import point


def _keys(stdout: str) -> list[str]:
    return [ln.split(" key ")[1].split()[0] for ln in stdout.splitlines() if " key " in ln]


@pytest.mark.parametrize(("swept", "option"), [("format=npz,npy", "format.load=whole"),
                                               ("format=npy,npz", "format.layout=array"),
                                               ("format=jpeg,png", "format.decode=true")])
def test_an_option_of_every_swept_format_is_accepted(sweep, tmp_path, swept, option):
    extra = ("workload.sample_shape=[8,8,3]",) if "array" in option else ()
    p = sweep("-m", swept, option, *extra, "workload=tiny", "dry_run=true", timeout=120)
    assert p.returncode == 0, p.stderr
    names = swept.split("=")[1].split(",")
    assert "dry run: 2 point(s)" in p.stdout
    # each point is the one its own composition gives (the sweep's config composed with another option changes none)
    want = [point(tmp_path, f"format={n}", option, *extra).point_key for n in names]
    assert _keys(p.stdout) == want
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize(("args", "words"), [
    (("format=hdf5,npz", "format.load=whole"),
     ["format.load is an option of format=npy, npz only, not of format=hdf5", "rdcc_nbytes"]),
    (("format=bin,hdf5", "format.load=whole"), ["not of format=bin (which has no options)"]),  # the first point's
    (("format=npz,npy", "format.lod=whole"), ["format.lod is not a ddlio key: did you mean format.load?"]),
    (("format=hdf5", "format.load=whole"), ["not of format=hdf5"]),
    (("cluster=local,slurm", "cluster.partition=x"), ["cluster.partition=x applies to Slurm only"]),
    (("fromat=hdf5",), ["fromat is not a ddlio key: did you mean format=hdf5?"]),
    (("expriment=paper_formats",), ["did you mean +experiment=paper_formats?"]),
    (("format=hdf6",), ["format=hdf6 is unknown: choose one of", "(did you mean format=hdf5?)"]),
])
def test_an_option_no_swept_point_has_is_one_line(sweep, tmp_path, args, words):
    p = sweep("-m", *args, "workload=tiny", "dry_run=true", timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    for w in words:
        assert w in p.stderr
    assert "did you mean format.load?" not in p.stderr or "lod" in args[1]  # never a key as its own fix
    assert "Traceback" not in p.stderr + p.stdout
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize(("key", "kwargs", "want"), [
    ("fromat", {"given": "fromat=npz"}, "did you mean format=npz?"),
    ("worklaod", {}, "did you mean workload?"),
    ("expriment", {}, "did you mean +experiment?"),
    ("format.load", {"format_name": "hdf5"}, "format.load is an option of format=npy, npz only, not of format=hdf5"),
    ("format.load", {}, "format.load is an option of format=npy, npz only"),
    ("format.decode", {"conf": __import__("experiments.formats", fromlist=["FORMAT_CONFS"]).FORMAT_CONFS["bin"]},
     "format.decode is an option of format=jpeg, png only, not of format=bin"),
    ("stripe_sise", {}, "did you mean stripe_size?"),
])
def test_unknown_key_messages_name_the_fix(key, kwargs, want):
    assert want in unknown_key_problem(key, **kwargs)


_WITHOUT_OPTUNA = """
import runpy, sys
sys.modules["hydra_plugins.hydra_optuna_sweeper"] = None  # as if hydra-optuna-sweeper were not installed
sys.argv = ["sweep.py", *sys.argv[1:]]
sys.path.insert(0, {root!r})
runpy.run_path({sweep!r}, run_name="__main__")
"""


def test_a_sweeper_plugin_not_installed_gets_its_install_line(tmp_path):
    """Hydra finds hydra/sweeper=optuna by importing the hydra_plugins namespace package: with the plug-in's
    package unimportable, the choice is Hydra's "missing config" for the group; it is answered with the extra."""
    code = _WITHOUT_OPTUNA.format(root=str(ROOT), sweep=str(SWEEP))
    p = subprocess.run([sys.executable, "-c", code, "-m", "hydra/sweeper=optuna", "workload=tiny", "dry_run=true",
                        f"data_root={tmp_path / 'data'}", f"db={tmp_path / 'r.db'}"], cwd=tmp_path,
                       env=cli_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip() == ("error: hydra/sweeper=optuna needs the Optuna sweeper (hydra-optuna-sweeper): "
                                "pip install -e '.[tune]'")
    assert not (tmp_path / "r.db").exists()


def test_a_misspelt_plugin_option_gets_the_closest():
    from sweep import unknown_option_problem

    assert unknown_option_problem("hydra/sweeper/optuan", ["basic", "ddlio", "optuna"]) == (
        "hydra/sweeper=optuan is unknown: choose one of basic, ddlio, optuna (did you mean hydra/sweeper=optuna?)")
    assert "pip install -e '.[tune]'" in unknown_option_problem("hydra/sweeper/optuna", ["basic", "ddlio"])
