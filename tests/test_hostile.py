"""Hostile and careless values: refused with one message before anything is written, or quoted so that nothing a
user typed into a value ever runs. The job scripts are rendered from hostile values and run with a real bash."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import ROOT
from ddlio.errors import ConfigError
from ddlio.shell import control_problems, export_line, quote, sbatch_flag
from experiments.config.validate import validate
from experiments.executors.slurm import job_script, render_sbatch
from helpers import point

#: values that would run a command if any of them reached a shell unquoted (MARK is replaced per test)
HOSTILE = [
    "a$(touch MARK)b",
    "`touch MARK`",
    "x; touch MARK; #",
    "q'uo\"te' && touch MARK",
    "$(touch MARK)'$(touch MARK)'",
    "ünï cødé ✓ | touch MARK",
    "*",
]


def hostile(mark: Path) -> list[str]:
    return [h.replace("MARK", shlex.quote(str(mark))) for h in HOSTILE]


def hq(value: str) -> str:
    """``value`` as a quoted Hydra override value."""
    return f"'{value}'" if "'" not in value else '"' + value.replace('"', '\\"') + '"'


@pytest.mark.parametrize("key", ["cluster.partition", "cluster.account", "cluster.qos", "cluster.constraint",
                                 "+cluster.sbatch.comment", "+cluster.env.A", "data_root", "workload.payload"])
@pytest.mark.parametrize("bad", ["x\ntouch F #", "x\rtouch F", "x\x1b[2J", "tab\there"])
def test_control_characters_are_refused_with_the_key_named(tmp_path, key, bad):
    with pytest.raises(ConfigError, match=rf"{key.lstrip('+')}=.*contains a control character"):
        point(tmp_path, "cluster=slurm", f"{key}='{bad}'")


@pytest.mark.parametrize(("override", "message"), [
    ("cluster.timeout_min=nan", r"cluster.timeout_min=nan must be a finite number of minutes > 0"),
    ("cluster.timeout_min=inf", r"cluster.timeout_min=inf must be a finite number of minutes > 0"),
    ("cluster.timeout_min=1e12", r"cluster.timeout_min=1e\+12 is out of range: at most 527040 minutes"),
    ("cluster.hang_timeout_s=-inf", r"cluster.hang_timeout_s=-inf must be a finite number of seconds > 0"),
    ("cluster.hang_timeout_s=nan", r"cluster.hang_timeout_s=nan must be a finite number"),
    ("+cluster.sbatch.x=[1,2]", r"cluster.sbatch.x must be a single value"),
])
def test_bad_numbers_and_names(tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        point(tmp_path, "cluster=slurm", override)


@pytest.mark.parametrize(("section", "key", "message"), [
    ("env", "9LIVES", r"cluster.env: '9LIVES' is not an environment variable name"),
    ("env", "A$(touch x)", r"cluster.env: 'A\$\(touch x\)' is not an environment variable name"),
    ("env", "A B", r"cluster.env: 'A B' is not an environment variable name"),
    ("sbatch", "x=1 --y", r"cluster.sbatch: 'x=1 --y' is not an sbatch option name"),
])
def test_bad_names_from_a_config_file(tmp_path, section, key, message):
    """Hydra's override grammar refuses such keys on the command line; a YAML file under conf/ does not."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = OmegaConf.to_container(compose("config", overrides=[
            "cluster=slurm", "workload=tiny", f"data_root={tmp_path / 'data'}", f"db={tmp_path / 'r.db'}"]))
    cfg["cluster"][section] = {key: "1"}
    with pytest.raises(ConfigError, match=message):
        validate(cfg, tmp_path)


def test_control_problems_walk_keys_and_lists():
    found = list(control_problems({"a": {"b\nc": 1, "d": ["ok", "x\x00"]}, "e": "fine ✓"}))
    assert len(found) == 2
    assert "a has a key 'b\\nc' with a control character (a newline)" in found[0]
    assert found[1].startswith("a.d[1]='x\\x00' contains a control character (a NUL byte)")


def test_quoting_functions_refuse_what_cannot_be_quoted():
    with pytest.raises(ValueError, match="control character"):
        quote("a\nb")
    with pytest.raises(ValueError, match="not an sbatch option name"):
        sbatch_flag("x\n#", 1)
    with pytest.raises(ValueError, match="not an environment variable name"):
        export_line("A B", 1)
    assert sbatch_flag("mail_type", "END,FAIL") == "#SBATCH --mail-type=END,FAIL"
    assert sbatch_flag("exclusive", True) == "#SBATCH --exclusive"


def _sbatch_values(script: str) -> dict[str, str]:
    """The ``#SBATCH --key=value`` options of a script, each value unquoted as one shell word (as sbatch reads it)."""
    out = {}
    for line in script.splitlines():
        if line.startswith("#SBATCH --"):
            key, _, value = line[len("#SBATCH --"):].partition("=")
            words = shlex.split(value)
            assert len(words) <= 1, f"a directive's value became several words: {line!r}"
            out[key] = words[0] if words else ""
    return out


