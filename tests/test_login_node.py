"""The tests are safe where users run them: on a login node they submit nothing to the site's Slurm, and what
they cannot run (a missing extra, a cluster that is not the project's) skips with a one-line reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import OWN_SLURM_MARK, ROOT, SLURM_ENV, cli_env, slurm_refusal

SITE_CONF = "# the site's own\nClusterName=bigiron\nSlurmctldHost=login1\n"
OWN_CONF = f"{OWN_SLURM_MARK} (base /tmp/x) -- overwritten at every start\nClusterName=ci\nSlurmctldHost=vm\n"


@pytest.mark.parametrize(("conf", "named", "allowed"), [
    (OWN_CONF, "", True),  # the project's own test cluster (tests/cluster/slurm.sh wrote its slurm.conf)
    (SITE_CONF, "", False),  # a login node: sinfo answers, but for the site's cluster
    (SITE_CONF, "bigiron", True),  # the user named it
    (SITE_CONF, "other", False),  # the user named another one
    (OWN_CONF.replace("ClusterName=ci", "ClusterName=prod"), "", False),  # the mark alone is not enough
    (None, "", False),  # no slurm.conf at all (configless sites)
])
def test_slurm_tests_use_only_the_project_cluster_or_the_named_one(tmp_path, monkeypatch, conf, named, allowed):
    path = tmp_path / "slurm.conf"
    if conf is not None:
        path.write_text(conf)
    monkeypatch.setenv("SLURM_CONF", str(path))
    if named:
        monkeypatch.setenv(SLURM_ENV, named)
    else:
        monkeypatch.delenv(SLURM_ENV, raising=False)
    why = slurm_refusal()
    assert (why is None) is allowed, why
    if why:
        assert "\n" not in why and (SLURM_ENV in why or "slurm.sh" in why)


@pytest.mark.parametrize(("owner", "allowed"), [
    (None, True),  # started by a version of slurm.sh that recorded no owner
    ("here", True),  # this checkout started it
    ("other", False),  # another checkout (a CI clone) started it and its tests may be running on it
    ("gone", True),  # the checkout that started it is gone: nobody else's tests can be using it
])
def test_the_project_cluster_is_used_only_by_the_checkout_that_started_it(tmp_path, monkeypatch, owner, allowed):
    path = tmp_path / "slurm.conf"
    path.write_text(OWN_CONF)
    (tmp_path / "other").mkdir()
    if owner is not None:
        recorded = {"here": str(ROOT.resolve()), "other": str(tmp_path / "other"), "gone": str(tmp_path / "gone")}
        (tmp_path / "ddlio-owner").write_text(recorded[owner] + "\n")
    monkeypatch.setenv("SLURM_CONF", str(path))
    monkeypatch.delenv(SLURM_ENV, raising=False)
    why = slurm_refusal()
    assert (why is None) is allowed, why
    if why:
        assert "\n" not in why and f"bash {tmp_path / 'other'}/tests/cluster/slurm.sh stop" in why


def test_on_a_login_node_the_slurm_tests_skip_in_one_line_each_and_call_no_slurm_command(tmp_path):
    """pytest on the Slurm tests with a site's slurm.conf: every test skips with one line, and no Slurm command
    runs (a sinfo, sbatch or scancel on PATH that records being called would show it)."""
    (tmp_path / "slurm.conf").write_text(SITE_CONF)
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    for cmd in ("sinfo", "sbatch", "squeue", "scancel", "sacct", "scontrol", "srun"):
        stand_in = bin_dir / cmd  # a stand-in for the Slurm command that only records its call
        stand_in.write_text(f"#!/bin/sh\necho {cmd} >> {calls}\nexit 1\n")
        stand_in.chmod(0o755)
    env = cli_env(tmp_path, SLURM_CONF=str(tmp_path / "slurm.conf"))
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env.pop(SLURM_ENV, None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-m", "slurm",
                        str(ROOT / "tests" / "test_slurm.py"), str(ROOT / "tests" / "test_slurm_queue.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    skips = [ln for ln in p.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert skips and all("is not the project's test cluster" in ln for ln in skips), p.stdout
    assert "failed" not in p.stdout and " passed" not in p.stdout.splitlines()[-1], p.stdout
    assert not calls.exists(), calls.read_text()
