"""The launcher's composition (one Hydra composition per set of group choices, value overrides applied to a copy)
equals Hydra's own ``load_sweep_config``, key by key, for points drawn from every preset and group option in conf/
and every sweep form of the README; a bad override fails with Hydra's own error either way."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"


@pytest.fixture(scope="module")
def loader_and_master():
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import setup_globals
    from hydra.types import RunMode

    sys.path.insert(0, str(ROOT))
    import sweep  # noqa: F401  registers the schema and the ddlio_scratch resolver

    setup_globals()
    GlobalHydra.instance().clear()
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONF)))
    master = loader.load_configuration(config_name="config", overrides=[], run_mode=RunMode.MULTIRUN)
    return loader, master


def _choices(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def _points() -> list[list[str]]:
    rng = random.Random(24)
    groups = [[f"+experiment={e}" for e in _choices("experiment")] + [""],
              [f"format={f}" for f in _choices("format")] + [""],
              [f"access={a}" for a in _choices("access")] + [""],
              [f"workload={w}" for w in _choices("workload")] + [""],
              [f"cluster={c}" for c in _choices("cluster")] + [""]]
    values = ["stripe=4", "stripe=16", "nodes=2", "ppn=4", "repeat=7", "dry_run=true", "data_root=D", "db=D/r.db",
              "reader=torch", "workload.read_threads=2", "workload.batch_size=8", "++stripe=2", "~pool",
              "+cluster.env.FOO=bar", "seed=3", "stripe_size=4MiB", "order=random", "objective=samples_per_s",
              "db='sqlite:///x y.db'", "pool=\"\"", "format.compression=gzip", "cluster.timeout_min=5"]
    out = [[], ["format=hdf5", "stripe=1"], ["format=tfrecord", "access=fpp", "workload=tiny", "data_root=D"],
           ["cluster=slurm", "format=npz", "nodes=4", "ppn=4"], ["+experiment=paper_scaling", "dry_run=true"],
           ["reader=torch", "workload.read_threads=2"], ["workload=tiny", "ppn=2"]]
    for _ in range(60):
        pt = [rng.choice(g) for g in groups] + rng.sample(values, rng.randint(0, 4))
        pt = [o for o in pt if o]
        rng.shuffle(pt)
        keys = [o.lstrip("+~").split("=")[0] for o in pt]
        if len(set(keys)) == len(keys):
            out.append(pt)
    return out


def _both(loader, master, overrides):
    from hydra_plugins.ddlio_launcher.compose import FastComposer

    def attempt(f):
        try:
            return f(), None
        except Exception as e:  # compared as Hydra reports it
            return None, f"{type(e).__name__}: {e}"

    slow = attempt(lambda: loader.load_sweep_config(master, list(overrides)))
    composer = FastComposer(loader, master)
    attempt(lambda: composer.compose([o for o in overrides if composer._group(o.lstrip("+~").split("=")[0])]))
    fast = attempt(lambda: composer.compose(overrides))
    return slow, fast, composer


def _flat(cfg) -> dict:
    out: dict = {}

    def walk(v, prefix):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{prefix}{k}.")
        else:
            out[prefix[:-1]] = v

    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return out


@pytest.mark.parametrize("overrides", _points(), ids=lambda p: " ".join(p) or "defaults")
def test_fast_equals_hydra_key_by_key(loader_and_master, overrides):
    loader, master = loader_and_master
    (slow, slow_err), (fast, fast_err), composer = _both(loader, master, overrides)
    assert slow_err == fast_err
    if slow is None:
        return
    a, b = _flat(slow), _flat(fast)
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k] == b[k], k
    assert list(fast.hydra.overrides.task) == list(overrides)
    assert fast.hydra.job.override_dirname == slow.hydra.job.override_dirname
    assert OmegaConf.to_container(fast, resolve=True) == OmegaConf.to_container(slow, resolve=True)
    assert OmegaConf.is_struct(fast) == OmegaConf.is_struct(slow)


@pytest.mark.parametrize("overrides", [["stripee=1"], ["+stripe=3"], ["format=hdf6"], ["workload.batchsize=2"],
                                       ["format=npz", "+format.level=3", "~nodes", "~nodes"]])
def test_bad_override_fails_as_hydra_fails(loader_and_master, overrides):
    loader, master = loader_and_master
    (slow, slow_err), (fast, fast_err), _ = _both(loader, master, overrides)
    assert slow_err == fast_err


def test_value_overrides_use_the_cache(loader_and_master):
    from hydra_plugins.ddlio_launcher.compose import FastComposer

    loader, master = loader_and_master
    composer = FastComposer(loader, master)
    for i in range(5):
        composer.compose(["format=npz", f"repeat={i}"])
    composer.compose(["hydra.job.name=x"])  # a hydra key: Hydra's own composition
    assert (composer.full, composer.fast) == (2, 4)


def _task_dict_of(cfg) -> dict:
    from hydra_plugins.ddlio_launcher.launcher import task_dict

    return task_dict(cfg)


def test_task_equals_hydra_across_one_sweep(loader_and_master):
    """FastComposer.task (value overrides applied to one working copy and undone) gives each point's task config
    equal to Hydra's own composition's, key by key and in Hydra's key order, with every point of the sweep sharing
    one composer; a point it cannot take (Hydra refuses it, a deletion, a hydra key) is None; afterwards each
    working copy is its composition again, unresolved, key order and all."""
    from hydra_plugins.ddlio_launcher.compose import FastComposer

    loader, master = loader_and_master
    composer = FastComposer(loader, master)
    points = [*_points(), ["stripee=1"], ["+stripe=3"], ["workload.batchsize=2"], ["workload.batch_size=x"],
                          ["format=npz", "repeat=3", "+format.level=3"], ["+cluster.env.A=1", "cluster.env.A=2"],
                          ["workload.sample_shape=[8,8,3]", "repeat=-2"], ["++newkey.a.b=1", "++newkey.a.c=2"],
              ["format.compression=gzip", "format.compression=lzf"]]
    for overrides in points * 2:  # the second pass reads the cached working copies
        try:
            want = _task_dict_of(loader.load_sweep_config(master, list(overrides)))
        except Exception:
            want = None
        got = composer.task(overrides)
        if want is None or any(o.startswith("~") for o in overrides):
            assert got is None, overrides
            continue
        assert got is not None, overrides
        assert list(got) == list(want), overrides
        assert got == want, overrides
    assert composer.work  # the cache was used
    assert ("<master>",) in composer.work  # points with the master's group choices start from it
    assert () not in composer.base  # ... and Hydra never composed them again
    for key, work in composer.work.items():
        base = OmegaConf.to_container(composer.master if key[-1:] == ("<master>",) else composer.base[key],
                                      resolve=False)
        del base["hydra"]
        assert _flat(work) == _flat(OmegaConf.create(base)) and list(_flat(work)) == list(_flat(OmegaConf.create(base)))


def test_task_gives_a_copy(loader_and_master):
    """Changing what task returned changes no later point's answer."""
    from hydra_plugins.ddlio_launcher.compose import FastComposer

    loader, master = loader_and_master
    composer = FastComposer(loader, master)
    first = composer.task(["repeat=1"])
    first["workload"]["samples"] = -1
    first["format"]["name"] = "x"
    assert composer.task(["repeat=2"]) == {**first, "repeat": 2, "workload": composer.task(["repeat=3"])["workload"],
                                            "format": composer.task(["repeat=3"])["format"]}
    assert composer.task(["repeat=2"])["workload"]["samples"] != -1


