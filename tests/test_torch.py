"""reader=torch: PyTorch's DataLoader (worker processes, DistributedSampler) on real files with 2 real MPI ranks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_kernel import read_traces, run_kernel

from conftest import ROOT
from ddlio.errors import ConfigError
from helpers import point

pytest.importorskip("torch", reason="PyTorch is not installed (pip install -e '.[torch]'); .ci/run installs it")


@pytest.mark.parametrize("workers", [0, 2, 4])
def test_every_sample_once_per_epoch_across_ranks_and_workers(tmp_path, workers):
    """Two ranks, a DistributedSampler reshuffled every epoch, 0/2/4 worker processes per rank: the access logs
    (each read made in a worker, handed back with its batch) show every record read exactly once per epoch, by
    both ranks, in a new order each epoch; bytes are exactly the plan's at the application layer, and the
    file-system layer (the workers' own /proc counters, summed) saw those bytes and the index reads of each open."""
    spec, plan, res = run_kernel(tmp_path, "reader=torch", "format=bin", "ppn=2", "workload.shuffle=sample",
                                 "workload.epochs=2", "workload.trace=true", f"workload.read_threads={workers}")
    tr = read_traces(tmp_path, 2)
    reads, opens = tr[tr.op == "read"], tr[tr.op == "open"]
    record = plan.record_bytes()
    orders, per_open = [], set()
    for _, e in reads.groupby("epoch"):
        keys = list(zip(e.file, e.offset, strict=True))
        assert len(keys) == len(set(keys)) == spec.workload.samples
        assert set(e["rank"]) == {0, 1}
        assert e["size"].sum() == int(record.sum())
        orders.append([k for _, k in sorted(zip(e.start_s, keys, strict=True))])
    assert orders[0] != orders[1]
    for e in res["epochs"]:
        assert e["bytes_read"] == e["bytes_planned"] == int(record.sum())
        assert e["samples"] == spec.workload.samples
        for r in e["ranks"]:
            n_open = int(((opens["rank"] == r["rank"]) & (opens.epoch == e["epoch"])).sum())
            assert r["meta_ops"] == 2 * n_open
            # each worker opens the files it reads itself (workers=0: the loop's files stay open after epoch 0)
            if workers:
                assert plan.num_files <= n_open <= workers * plan.num_files
            else:
                assert n_open == (plan.num_files if e["epoch"] == 0 else 0)
            # the workers' own counters, summed: the records' bytes and, per open, the same index reads
            extra = r["posix_bytes_read"] - r["bytes_read"]
            assert extra >= 0 and (extra == 0 if n_open == 0 else extra % n_open == 0)
            if n_open:
                per_open.add(extra // n_open)
            assert r["posix_reads"] >= r["samples"]
    assert len(per_open) == 1 and 0 < per_open.pop() < 4096
    for info in res["rank_info"]:  # opens per worker: each worker opens the files it reads, every epoch anew
        loader = info["torch"]
        assert loader["sampler"] == "DistributedSampler" and loader["workers"] == workers
        for e, opens in enumerate(loader["opens_per_worker"]):
            assert len(opens) == max(1, workers)
            assert all(1 <= n <= plan.num_files for n in opens) or (workers == 0 and e == 1 and opens == [0])


def test_spawned_workers_never_initialise_mpi(tmp_path):
    """Workers started by spawn under mpiexec read the epoch (a worker that had mpi4py's MPI loaded fails the
    kernel); the worker side's modules import nothing of MPI, and a worker cannot import mpi4py at all."""
    spec, plan, res = run_kernel(tmp_path, "reader=torch", "format=hdf5", "workload.read_threads=2",
                                 "workload.start_method=spawn", "workload.epochs=1")
    assert res["epochs"][0]["bytes_read"] == res["epochs"][0]["bytes_planned"] == int(plan.record_bytes().sum())
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); import experiments.kernel.torchset as t\n"
            "assert not [m for m in sys.modules if m.startswith('mpi4py')], 'mpi4py imported'\n"
            "import torch.utils.data as d\n"
            "class Probe(d.Dataset):\n"
            "    def __len__(self): return 1\n"
            "    def __getitem__(self, i):\n"
            "        try:\n            import mpi4py  # noqa\n            return 'imported'\n"
            "        except ImportError:\n            return 'blocked'\n"
            "print(next(iter(d.DataLoader(Probe(), num_workers=1, worker_init_fn=t.worker_init, "
            "collate_fn=lambda b: b[0], multiprocessing_context='fork'))))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "blocked", p.stderr


def test_persistent_workers_keep_their_files_and_whole_loads_are_planned(tmp_path):
    """persistent_workers: the second epoch opens nothing; load=whole NPZ: the bytes are each worker's whole-file
    loads, exactly; pin_memory runs (a no-op without an accelerator)."""
    spec, plan, res = run_kernel(tmp_path, "reader=torch", "format=npz", "format.load=whole", "workload.epochs=2",
                                 "workload.read_threads=2", "workload.persistent_workers=true",
                                 "workload.pin_memory=true")
    e0, e1 = res["epochs"]
    assert e0["meta_ops"] > 0 and e1["meta_ops"] == 0
    first, second = res["rank_info"][0]["torch"]["opens_per_worker"]
    assert len(first) == len(second) == 2 and min(first) >= 1 and second == [0, 0]
    loads = plan.load_bytes()
    for e in (e0, e1):
        assert e["bytes_read"] == e["bytes_planned"] and e["bytes_planned"] % int(loads[0]) == 0
        assert e["samples"] == spec.workload.samples


def test_images_are_decoded_by_pillow_in_the_workers(tmp_path):
    """JPEG files per rank (fpp), decoded into (H, W, 3) uint8 tensors; their encoded bytes read exactly."""
    from experiments.kernel.torchset import FileSamples, collate

    spec, plan, res = run_kernel(tmp_path, "reader=torch", "format=jpeg", "access=fpp",
                                 "workload.read_threads=2", "workload.epochs=1")
    assert res["epochs"][0]["bytes_read"] == res["epochs"][0]["bytes_planned"] == int(plan.record_bytes().sum())
    ds = FileSamples("jpeg", dict(plan.format_options), [plan.file_path(f) for f in range(plan.num_files)],
                     plan.file_starts, (), int(plan.record_bytes().max()))
    batch = collate(ds.__getitems__([0, 1, 40]))
    assert batch["x"].ndim == 4 and batch["x"].shape[-1] == 3 and str(batch["x"].dtype) == "torch.uint8"
    assert batch["bytes"] == int(plan.record_bytes()[[0, 1, 40]].sum())
    ds.close()


def test_the_loader_knobs_are_checked_and_stay_out_of_the_keys(tmp_path):
    """Knobs at their defaults leave the point key as it was; away from them they change it; a bad start method
    and a torch knob without reader=torch are refused, naming the choices."""
    base = point(tmp_path)
    assert point(tmp_path, "workload.start_method=fork", "workload.pin_memory=false").point_key == base.point_key
    assert "start_method" not in base.to_dict() and "pin_memory" not in base.measurement_params()
    t = point(tmp_path, "reader=torch")
    assert t.point_key != point(tmp_path, "reader=torch", "workload.start_method=spawn").point_key
    with pytest.raises(ConfigError, match="workload.start_method.*fork, forkserver, spawn"):
        point(tmp_path, "reader=torch", "workload.start_method=thread")
    with pytest.raises(ConfigError, match="workload.persistent_workers applies only to reader=torch"):
        point(tmp_path, "workload.persistent_workers=true")


def test_reader_torch_without_pytorch_says_how_to_install_it(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"
            "sys.path[:0] = [{!r}, {!r}]\n"
            "from helpers import point\n"
            "from ddlio.errors import ConfigError\n"
            "try:\n    point(__import__('pathlib').Path({!r}), 'reader=torch')\n"
            "except ConfigError as e:\n    print('ERROR', e)\n").format(str(ROOT), str(ROOT / "tests"), str(tmp_path))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ERROR reader=torch needs PyTorch: pip install -e '.[torch]'" in p.stdout, p.stderr


TINY_TORCH = '''
import torch
from torch import nn

def tiny(shape):
    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(int(torch.tensor(shape).prod()), 3)

        def forward(self, x):
            return self.fc(x.flatten(1).float() / 255)

    m = Tiny()
    return m, torch.optim.SGD(m.parameters(), lr=0.1), nn.CrossEntropyLoss()

def not_a_triple(shape):
    return nn.Linear(3, 3)
'''


def test_calibrate_learns_a_pytorch_model(tmp_path, capsys):
    """An nn.Module with its optimizer and loss: the step (forward, backward, step) on an in-memory batch is
    timed and the overrides printed, the framework found from the module's imports; a function that returns
    anything else is one message and exit 2."""
    from experiments import calibrate

    path = tmp_path / "tiny_torch.py"
    path.write_text(TINY_TORCH)
    assert calibrate.main(["--model", f"{path}:tiny", "--batch", "4", "--shape", "8,8,3", "--steps", "5",
                           "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["framework"] == "torch" and result["median_s"] > 0 and result["batch"] == 4
    assert "workload.compute_time=" in calibrate.overrides(result)
    assert calibrate.main(["--model", f"{path}:not_a_triple", "--batch", "4", "--shape", "3", "--steps", "3"]) == 2
    assert "not (nn.Module, optimizer, loss_fn)" in capsys.readouterr().err


def test_help_and_validation_do_not_import_pytorch(tmp_path):
    """``sweep.py --help`` and validating a reader=torch point leave PyTorch unimported (it loads in the kernel)."""
    code = ("import sys, runpy; sys.argv=['sweep.py','--help']\n"
            f"sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]\n"
            f"try:\n    runpy.run_path({str(ROOT / 'sweep.py')!r}, run_name='__main__')\n"
            "except SystemExit: pass\n"
            "print('AFTER HELP', 'torch' in sys.modules)\n"
            "from helpers import point\n"
            f"p = point(__import__('pathlib').Path({str(tmp_path)!r}), 'reader=torch', 'workload.read_threads=2')\n"
            "print('AFTER VALIDATE', p.reader, 'torch' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "reader" in p.stdout and "AFTER HELP False" in p.stdout, p.stderr
    assert "AFTER VALIDATE torch False" in p.stdout, p.stderr
