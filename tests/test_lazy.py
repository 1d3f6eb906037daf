"""numpy only where arrays are: the driver (``sweep.py``) and the job process start without it (ddlio/lazy.py,
experiments/executors/entry.py), the MPI ranks load it. Seen from inside each process of a real sweep, by a
``sitecustomize`` that records when numpy was first imported (if it was) and when the process ended."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

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
        json.dump({{"argv": sys.argv, "numpy_at": _at[0] if _at else None, "exit": time.time()}}, f)

atexit.register(_record)
"""


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
            "import experiments.config, experiments.formats, experiments.dataset, experiments.run.batch\n"
            "import experiments.executors.entry, hydra_plugins.ddlio_launcher.launcher, ddlio.store, ddlio.metrics\n"
            "import ddlio.evidence, experiments.kernel\n"
            "print('numpy' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parent.parent)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


def test_the_driver_and_the_job_process_run_without_numpy(sweep, tmp_path):
    out = tmp_path / "probe"
    out.mkdir()
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(PROBE.format(out=str(out)))
    args = ["format=npz", "ppn=2", "workload.samples=16", "workload.sample_size=4096", "workload.epochs=1",
            f"data_root={tmp_path / 'data'}"]
    first = sweep(*args, f"db={tmp_path / 'a.db'}")  # generates the dataset
    assert first.returncode == 0, first.stderr
    for f in out.iterdir():
        f.unlink()
    root = str(Path(__file__).resolve().parent.parent)
    again = sweep(*args, f"db={tmp_path / 'b.db'}", PYTHONPATH=f"{site}:{root}")  # reuses it
    assert again.returncode == 0, again.stderr
    seen = [json.loads(f.read_text()) for f in out.iterdir()]
    role: dict[str, list[dict]] = {}
    for s in seen:
        name = ("driver" if s["argv"][0].endswith("sweep.py") else
                "job" if s["argv"][0] == "submitit.core._submit" else  # as experiments.executors.entry sets it
                "rank" if s["argv"][0].endswith("kernel/__main__.py") else "other")
        role.setdefault(name, []).append(s)
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
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parent.parent)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False", "False", "False", "True"]  # loaded anyway: then it is stored
