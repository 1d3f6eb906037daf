"""numpy only where arrays are: the driver (``sweep.py``) and the job process start without it (ddlio/lazy.py,
experiments/executors/entry.py), the MPI ranks load it. Seen from inside each process of a real sweep, by a
``sitecustomize`` that records when numpy was first imported (if it was) and when the process ended."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from ddlio.lazy import LazyModule, lazy_import

PROBE = """
import atexit, json, os, sys, time

_at = []

class _Watch:  # a meta-path finder that finds nothing: it notes the first time numpy is looked for
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not _at:
            _at.append(time.time())
        return None

sys.meta_path.insert(0, _Watch())

def _record():
    with open(os.path.join({out!r}, f"{{os.getpid()}}.json"), "w") as f:
        json.dump({{"argv": sys.argv, "numpy_at": _at[0] if _at else None, "exit": time.time(),
                   "modules": sorted(sys.modules)}}, f)

atexit.register(_record)
"""


def _fresh(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter in the checkout (what a process imports starts from nothing); it must
    succeed."""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parent.parent)
    assert p.returncode == 0, p.stderr
    return p


def test_a_lazy_module_imports_on_first_use_and_rebinds_its_global():
    ns: dict = {}
    ns["j"] = lazy_import("json", ns, "j")
    assert isinstance(ns["j"], types.ModuleType)  # already imported: the module itself
    name = "ddlio_test_lazy_target"
    target = types.ModuleType(name)
    target.VALUE = 42
    stand_in = lazy_import(name, ns, "t")
    assert isinstance(stand_in, LazyModule) and "imported on first use" in repr(stand_in)
    ns["t"] = stand_in
    sys.modules[name] = target  # importable from here on: the first use finds it
    try:
        assert ns["t"].VALUE == 42
        assert ns["t"] is target  # the global now names the module: no stand-in left on later lookups
    finally:
        del sys.modules[name]


def test_a_module_level_use_would_import_numpy_at_once(tmp_path):
    """The rule ddlio/lazy.py states, held by the registry: importing every format, the dataset plan, the records
    and the driver's batch module loads no numpy."""
    code = ("import sys\n"
            "import experiments.config.validate, experiments.formats, experiments.run.batch\n"
            "import experiments.dataset.ensure, experiments.dataset.generate, experiments.dataset.verify\n"
            "import experiments.executors.entry, hydra_plugins.ddlio_launcher.launcher, ddlio.store, ddlio.metrics\n"
            "import ddlio.evidence, experiments.kernel\n"
            "formats = list(experiments.formats.FORMATS.values())  # every format's module\n"
            "print('numpy' in sys.modules)\n")
    p = _fresh(code)
    assert p.stdout.strip() == "False"


def test_the_driver_and_the_job_process_run_without_numpy(sweep, tmp_path):
    out = tmp_path / "probe"
    out.mkdir()
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(PROBE.format(out=str(out)))
    args = ["format=npz", "ppn=2", "workload.samples=16", "workload.sample_size=4096", "workload.epochs=1",
            f"data_root={tmp_path / 'data'}"]
    root = str(Path(__file__).resolve().parent.parent)
    first = sweep(*args, f"db={tmp_path / 'a.db'}", PYTHONPATH=f"{site}:{root}")  # generates the dataset
    assert first.returncode == 0, first.stderr
    _each_loads_only_its_side(_roles(out))
    for f in out.iterdir():
        f.unlink()
    again = sweep(*args, f"db={tmp_path / 'b.db'}", PYTHONPATH=f"{site}:{root}")  # reuses it
    assert again.returncode == 0, again.stderr
    role = _roles(out)
    seen = [s for group in role.values() for s in group]
    ranks, (driver,), (job,) = role["rank"], role["driver"], role["job"]
    assert len(ranks) == 2 and all(r["numpy_at"] for r in ranks), seen  # the probe sees numpy where it is
    ranks_done = max(r["exit"] for r in ranks)
    # the job process never loads it (an NPZ point stores no HDF5 library version: ddlio/env.py); the driver not
    # while the ranks read (its end-of-sweep summary may: evidence.interval)
    assert job["numpy_at"] is None, seen
    assert driver["numpy_at"] is None or driver["numpy_at"] > ranks_done, seen


def test_the_hdf5_version_is_asked_of_h5py_only_for_hdf5():
    code = ("import sys; from ddlio.env import package_versions\n"
            "v = package_versions(hdf5=False); print('hdf5' in v, 'h5py' in sys.modules, 'numpy' in sys.modules)\n"
            "import h5py; v = package_versions(hdf5=False); print(v['hdf5'] == h5py.version.hdf5_version)\n")
    p = _fresh(code)
    assert p.stdout.split() == ["False", "False", "False", "True"]  # loaded anyway: then it is stored


