"""The checkpoint kind's shard arithmetic (experiments/kinds/checkpoint/shards.py) held to DLIO's own numbers.

The reference numbers below were produced by DLIO's code, not by ddlio's: DLIO_HARNESS (this file) loads
argonne-lcf/dlio_benchmark's ``dlio_benchmark/checkpointing/base_checkpointing.py`` unmodified, replaces what it
imports from the rest of DLIO (config singleton, MPI, storage, logger) by stand-ins, builds DLIO's
``BaseCheckpointing`` once per rank with tensors that record only their length and datatype, calls its
``save_checkpoint`` and records what each ``save_state`` is handed: the file name and its tensors' bytes
(elements x DLIO's own ``get_datatype_size``). See test_live_dlio_matches for the command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, fields
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from experiments.kinds.checkpoint.shards import (
    PRESETS,
    ModelShape,
    Parallelism,
    parallelism_problem,
    rank_bytes,
    rank_pieces,
    scaled,
)

GiB = 1 << 30

#: DLIO's code that the reference numbers come from, and the venv whose python runs it when it is there
DLIO_VENV = Path.home() / ".cache" / "ddlio-bench" / "dlio-venv"

# A driver for DLIO's BaseCheckpointing; argv: base_checkpointing.py, then a JSON list of cases
# {"model": {ModelShape fields}, "tensor", "pipeline", "zero_stage", "ranks"}; prints a JSON list (one per case) of
# per-rank lists of [name, bytes] in the order save_checkpoint calls save_state.
DLIO_HARNESS = r'''
import enum, importlib.util, json, sys, types

def stub(name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    return mod

try:
    import psutil  # noqa: F401  (base_checkpointing imports it for its KSM option only)
except ImportError:
    stub("psutil")

class CheckpointLocationType(enum.Enum):
    RANK_ZERO = "rank_zero"
    ALL_RANKS = "all_ranks"

class CheckpointModeType(enum.Enum):
    SUBSET = "subset"
    DEFAULT = "default"

class Quiet:
    def __getattr__(self, name):
        return lambda *a, **k: None

class Storage:
    def create_namespace(self, exist_ok=False): pass
    def create_node(self, name, exist_ok=False): pass

class StorageFactory:
    def get_storage(self, *a): return Storage()

class Comm:  # a communicator of one rank among `size`; allreduce only feeds DLIO's log lines
    def __init__(self, rank, size): self.rank, self.size = rank, size
    def allreduce(self, x): return x

class MPI:
    now = None
    @staticmethod
    def get_instance(): return MPI.now
    def __init__(self, rank, size): self._rank, self._size = rank, size
    def comm(self): return Comm(self._rank, self._size)
    def rank(self): return self._rank
    def size(self): return self._size
    def npernode(self): return self._size

class Config:
    now = None
    @staticmethod
    def get_instance(): return Config.now

class Args:  # only the attributes set here exist: a missing one is an AttributeError, not a silent default
    pass

for name in ("dlio_benchmark", "dlio_benchmark.common", "dlio_benchmark.storage", "dlio_benchmark.utils",
             "dlio_benchmark.checkpointing"):
    stub(name, __path__=[])
stub("dlio_benchmark.common.enumerations", CheckpointLocationType=CheckpointLocationType,
     CheckpointModeType=CheckpointModeType)
stub("dlio_benchmark.storage.storage_factory", StorageFactory=StorageFactory)
stub("dlio_benchmark.utils.config", ConfigArguments=Config)
stub("dlio_benchmark.utils.utility", DLIOMPI=MPI, utcnow=lambda: "")

spec = importlib.util.spec_from_file_location("dlio_benchmark.checkpointing.base_checkpointing", sys.argv[1])
base = importlib.util.module_from_spec(spec)
spec.loader.exec_module(base)

class Tensor:
    def __init__(self, length, datatype): self.length, self.datatype = length, datatype

def nbytes(state):
    if isinstance(state, Tensor):
        return state.length * base.get_datatype_size(state.datatype)
    return sum(nbytes(v) for v in state.values())

class Recording(base.BaseCheckpointing):
    def __init__(self, saved):
        self.saved = saved
        super().__init__("pt")
    def set_madvise_mergeable(self, tensor): return False
    def get_tensor_core(self, length, datatype="int8", randomize=True): return Tensor(length, datatype)
    def save_state(self, suffix, state, fsync=False):
        self.saved.append([suffix.split("/", 1)[1], nbytes(state)])
    def load_state(self, suffix, state): pass
    def save_checkpoint(self, epoch, step_number): super().save_checkpoint(epoch, step_number)
    def load_checkpoint(self, epoch, step_number): super().load_checkpoint(epoch, step_number)
    def finalize(self): pass

out = []
for case in json.loads(sys.argv[2]):
    per_rank = []
    for rank in range(case["ranks"]):
        args = Args()
        args.__dict__.update(case["model"])
        args.__dict__.update(
            my_rank=rank, comm_size=case["ranks"], tensor_parallelism=case["tensor"],
            pipeline_parallelism=case["pipeline"], zero_stage=case["zero_stage"], data_parallelism=-1,
            model_type="transformer", model_size=0, optimization_groups=[], layer_parameters=[],
            checkpoint_mode=CheckpointModeType.DEFAULT, checkpoint_type=CheckpointLocationType.ALL_RANKS,
            storage_type=None, checkpoint_folder="ckpt", framework=None, logger=Quiet(),
            checkpoint_randomize_tensor=False, checkpoint_fsync=False, checkpoint_recovery_rank_shift=False,
            ksm_init=False, ksm_madv_mergeable_id=12, ksm_low_ram_exit=50, ksm_high_ram_trigger=30,
            ksm_await_time=200)
        Config.now, MPI.now = args, MPI(rank, case["ranks"])
        saved = []
        Recording(saved).save_checkpoint(1, 1)
        per_rank.append(saved)
    out.append(per_rank)
print(json.dumps(out))
'''


def runs(values: list[int]) -> list[tuple[int, int]]:
    """``values`` as (value, how many times in a row), rank order kept: 1024 ranks in a few lines."""
    out: list[tuple[int, int]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1] = (v, out[-1][1] + 1)
        else:
            out.append((v, 1))
    return out


def preset(name: str, **override: int) -> tuple[ModelShape, Parallelism]:
    model, par, _ = PRESETS[name]
    return model, Parallelism(**{**asdict(par), **override})


# DLIO's per-rank bytes, as runs of (bytes, ranks in a row) in rank order. Obtained by running DLIO_HARNESS with
# ~/.cache/ddlio-bench/dlio-venv/bin/python (Python 3.11) on argonne-lcf/dlio_benchmark's
# dlio_benchmark/checkpointing/base_checkpointing.py from branch mlperf_storage_v2.0 (392621b, what mlcommons/storage
# installs), i.e. its BaseCheckpointing.__init__ (get_num_parameters, get_layer_index, get_layer_parameters,
# get_optimization_groups) and save_checkpoint:
#   git -C dlio_benchmark show mlperf_storage_v2.0:dlio_benchmark/checkpointing/base_checkpointing.py > bc.py
#   python harness.py bc.py '[{"model": {...ModelShape...}, "tensor": 8, "pipeline": 32, "zero_stage": 1,
#                              "ranks": 512}, ...]'
# with each case's fields from PRESETS and its override; tag v2.0.1 (b56c741) prints the same (the two files differ
# only in load_checkpoint). DLIO 2.0.0, the PyPI release in that venv, has no model-shape arithmetic (its checkpoint
# sizes are given by hand: checkpoint.model_size, optimization_groups, layer_parameters), so it cannot produce these.
# Each case: (preset, parallelism override, ranks) -> runs.
DLIO_RANK_BYTES: dict[tuple[str, tuple[tuple[str, int], ...], int], list[tuple[int, int]]] = {
    ("llama3_8b", (), 8): [(14053202944, 8)],
    ("llama3_8b", (), 2): [(56212074496, 2)],
    ("llama3_70b", (), 64): [(15287602688, 64)],
    ("llama3_70b", (), 8): [(122297380864, 8)],
    ("llama3_70b", (("tensor", 1),), 2): [(489178816512, 2)],
    ("llama3_405b", (), 512): [
        (13226441600, 8),
        (12701105024, 232),
        (11904121728, 8),
        (12429491072, 8),
        (9513171840, 256),
    ],
    ("llama3_405b", (), 256): [(22738630400, 8), (22213293824, 232), (21416310528, 8), (21941679872, 8)],
    ("llama3_405b", (("pipeline", 1), ("tensor", 1)), 2): [(3246828093440, 1), (2435121315840, 1)],
    ("llama3_1t", (), 1024): [(19290292860, 8), (18460733052, 496), (19290344604, 8), (13865244924, 512)],
    ("llama3_1t", (), 512): [(33153985464, 8), (32324425656, 496), (33154037208, 8)],
    ("llama3_1t", (("pipeline", 1), ("tensor", 1)), 2): [(9464282372160, 1), (7098212167200, 1)],
    ("llama3_8b", (("zero_stage", 0),), 4): [(112423903232, 1), (0, 3)],
    ("llama3_8b", (("zero_stage", 2),), 4): [(40151552000, 1), (24091029504, 3)],
    ("llama3_70b", (("pipeline", 4), ("tensor", 2), ("zero_stage", 2)), 16): [
        (70408771584, 2),
        (69358098432, 4),
        (70408787968, 2),
        (52412454912, 8),
    ],
    ("llama3_405b", (("pipeline", 4), ("tensor", 2), ("zero_stage", 0)), 16): [
        (712889982976, 2),
        (710788636672, 2),
        (707600900096, 2),
        (709702279168, 2),
        (0, 8),
    ],
}

# Whole files for a few ranks, same provenance: (preset, override, ranks, rank) -> [(name, bytes), ...]
DLIO_PIECES: dict[tuple[str, tuple[tuple[str, int], ...], int, int], list[tuple[str, int]]] = {
    ("llama3_8b", (), 8, 0): [
        ("zero_pp_rank_0_mp_rank_0_model_states", 2007565312),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 12045637632),
    ],
    ("llama3_8b", (), 8, 7): [
        ("zero_pp_rank_7_mp_rank_0_model_states", 2007565312),
        ("zero_pp_rank_7_mp_rank_0_optim_states", 12045637632),
    ],
    ("llama3_8b", (), 2, 0): [
        ("zero_pp_rank_0_mp_rank_0_model_states", 8030261248),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 48181813248),
    ],
    ("llama3_8b", (), 2, 1): [
        ("zero_pp_rank_1_mp_rank_0_model_states", 8030261248),
        ("zero_pp_rank_1_mp_rank_0_optim_states", 48181813248),
    ],
    ("llama3_70b", (), 64, 0): [
        ("zero_pp_rank_0_mp_rank_0_model_states", 2184120320),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 13103482368),
    ],
    ("llama3_70b", (), 64, 63): [
        ("zero_pp_rank_7_mp_rank_7_model_states", 2184120320),
        ("zero_pp_rank_7_mp_rank_7_optim_states", 13103482368),
    ],
    ("llama3_70b", (), 8, 0): [
        ("zero_pp_rank_0_mp_rank_0_model_states", 17472962560),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 104824418304),
    ],
    ("llama3_70b", (), 8, 7): [
        ("zero_pp_rank_0_mp_rank_7_model_states", 17472962560),
        ("zero_pp_rank_0_mp_rank_7_optim_states", 104824418304),
    ],
    ("llama3_70b", (("tensor", 1),), 2, 0): [
        ("zero_pp_rank_0_mp_rank_0_model_states", 69882617856),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 419296198656),
    ],
    ("llama3_70b", (("tensor", 1),), 2, 1): [
        ("zero_pp_rank_1_mp_rank_0_model_states", 69882617856),
        ("zero_pp_rank_1_mp_rank_0_optim_states", 419296198656),
    ],
    ("llama3_405b", (), 512, 0): [
        ("layer_0-model_0_model_states", 525336576),
        ("layer_1-model_0_model_states", 796983296),
        ("layer_2-model_0_model_states", 796983296),
        ("layer_3-model_0_model_states", 796983296),
        ("layer_4-model_0_model_states", 796983296),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 9513171840),
    ],
    ("llama3_405b", (), 512, 255): [
        ("layer_124-model_255_model_states", 796983296),
        ("layer_125-model_255_model_states", 796983296),
        ("layer_126-model_255_model_states", 796983296),
        ("layer_127-model_255_model_states", 525336576),
        ("layer_128-model_255_model_states", 32768),
        ("zero_pp_rank_0_mp_rank_255_optim_states", 9513171840),
    ],
    ("llama3_405b", (), 512, 511): [("zero_pp_rank_1_mp_rank_255_optim_states", 9513171840)],
    ("llama3_405b", (), 256, 0): [
        ("layer_0-model_0_model_states", 525336576),
        ("layer_1-model_0_model_states", 796983296),
        ("layer_2-model_0_model_states", 796983296),
        ("layer_3-model_0_model_states", 796983296),
        ("layer_4-model_0_model_states", 796983296),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 19025360640),
    ],
    ("llama3_405b", (), 256, 255): [
        ("layer_124-model_255_model_states", 796983296),
        ("layer_125-model_255_model_states", 796983296),
        ("layer_126-model_255_model_states", 796983296),
        ("layer_127-model_255_model_states", 525336576),
        ("layer_128-model_255_model_states", 32768),
        ("zero_pp_rank_0_mp_rank_255_optim_states", 19025360640),
    ],
    ("llama3_405b", (("pipeline", 1), ("tensor", 1)), 2, 0): [
        ("model_0_model_states", 811706777600),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 2435121315840),
    ],
    ("llama3_405b", (("pipeline", 1), ("tensor", 1)), 2, 1): [("zero_pp_rank_1_mp_rank_0_optim_states", 2435121315840)],
    ("llama3_1t", (), 1024, 0): [
        ("layer_0-model_0_model_states", 829559808),
        ("layer_1-model_0_model_states", 2297744064),
        ("layer_2-model_0_model_states", 2297744064),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 13865244924),
    ],
    ("llama3_1t", (), 1024, 511): [
        ("layer_127-model_511_model_states", 2297744064),
        ("layer_128-model_511_model_states", 2297744064),
        ("layer_129-model_511_model_states", 829559808),
        ("layer_130-model_511_model_states", 51744),
        ("zero_pp_rank_0_mp_rank_511_optim_states", 13865244924),
    ],
    ("llama3_1t", (), 1024, 1023): [("zero_pp_rank_1_mp_rank_511_optim_states", 13865244924)],
    ("llama3_1t", (), 512, 0): [
        ("layer_0-model_0_model_states", 829559808),
        ("layer_1-model_0_model_states", 2297744064),
        ("layer_2-model_0_model_states", 2297744064),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 27728937528),
    ],
    ("llama3_1t", (), 512, 511): [
        ("layer_127-model_511_model_states", 2297744064),
        ("layer_128-model_511_model_states", 2297744064),
        ("layer_129-model_511_model_states", 829559808),
        ("layer_130-model_511_model_states", 51744),
        ("zero_pp_rank_0_mp_rank_511_optim_states", 27728937528),
    ],
    ("llama3_1t", (("pipeline", 1), ("tensor", 1)), 2, 0): [
        ("model_0_model_states", 2366070204960),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 7098212167200),
    ],
    ("llama3_1t", (("pipeline", 1), ("tensor", 1)), 2, 1): [("zero_pp_rank_1_mp_rank_0_optim_states", 7098212167200)],
    ("llama3_8b", (("zero_stage", 0),), 4, 0): [
        ("zero_pp_rank_0_mp_rank_0_model_states", 16060522496),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 96363380736),
    ],
    ("llama3_8b", (("zero_stage", 0),), 4, 3): [],
    ("llama3_8b", (("zero_stage", 2),), 4, 0): [
        ("model_0_model_states", 16060522496),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 24091029504),
    ],
    ("llama3_8b", (("zero_stage", 2),), 4, 3): [("zero_pp_rank_3_mp_rank_0_optim_states", 24091029504)],
    ("llama3_70b", (("pipeline", 4), ("tensor", 2), ("zero_stage", 2)), 16, 15): [
        ("zero_pp_rank_1_mp_rank_7_optim_states", 52412454912)
    ],
    ("llama3_405b", (("pipeline", 4), ("tensor", 2), ("zero_stage", 0)), 16, 0): [
        ("zero_pp_rank_0_mp_rank_0_model_states", 104108916736),
        ("zero_pp_rank_0_mp_rank_0_optim_states", 608781066240),
    ],
    ("llama3_405b", (("pipeline", 4), ("tensor", 2), ("zero_stage", 0)), 16, 15): [],
}


@pytest.mark.parametrize("case", sorted(DLIO_RANK_BYTES), ids=lambda c: f"{c[0]}{dict(c[1]) or ''}x{c[2]}")
def test_rank_bytes_equal_dlio(case: tuple[str, tuple[tuple[str, int], ...], int]) -> None:
    name, override, ranks = case
    model, par = preset(name, **dict(override))
    assert runs(rank_bytes(model, par, ranks)) == DLIO_RANK_BYTES[case]


@pytest.mark.parametrize("case", sorted(DLIO_PIECES), ids=lambda c: f"{c[0]}{dict(c[1]) or ''}x{c[2]}r{c[3]}")
def test_rank_pieces_equal_dlio(case: tuple[str, tuple[tuple[str, int], ...], int, int]) -> None:
    name, override, ranks, rank = case
    model, par = preset(name, **dict(override))
    assert rank_pieces(model, par, ranks)[rank] == DLIO_PIECES[case]


def test_every_preset_is_checked_at_mlperfs_process_count() -> None:
    for name, (_, _, ranks) in PRESETS.items():
        assert (name, (), ranks) in DLIO_RANK_BYTES


# MLPerf Storage's published sizes, GiB (they write "GB"; 8B's 104.7 GiB is their 105, 112.4 decimal GB is not).
# mlcommons/storage (caa90c9) mlpstorage/config.py::LLM_SIZE_BY_RANK (model, optimizer), commented "These need to be
# updated with actual values", and Submission_guidelines.md §2.2.1 Table 2 "Checkpoint size" (total; TB as 1000 GiB).
MLPERF_MODEL_OPTIMIZER_GIB = {"llama3_8b": (15, 90), "llama3_70b": (130, 781), "llama3_405b": (755, 4533)}
MLPERF_TABLE2_TOTAL_GIB = {"llama3_8b": 105, "llama3_70b": 912, "llama3_405b": 5290}


def split_gib(name: str) -> tuple[float, float]:
    """(model, optimizer) GiB of a preset at MLPerf's process count, by ddlio's arithmetic."""
    model, par, ranks = PRESETS[name]
    pieces = [p for rank in rank_pieces(model, par, ranks) for p in rank]
    model_b = sum(b for n, b in pieces if n.endswith("_model_states"))
    optim_b = sum(b for n, b in pieces if n.endswith("_optim_states"))
    assert model_b + optim_b == sum(b for _, b in pieces)
    return model_b / GiB, optim_b / GiB


@pytest.mark.parametrize("name", sorted(MLPERF_MODEL_OPTIMIZER_GIB))
def test_totals_match_mlperfs_published_sizes(name: str) -> None:
    model_gib, optim_gib = split_gib(name)
    want_model, want_optim = MLPERF_MODEL_OPTIMIZER_GIB[name]
    # 8B and 70B round to MLPerf's figures; 405B's are 0.13% and 0.07% under ours (756.0 and 4536.2 GiB)
    assert model_gib == pytest.approx(want_model, rel=2e-3, abs=0.5)
    assert optim_gib == pytest.approx(want_optim, rel=1e-3, abs=0.5)
    assert model_gib + optim_gib == pytest.approx(MLPERF_TABLE2_TOTAL_GIB[name], rel=3e-3)


def test_1t_is_where_mlperfs_table_disagrees_with_dlio() -> None:
    """MLPerf's 1T figures (2571 + 15426 GiB, Table 2's "18 TB") are not DLIO's: DLIO's whole 1T checkpoint is
    15426.6 GiB (2203.7 model + 13222.9 optimizer), which is MLPerf's optimizer figure alone. ddlio follows DLIO."""
    model_gib, optim_gib = split_gib("llama3_1t")
    assert round(model_gib, 1) == 2203.7
    assert round(optim_gib, 1) == 13222.9
    assert round(model_gib + optim_gib) == 15427