@pytest.mark.parametrize(("command", "points", "from_master"), [
    # a run of one point: its overrides are the command line's
    (["format=npz", "ppn=2", "workload.sample_shape=[8,8]", "db='sqlite:///x y.db'"],
     [["format=npz", "ppn=2", "workload.sample_shape=[8,8]", "db='sqlite:///x y.db'"]], [True]),
    # a grid over values: every point repeats the command line's own overrides
    (["format=hdf5", "ppn=2", "stripe=1,4"],
     [["format=hdf5", "ppn=2", "stripe=1"], ["format=hdf5", "ppn=2", "stripe=4"], ["format=hdf5", "stripe=4"],
      ["format=npz", "ppn=2", "stripe=4"]], [True, True, False, False]),
    # a grid over a group: no point has the master's group choices
    (["format=hdf5,npz", "ppn=2"], [["format=hdf5", "ppn=2"], ["format=npz", "ppn=2"]], [False, False]),
    # an override that cannot be applied twice: the master serves no point
    (["+cluster.env.A=1", "ppn=2"], [["+cluster.env.A=1", "ppn=2"]], [False]),
])
def test_the_masters_composition_serves_the_points_with_its_group_choices(loader_and_master, command, points,
                                                                         from_master):
    """A point that has the command line's group choices and repeats all its value overrides is read off a copy of
    the sweep's own composition (no composition of its own), equal to Hydra's, key by key and in Hydra's order."""
    from hydra.types import RunMode

    from hydra_plugins.ddlio_launcher.compose import FastComposer

    loader, _ = loader_and_master
    master = loader.load_configuration(config_name="config", overrides=list(command), run_mode=RunMode.MULTIRUN)
    composer = FastComposer(loader, master)
    for overrides in points * 2:  # the second pass reads the working copies
        want = _task_dict_of(loader.load_sweep_config(master, list(overrides)))
        got = composer.task(overrides)
        assert got is not None and list(got) == list(want) and got == want, overrides
    assert any(k[-1:] == ("<master>",) for k in composer.work) == any(from_master)
    # Hydra composed only the group choices of the points the master did not serve
    own = {tuple(o for o in pt if o.startswith("format=")) for pt, m in zip(points, from_master, strict=True) if not m}
    assert composer.full == len(own)


