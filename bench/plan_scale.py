"""Planning cost per point: an end-to-end dry run (``python sweep.py -m repeat=range(N) dry_run=true``) at each
size, its ms per point and peak RSS, beside Hydra's own composition (``load_sweep_config``) of the first 100
points measured in the same run (the reference; ratio = dry-run ms per point / Hydra's ms per point).

    python bench/plan_scale.py                         # 10 and 1,000 points
    python bench/plan_scale.py --sizes 10,1000,10000,100000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from childpeak import run_measured  # noqa: E402


def hydra_reference(n: int = 100) -> float:
    """ms per point of Hydra's own ``load_sweep_config`` over ``repeat=0..n-1``."""
    sys.path.insert(0, str(ROOT))
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path
    from hydra.core.utils import setup_globals
    from hydra.types import RunMode

    import sweep  # noqa: F401  registers the schema and the ddlio_scratch resolver

    setup_globals()
    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(ROOT / "conf")))
    master = loader.load_configuration(config_name="config", overrides=[], run_mode=RunMode.MULTIRUN)
    t = time.perf_counter()
    for i in range(n):
        loader.load_sweep_config(master, [f"repeat={i}"])
    return (time.perf_counter() - t) * 1000 / n


def dry_run(n: int) -> tuple[float, float]:
    """(ms per point, peak RSS in MiB) of a dry run of ``n`` points, in a child process started from a small
    launcher (:mod:`childpeak`: this process's Hydra never counts as the dry run's memory)."""
    with tempfile.TemporaryDirectory() as d:
        secs, mib, rc = run_measured([sys.executable, str(ROOT / "sweep.py"), "-m", f"repeat=range({n})",
                                      "dry_run=true", f"data_root={d}", f"db={d}/r.db"],
                                     env=dict(os.environ, PYTHONPATH=str(ROOT)))
        if rc != 0:
            raise SystemExit(f"the {n}-point dry run exited {rc}")
    return secs * 1000 / n, mib


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,1000", help="comma-separated point counts (e.g. 10,1000,10000,100000)")
    args = ap.parse_args()
    ref = hydra_reference()
    print(f"load average {os.getloadavg()[0]:.2f}; Hydra's load_sweep_config, first 100 points: {ref:.1f} ms/point")
    print(f"{'points':>8} {'ms/point':>9} {'ratio':>6} {'peak RSS MiB':>13}")
    for n in (int(x) for x in args.sizes.split(",")):
        ms, rss = dry_run(n)
        print(f"{n:>8} {ms:>9.1f} {ms / ref:>6.2f} {rss:>13.0f}", flush=True)


if __name__ == "__main__":
    main()