def test_reproducer_from_hostile_values_runs_nothing(tmp_path):
    mark = tmp_path / "MARK"
    values = hostile(mark)
    run_dir = tmp_path / "runs" / values[3]
    run_dir.mkdir(parents=True)
    env = {f"V{i}": v for i, v in enumerate(values)}
    script = render_sbatch(
        label=values[0], run_dir=str(run_dir), nodes=1, ppn=1, time_min=5,
        # the launch line is the user's own shell by design: here it records what the exports set, then runs
        # `true` with the kernel's command line as arguments
        launch=f"env > {shlex.quote(str(tmp_path / 'env.txt'))}; true", python=values[1],
        project_dir=values[2], kernel_spec=values[4], partition=values[0], account=values[1], qos=values[2],
        constraint=values[5], sbatch={"comment": values[3], "mail_user": values[6]}, setup=[], env=env,
    )
    opts = _sbatch_values(script)
    assert (opts["partition"], opts["account"], opts["qos"], opts["constraint"]) == tuple(
        values[i] for i in (0, 1, 2, 5))
    assert opts["comment"] == values[3] and opts["mail-user"] == values[6]
    path = tmp_path / "repro.sbatch"
    path.write_text(script)
    p = subprocess.run(["bash", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                       env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    assert not mark.exists(), "a value ran as a command"
    seen = dict(ln.split("=", 1) for ln in (tmp_path / "env.txt").read_text().splitlines() if "=" in ln)
    for k, v in env.items():  # each value arrived as itself, byte for byte
        assert seen[k] == v


def test_submitit_job_script_from_hostile_values_runs_nothing(tmp_path):
    mark = tmp_path / "MARK"
    values = hostile(mark)
    data_root = tmp_path / values[4]
    spec = point(tmp_path, "cluster=slurm", f"data_root={hq(str(data_root))}", f"cluster.partition={hq(values[0])}",
                 f"+cluster.sbatch.comment={hq(values[2])}")
    assert spec.cluster.partition == values[0] and spec.data_root == str(data_root)
    folder = Path(spec.data_root) / "runs" / "_slurm"
    argv = tmp_path / "argv.txt"
    stand_in = tmp_path / "python"  # a stand-in for the job's python: records the arguments it was given
    stand_in.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {shlex.quote(str(argv))}\n')
    stand_in.chmod(0o755)
    script = job_script([spec, spec], folder, python=str(stand_in))
    opts = _sbatch_values(script)
    assert opts["partition"] == values[0] and opts["comment"] == values[2]
    assert opts["output"].startswith(str(folder))
    path = tmp_path / "job.sh"
    path.write_text(script)
    p = subprocess.run(["bash", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    assert argv.read_text().splitlines() == ["-u", "-m", "experiments.executors.entry",  # intact
                                             "-u", "-m", "submitit.core._submit", str(folder)]
    assert not mark.exists(), "a value ran as a command"


@pytest.mark.parametrize("override", [
    "cluster.partition='x\ntouch {mark} #'",
    "+cluster.sbatch.comment='x\ntouch {mark}'",
    "+cluster.env.A='x\ntouch {mark}'",
    "data_root='{tmp}/d\ntouch {mark}'",
    "cluster.timeout_min=nan",
])
def test_cli_refuses_hostile_values_and_writes_nothing(sweep, tmp_path, override):
    mark = tmp_path / "MARK"
    p = sweep("cluster=slurm", override.format(mark=mark, tmp=tmp_path), timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 12
    assert not mark.exists()
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


def test_dry_run_prints_the_whole_job_script(sweep, tmp_path):
    p = sweep("cluster=slurm", "cluster.setup=[module load openmpi]", "cluster.partition='a$(b)'", "dry_run=true")
    # where a Slurm answers, the plan is shown and the point refused: that partition does not exist there
    assert p.returncode == 0 or (p.returncode == 2 and "partition a$(b) does not exist" in p.stderr), p.stderr
    assert "| module load openmpi" in p.stdout
    assert "| #SBATCH --partition='a$(b)'" in p.stdout
    assert "-u -m submitit.core._submit" in p.stdout
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


# ----------------------------------------------------- every refusal of bad input: exit 2, one line, nothing written
@pytest.mark.parametrize(("overrides", "message"), [
    (("hydra.sweeper.n_trials=0",), "hydra.sweeper.n_trials=0 is out of range: must be an integer >= 1"),
    (("hydra.sweeper.n_trials=-3",), "hydra.sweeper.n_trials=-3 is out of range"),
    (("hydra.sweeper.n_jobs=0",), "hydra.sweeper.n_jobs=0 is out of range"),
    (("hydra.sweeper.n_trials=2", "workload.read_threads=range(5,0)"),
     "hydra/sweeper=optuna refused its settings: The `low` value must be smaller than or equal to the `high`"),
    (("hydra.sweeper.n_trials=2", "hydra.sweeper.direction=sideways"), "refused its settings: Please set either"),
    (("hydra.sweeper.n_trials=2", "+workload.read_thread=choice(1,2)"), "did you mean workload.read_threads?"),
])
def test_the_optuna_sweepers_bad_settings_are_one_message_and_exit_2(sweep, tmp_path, overrides, message):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="pip install -e '.[tune]'")
    p = sweep("-m", "hydra/sweeper=optuna", *overrides, "workload=tiny", timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith("error: ") and message in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stdout + p.stderr
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


def test_a_flush_file_larger_than_the_free_space_is_named_as_the_flush_file(sweep, tmp_path):
    p = sweep("workload=tiny", "workload.cache=storage_cold", "workload.flush_size=1000TiB", timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "the storage_cold flush file (workload.flush_size=1000.0 TiB) needs 1000.0 TiB" in p.stderr, p.stderr
    assert "lower workload.flush_size" in p.stderr and "workload.samples" not in p.stderr, p.stderr
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize("override", ["+cluster.env.MY_VAR=1", "+experiment=paper_formats"])
def test_open_maps_and_config_groups_still_take_new_keys(sweep, tmp_path, override):
    p = sweep(override, "workload=tiny", "dry_run=true", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "dry run:" in p.stdout and not (tmp_path / "data").exists()