@pytest.mark.parametrize("command", [
    ["workload=tiny", "dry_run=true", "data_root=/tmp/d", "db=/tmp/r.db"],
    ["format=hdf5", "stripe=1,4", "dry_run=false", "db='sqlite:///x y.db'", "workload.sample_shape=[8, 8]"],
    ["ppn=2", "order=random", "workload.compute_time=0.010", "pool=''"],
])
def test_the_master_serves_the_points_as_the_sweeper_writes_them(loader_and_master, command):
    """Hydra's basic sweeper re-renders each value of a point's overrides (``dry_run=true`` becomes
    ``dry_run=True``, ``[8, 8]`` becomes ``[8,8]``): the points it makes of a command line are still read off the
    master's composition, and equal Hydra's."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    from hydra_plugins.ddlio_launcher.compose import FastComposer

    loader, _ = loader_and_master
    master = loader.load_configuration(config_name="config", overrides=list(command), run_mode=RunMode.MULTIRUN)
    composer = FastComposer(loader, master)
    [points] = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(command), None)
    assert points and any(pt != [o for o in command if "," not in o] for pt in points)  # re-rendered: not as typed
    for overrides in points:
        want = _task_dict_of(loader.load_sweep_config(master, list(overrides)))
        got = composer.task(overrides)
        assert got is not None and list(got) == list(want) and got == want, overrides
    assert composer.full == 0, composer.base.keys()  # Hydra composed nothing: the master served every point


@pytest.mark.parametrize("line", ["repeat=5", "repeat=0", "+a.b=-3", "++x=12", "repeat=007", "repeat=1_000",
                                  "seed=-0", "nodes=+4", "workload.batch_size=64", "a=1.0", "a=1e3"])
def test_integer_overrides_parse_as_hydra_parses_them(line):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra_plugins.ddlio_launcher.compose import FastComposer

    composer = FastComposer.__new__(FastComposer)
    composer.parser, composer._parsed = OverridesParser.create(), {}
    [want] = OverridesParser.create().parse_overrides([line])
    assert composer.parse([line]) == [want]
    assert type(composer.parse([line])[0].value()) is type(want.value())


def test_a_planned_return_composes_its_config_only_when_read(loader_and_master):
    """The launcher's JobReturn of a point planned from its task config composes the point's Hydra config the
    first time ``hydra_cfg`` or ``cfg`` is read (once), and ``cfg`` is that config without Hydra's node."""
    from hydra.core.utils import JobStatus

    from hydra_plugins.ddlio_launcher.compose import FastComposer
    from hydra_plugins.ddlio_launcher.launcher import PlannedReturn

    loader, master = loader_and_master
    composer = FastComposer(loader, master)
    calls = []

    def compose():
        calls.append(1)
        return composer.compose(["format=npz", "repeat=4"])

    ret = PlannedReturn(compose, overrides=["format=npz", "repeat=4"], status=JobStatus.COMPLETED, _return_value=1.5)
    assert calls == [] and ret.return_value == 1.5 and ret.overrides == ["format=npz", "repeat=4"]
    assert ret.hydra_cfg.format.name == "npz" and ret.cfg.repeat == 4 and "hydra" not in ret.cfg
    assert calls == [1]
    want = loader.load_sweep_config(master, ["format=npz", "repeat=4"])
    assert OmegaConf.to_container(ret.cfg, resolve=True) == _task_dict_of(want)