def test_presets_are_mlperfs_process_counts() -> None:
    assert {n: r for n, (_, _, r) in PRESETS.items()} == {
        "llama3_8b": 8, "llama3_70b": 64, "llama3_405b": 512, "llama3_1t": 1024}
    for name, (model, par, ranks) in PRESETS.items():
        assert parallelism_problem(par, ranks, model) is None, name


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_conf_presets_equal_presets(name: str) -> None:
    conf = yaml.safe_load((ROOT / "conf" / "checkpoint" / f"{name}.yaml").read_text())
    assert conf.pop("defaults") == ["/schema/checkpoint@_here_", "_self_"]
    model, par, _ = PRESETS[name]
    assert conf == {"name": name, **asdict(model), **asdict(par)}


def test_conf_has_a_preset_for_each_and_no_other() -> None:
    assert sorted(p.stem for p in (ROOT / "conf" / "checkpoint").glob("*.yaml")) == sorted(PRESETS)


def test_model_and_parallelism_fields_do_not_collide() -> None:
    """The preset files are flat: ModelShape's and Parallelism's fields share one namespace with ``name``."""
    names = [f.name for f in fields(ModelShape)] + [f.name for f in fields(Parallelism)] + ["name"]
    assert len(names) == len(set(names))


def test_two_ranks_write_the_8b() -> None:
    """The 8B runs as is on two ranks (ZeRO 3: each writes half of everything), and scales to 1 GiB."""
    model, par, _ = PRESETS["llama3_8b"]
    sizes = rank_bytes(model, par, 2)
    assert sizes == [56212074496, 56212074496]
    assert scaled(sizes, GiB) == [GiB // 2, GiB // 2]


def test_scaled_sums_exactly_and_keeps_proportions() -> None:
    sizes = [13226441600] * 8 + [12701105024] * 232 + [11904121728] * 8 + [12429491072] * 8 + [9513171840] * 256
    for total in (GiB, 10**9 + 7, 511, 0, sum(sizes)):
        out = scaled(sizes, total)
        assert sum(out) == total
        assert all(abs(o - total * s / sum(sizes)) < 1 for o, s in zip(out, sizes, strict=True))
    assert scaled(sizes, sum(sizes)) == sizes


def test_scaled_keeps_zeros_and_rounds_deterministically() -> None:
    assert scaled([0, 3, 0, 3, 3], 10) == [0, 4, 0, 3, 3]  # one byte over: to the lowest index among equals
    assert scaled([0, 1, 0], 5) == [0, 5, 0]
    assert scaled([1, 2], 7) == [2, 5]  # 2.33 and 4.67: the larger remainder gets the byte
    assert scaled([0, 0], 0) == [0, 0]
    assert scaled([], 0) == []


def test_scaled_refuses_what_it_cannot_split() -> None:
    with pytest.raises(ValueError, match="all 0"):
        scaled([0, 0], 1)
    with pytest.raises(ValueError, match="negative"):
        scaled([1, -1], 1)
    with pytest.raises(ValueError, match="negative"):
        scaled([1], -1)


def test_parallelism_problem_names_the_valid_counts_and_the_fix() -> None:
    model, par, _ = PRESETS["llama3_405b"]
    problem = parallelism_problem(par, 2)
    assert problem is not None
    assert "2 ranks" in problem and "multiple of 256" in problem and "256, 512, 768" in problem
    assert "checkpoint.tensor=1 checkpoint.pipeline=1" in problem
    assert problem.endswith(".") and ". " not in problem and "\n" not in problem  # one sentence
    assert parallelism_problem(par, 0) is not None
    assert parallelism_problem(par, 768) is None
    assert parallelism_problem(Parallelism(tensor=1, pipeline=1, zero_stage=1), 2, model) is None
    with pytest.raises(ValueError, match="multiple of 256"):
        rank_pieces(model, par, 2)


def test_parallelism_problem_holds_dlios_other_checks() -> None:
    model, _, _ = PRESETS["llama3_8b"]
    assert "ZeRO stage 3" in (parallelism_problem(Parallelism(pipeline=2, zero_stage=3), 2) or "")
    assert "32 layers cannot fill 64" in (parallelism_problem(Parallelism(pipeline=64, zero_stage=1), 64, model) or "")
    assert "not a ZeRO stage" in (parallelism_problem(Parallelism(zero_stage=4), 2) or "")
    assert "at least 1" in (parallelism_problem(Parallelism(tensor=0), 2) or "")
    with pytest.raises(ValueError, match="unknown datatype 'fp8'"):
        rank_bytes(ModelShape(1, 8, 8, 8, 1, 1, model_datatype="fp8"), Parallelism(), 1)


def _dlio_checkpointing_source() -> Path:
    """DLIO's base_checkpointing.py with the model-shape arithmetic: $DDLIO_DLIO_SOURCE (a dlio_benchmark checkout or
    its site-packages' parent), else the bench's DLIO venv; skips when neither has it (DLIO 2.0.0 does not)."""
    roots = [Path(os.environ["DDLIO_DLIO_SOURCE"])] if os.environ.get("DDLIO_DLIO_SOURCE") else []
    roots += sorted(DLIO_VENV.glob("lib/python*/site-packages"))
    for root in roots:
        path = root / "dlio_benchmark" / "checkpointing" / "base_checkpointing.py"
        if path.is_file() and "def get_layer_parameters" in path.read_text():
            return path
    pytest.skip("no DLIO with model-shape checkpoints (>= 2.0.1 or branch mlperf_storage_v2.0): set DDLIO_DLIO_SOURCE "
                f"to a dlio_benchmark checkout; looked in {[str(r) for r in roots]}")


def test_live_dlio_matches(tmp_path: Path) -> None:
    """Recompute the 405B (pipelined, ZeRO 1) and 70B (ZeRO 3) with DLIO's own code, as the constants above were:
    ``DDLIO_DLIO_SOURCE=<dlio_benchmark at mlperf_storage_v2.0> pytest tests/test_checkpoint_shards.py -k live``."""
    source = _dlio_checkpointing_source()
    python = DLIO_VENV / "bin" / "python"
    harness = tmp_path / "dlio_harness.py"
    harness.write_text(DLIO_HARNESS)
    cases = [("llama3_405b", 512), ("llama3_70b", 64), ("llama3_8b", 2)]
    payload = [{"model": asdict(PRESETS[n][0]), **asdict(PRESETS[n][1]), "ranks": r} for n, r in cases]
    proc = subprocess.run([str(python) if python.exists() else sys.executable, str(harness), str(source),
                           json.dumps(payload)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for (name, ranks), theirs in zip(cases, json.loads(proc.stdout), strict=True):
        model, par, _ = PRESETS[name]
        assert [[tuple(p) for p in rank] for rank in theirs] == rank_pieces(model, par, ranks), name
