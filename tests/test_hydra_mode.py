"""``known_mode``: Hydra's main learns ``hydra.mode`` without composing the config when its own ``get_mode`` would
find it unset, and asks ``get_mode`` for anything else; the answer equals Hydra's over every preset, group option
and command-line form here, and a real ``sweep.py`` run composes its config once fewer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hydra_plugins.ddlio_launcher.mode import known_mode, mode_is_unset

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


def _choices(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


COMMAND_LINES = [
    [],
    ["format=hdf5,tfrecord", "stripe=1,4,16"],
    ["workload=tiny", "ppn=2"],
    ["hydra/sweeper=optuna", "hydra.sweeper.n_trials=4"],
    ["hydra/launcher=basic", "workload=tiny"],
    ["+cluster.env.FOO=bar", "~pool", "++stripe=2"],
    ["hydra.sweep.dir=/tmp/x", "dry_run=true"],
    *[[f"+experiment={e}"] for e in _choices("experiment")],
    *[[f"{g}={c}"] for g in ("format", "access", "workload", "cluster") for c in _choices(g)],
]


@pytest.fixture(scope="module")
def hydra_app():
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra

    sys.path.insert(0, str(ROOT))
    import sweep  # noqa: F401  registers the schema and the ddlio_scratch resolver

    GlobalHydra.instance().clear()
    app = Hydra.create_main_hydra2(task_name="sweep", config_search_path=create_config_search_path(str(CONF)))
    yield app
    GlobalHydra.instance().clear()


@pytest.mark.parametrize("overrides", COMMAND_LINES, ids=lambda o: " ".join(o) or "(none)")
def test_the_shortcut_answers_as_hydra_does(hydra_app, overrides):
    real = hydra_app.get_mode(config_name="config", overrides=list(overrides))
    args = ["--multirun", *overrides]
    assert mode_is_unset(args)
    assert real is None  # what the shortcut answers: ddlio's configs leave hydra.mode unset
    with known_mode(args):
        assert hydra_app.get_mode(config_name="config", overrides=list(overrides)) is None


@pytest.mark.parametrize("overrides", [["hydra.mode=RUN"], ["+hydra.mode=MULTIRUN"], ["hydra=x"],
                                       ["hydra/job_logging=default"], ["hydra.searchpath=[file:///x]"]])
def test_what_could_set_the_mode_asks_hydra(hydra_app, overrides):
    from hydra.types import RunMode

    args = ["--multirun", *overrides]
    assert not mode_is_unset(args)
    assert not mode_is_unset(["--config-dir", "/x", "--multirun"])
    assert not mode_is_unset(["--run"])
    with known_mode(args):  # Hydra's own get_mode runs: it composes and reads what the override set
        got = hydra_app.get_mode(config_name="config", overrides=list(overrides))
    if overrides == ["hydra.mode=RUN"]:
        assert got == RunMode.RUN
    if overrides == ["+hydra.mode=MULTIRUN"]:
        assert got in (RunMode.MULTIRUN, None)  # Hydra refuses "+" on a key it has: get_mode swallows it


def test_get_mode_is_restored():
    from hydra._internal.hydra import Hydra

    real = Hydra.get_mode
    with known_mode(["--multirun"]):
        assert Hydra.get_mode is not real
    assert Hydra.get_mode is real
    with pytest.raises(RuntimeError), known_mode(["--multirun"]):
        raise RuntimeError("boom")
    assert Hydra.get_mode is real


PROBE = """
import runpy, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
calls = []
real = ConfigLoaderImpl.load_configuration
def counted(self, *a, **k):
    calls.append(1)
    return real(self, *a, **k)
ConfigLoaderImpl.load_configuration = counted
sys.argv = ["sweep.py", *sys.argv[1:]]
try:
    runpy.run_path({sweep!r}, run_name="__main__")
except SystemExit as e:
    code = e.code
print("COMPOSITIONS", len(calls), "EXIT", code, file=sys.stderr)
"""


def test_a_real_run_composes_the_config_once(tmp_path):
    """A dry run of one point through sweep.py: Hydra's config loader composes the config once (the multirun's),
    not twice (get_mode's as well): the probe fails with known_mode taken out of sweep.py."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE.format(sweep=str(ROOT / "sweep.py")))
    p = subprocess.run([sys.executable, str(probe), "workload=tiny", "dry_run=true", f"data_root={tmp_path}/d",
                        f"db={tmp_path}/r.db"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    last = [ln for ln in p.stderr.splitlines() if ln.startswith("COMPOSITIONS")]
    assert last, p.stderr[-2000:]
    assert last[-1] == "COMPOSITIONS 1 EXIT 0", p.stdout[-1000:] + p.stderr[-2000:]