def _roles(out: Path) -> dict[str, list[dict]]:
    """What the probe saw of each process of a sweep, by its role."""
    role: dict[str, list[dict]] = {}
    for f in out.iterdir():
        s = json.loads(f.read_text())
        name = ("driver" if s["argv"][0].endswith("sweep.py") else
                "job" if s["argv"][0] == "submitit.core._submit" else  # as experiments.executors.entry sets it
                "rank" if s["argv"][0].endswith("kernel/__main__.py") else "other")
        role.setdefault(name, []).append(s)
    return role


#: what each process of a local NPZ point on a local file system never loads (the packages' names are imported on
#: first use; a cold epoch's rank asks the storage layer for its backend, POSIX here, not Lustre's or CephFS's)
NOT_IN = {
    "rank": ("sqlalchemy", "hydra", "omegaconf", "submitit", "lustre.lfs", "lustre.ceph", "experiments.config.validate",
             "experiments.executors", "experiments.run", "experiments.dataset.ensure", "experiments.formats.hdf5",
             "experiments.formats.tfrecord", "experiments.formats.jpeg", "h5py", "ddlio.store"),
    "job": ("sqlalchemy", "hydra", "omegaconf", "numpy", "experiments.config.validate", "experiments.run.driver",
            "experiments.run.batch", "experiments.executors.slurm", "experiments.kernel.kernel",
            "experiments.formats.hdf5", "ddlio.store", "submitit.local._local"),
    "driver": ("numpy", "experiments.executors.slurm.wait", "experiments.executors.slurm.site",
               "experiments.kernel.kernel", "submitit.local._local"),
}


def _each_loads_only_its_side(role: dict[str, list[dict]]) -> None:
    assert len(role["rank"]) == 2 and len(role["job"]) == 1 and len(role["driver"]) == 1, role.keys()
    for name, forbidden in NOT_IN.items():
        for s in role[name]:
            loaded = [m for m in s["modules"] if m in forbidden or m.split(".")[0] in forbidden]
            assert not loaded, (name, loaded)
    assert "experiments.formats.npz" in role["rank"][0]["modules"]  # what it reads is there


def test_a_registry_imports_an_implementation_when_its_name_is_first_looked_up():
    """fsspec's pattern: the names cost nothing; ``in``, iterating and ``len`` import no implementation."""
    code = ("import json, sys\n"
            "from experiments.formats import FORMATS, FORMAT_CONFS, get_format\n"
            "from experiments.executors import EXECUTORS\n"
            "mods = lambda: sorted(m for m in sys.modules if m.startswith(('experiments.formats.', "
            "'experiments.executors.')))\n"
            "before = mods()\n"
            "names = [list(FORMATS), len(FORMATS), 'npz' in FORMATS, 'nosuch' in FORMATS, sorted(EXECUTORS)]\n"
            "untouched = mods() == before\n"
            "same = FORMATS['npz'].name == 'npz' and FORMAT_CONFS['npz'] is FORMATS['npz'].conf\n"
            "get_format('npz')\n"
            "try:\n"
            "    FORMATS['nosuch']\n"
            "    refused = False\n"
            "except KeyError:\n"
            "    refused = True\n"
            "print(json.dumps([names, untouched, same, [m for m in mods() if m not in before], refused]))\n")
    p = _fresh(code)
    names, untouched, same, after, refused = json.loads(p.stdout)
    formats = ["hdf5", "tfrecord", "npz", "npy", "bin", "jpeg", "png", "parquet"]
    assert names == [formats, 8, True, False, ["local", "slurm"]]
    assert untouched and same and refused
    assert "experiments.formats.npz" in after and "experiments.formats.hdf5" not in after  # npz and what it uses
    assert not [m for m in after if m.startswith("experiments.executors.")]


def test_a_packages_names_are_imported_from_their_module_on_first_use():
    import experiments.dataset as dataset
    from experiments.dataset.plan import DatasetPlan

    assert dataset.DatasetPlan is DatasetPlan and "DatasetPlan" in vars(dataset)  # kept after the first use
    assert "ensure_dataset" in dir(dataset) and set(dataset.__all__) <= set(dir(dataset))
    with pytest.raises(AttributeError, match="has no attribute 'nosuch'"):
        dataset.nosuch  # noqa: B018
    import experiments.config.validate as v

    assert callable(v.validate)  # the function, reached through its package (not experiments.config's name)


def test_no_module_asks_ldconfig_for_the_c_library():
    """``ctypes.util.find_library`` runs ``/sbin/ldconfig -p`` in a subprocess (a fork of the caller, 10-30 ms):
    the modules that bind libc functions load it by its soname (ddlio/libc.py)."""
    code = ("import ctypes.util\n"
            "def refuse(name):\n"
            "    raise AssertionError(f'find_library({name!r})')\n"
            "ctypes.util.find_library = refuse\n"
            "import lustre.fs, experiments.kernel.cache, experiments.dataset.generate\n"
            "import lustre.io\n"
            "print(lustre.fs.fs_info('/').type != '', lustre.io._SYNC_FILE_RANGE is not None)\n")
    p = _fresh(code)
    assert p.stdout.split() == ["True", "True"]
