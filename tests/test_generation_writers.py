"""A one-rank point's dataset written by several processes (experiments/dataset/writers.py): the very bytes one writer
writes (every format with several files, pinned by the hashes of tests/test_generation.py; bin, npy, tfrecord,
contiguous hdf5 and npz with one shared file), one clear error naming the writer that failed, the other writers
stopped, no manifest."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_generation import GOLDEN_FILES, file_contents

from ddlio.errors import DatasetError, LaunchError
from experiments.dataset import DatasetPlan, ensure_dataset, generate_here, load_manifest, verify_dataset
from experiments.dataset import writers as writers_mod
from experiments.dataset.verify import VERIFIED
from experiments.dataset.writers import generate_by_writers, writer_count
from experiments.formats import base as base_mod
from experiments.formats.ranges import RangedFormat
from helpers import point
from lustre import Layout

ROOT = Path(__file__).resolve().parent.parent


def planned(tmp_path: Path, *overrides: str) -> tuple[DatasetPlan, Path]:
    """A dataset's plan and its plan.json, in an empty dataset directory."""
    plan = DatasetPlan.from_point(point(tmp_path, *overrides))
    os.makedirs(plan.directory)
    plan_path = Path(plan.directory) / "plan.json"
    plan_path.write_text(json.dumps(plan.to_dict()))
    return plan, plan_path


def files_digest(plan: DatasetPlan) -> str:
    h = hashlib.sha256()
    for name in sorted(os.listdir(plan.directory)):
        if name.startswith("part-"):
            h.update(name.encode())
            h.update(Path(plan.directory, name).read_bytes())
    return h.hexdigest()


def clear(plan: DatasetPlan) -> None:
    for name in os.listdir(plan.directory):
        if name != "plan.json":
            os.unlink(os.path.join(plan.directory, name))


@pytest.mark.parametrize("case", sorted(GOLDEN_FILES))
def test_several_writers_of_several_files_write_the_bytes_earlier_code_wrote(tmp_path, case):
    """Every format and layout: 3 files, 2 writers (writer 0 writes files 0 and 2), the files' hash pinned as the
    code before (7636746) wrote them, one file per writer's process; the verification sees every file."""
    digest, overrides = GOLDEN_FILES[case]
    shape = ["workload.sample_shape=[24,24,3]", "workload.sample_size_stdev=0"] if case.endswith("-array") else []
    plan, plan_path = planned(tmp_path, "workload.samples=40", "workload.samples_per_file=20",
                              "workload.sample_size=3001", "workload.sample_size_stdev=700", *overrides, *shape)
    assert plan.num_files == 2
    assert generate_by_writers(plan_path, writers=2) == [plan.file_name(0), plan.file_name(1)]
    assert files_digest(plan) == digest
    found = json.loads((Path(plan.directory) / VERIFIED).read_text())
    entries, records = verify_dataset(plan, plan.sizes())
    assert found["entries"] == [{k: v for k, v in e.items() if k != "file"} for e in entries]
    assert found["record_bytes"] == int(records.sum()) > 0


@pytest.mark.parametrize("fmt", ["bin", "npy", "npz", "tfrecord", "hdf5"])
def test_more_files_than_writers_are_dealt_as_a_step_s_ranks_deal_them(tmp_path, fmt):
    plan, plan_path = planned(tmp_path, f"format={fmt}", "workload.samples=50", "workload.samples_per_file=10",
                              "workload.sample_size_stdev=1KiB")
    assert plan.num_files == 5
    generate_here(plan_path)
    one = file_contents(plan)  # an HDF5 file carries timestamps: its arrays are what must match
    clear(plan)
    generate_by_writers(plan_path, writers=3)
    assert len(one) >= 5 and file_contents(plan) == one
    verify_dataset(plan, plan.sizes())


SHARED = {
    "bin": ["format=bin"],
    "npy": ["format=npy"],
    "npy-array": ["format=npy", "format.layout=array", "workload.sample_shape=[24,24,3]",
                  "workload.sample_size_stdev=0"],
    "tfrecord": ["format=tfrecord", "workload.sample_size_stdev=0"],
    "tfrecord-sizes": ["format=tfrecord"],
    "tfrecord-example": ["format=tfrecord", "format.layout=example"],
    "hdf5": ["format=hdf5"],
    "npz": ["format=npz"],
    "npz-array": ["format=npz", "format.layout=array", "workload.sample_shape=[24,24,3]",
                  "workload.sample_size_stdev=0"],
    "hdf5-paged-aligned": ["format=hdf5", "format.fs_strategy=page", "format.alignment=4096"],
}


@pytest.mark.parametrize("case", sorted(SHARED))
@pytest.mark.parametrize("writers", [2, 3])
def test_several_writers_of_one_file_write_one_writer_s_bytes(tmp_path, monkeypatch, case, writers):
    """One file, its generation groups (16 KiB here, so the file has 5-9 of them) dealt among writers in
    contiguous runs, each written at its offsets into the one file: the bytes one writer writes, and the file is
    verified once."""
    monkeypatch.setattr(base_mod, "GROUP_BYTES", 16 * 1024)
    plan, plan_path = planned(tmp_path, "workload.samples=40", "workload.samples_per_file=40",
                              "workload.sample_size=3456", "workload.sample_size_stdev=700", *SHARED[case])
    assert plan.num_files == 1 and len(plan.file_payload(0).groups()) >= 5
    generate_here(plan_path)
    one = files_digest(plan)
    clear(plan)
    assert writer_count(plan, plan.sizes(), cores=2 * writers) == writers  # one a two cores
    generate_by_writers(plan_path, writers=writers)
    assert files_digest(plan) == one
    entries, _ = verify_dataset(plan, plan.sizes())
    assert json.loads((Path(plan.directory) / VERIFIED).read_text())["entries"] == [
        {k: v for k, v in e.items() if k != "file"} for e in entries]


@pytest.mark.parametrize("options", [[], ["format.fs_strategy=page"], ["format.alignment=4096"],
                                     ["format.alignment=65536", "format.alignment_threshold=1024"],
                                     ["workload.samples=1", "workload.sample_size=1", "workload.sample_size_stdev=0"]])
def test_contiguous_hdf5_written_at_offsets_is_the_file_h5py_writes_in_slabs(tmp_path, monkeypatch, options):
    """A contiguous HDF5 file laid out by h5py and its records written at the storage's address (what several
    writers do) holds the very bytes h5py writes when handed the records as slabs (the path before, still taken for
    chunked storage), with every file-creation knob that moves where the storage lies."""
    from experiments.formats.hdf5 import HDF5

    monkeypatch.setattr(base_mod, "GROUP_BYTES", 16 * 1024)
    plan, plan_path = planned(tmp_path, "format=hdf5", "workload.samples=40", "workload.samples_per_file=40",
                              "workload.sample_size=3456", "workload.sample_size_stdev=700", *options)
    generate_here(plan_path)
    at_offsets = files_digest(plan)
    clear(plan)
    monkeypatch.setattr(HDF5, "ranged", lambda self: False)
    generate_here(plan_path)
    assert files_digest(plan) == at_offsets


@pytest.mark.parametrize("layout", ["samples", "array"])
def test_an_npz_archive_written_by_several_writers_passes_zip_s_own_crc_check(tmp_path, monkeypatch, layout):
    """zipfile (not ddlio) reads every member back and checks its CRC-32 against the headers, and np.load reads the
    samples' array: the CRC finish() wrote from the writers' group CRCs is the data's."""
    import zipfile

    monkeypatch.setattr(base_mod, "GROUP_BYTES", 16 * 1024)
    shape = ["workload.sample_shape=[24,24,3]", "workload.sample_size_stdev=0"] if layout == "array" else []
    plan, plan_path = planned(tmp_path, "format=npz", f"format.layout={layout}", "workload.samples=40",
                              "workload.samples_per_file=40", "workload.sample_size=3456", *shape)
    generate_by_writers(plan_path, writers=3)
    path = plan.file_path(0)
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
    member = "x" if layout == "array" else "data"
    with np.load(path) as z:
        assert z[member].size == int(plan.sizes().sum())


def test_one_file_of_full_size_groups_split_among_writers_is_one_writer_s(tmp_path):
    """The real group size (8 MiB): 4 groups of one 6 MiB sample each, 3 writers (1, 1 and 2 groups)."""
    plan, plan_path = planned(tmp_path, "format=bin", "workload.samples=4", "workload.samples_per_file=4",
                              "workload.sample_size=6MiB", "workload.sample_size_stdev=0")
    generate_here(plan_path)
    one = files_digest(plan)
    clear(plan)
    generate_by_writers(plan_path, writers=3)
    assert files_digest(plan) == one


@pytest.mark.parametrize(("overrides", "want"), [
    (["format=bin", "workload.samples=30", "workload.samples_per_file=10"], 3),  # one per file
    (["format=hdf5", "workload.samples=10", "workload.samples_per_file=10"], 1),  # one file, one group
    (["format=hdf5", "workload.samples=10", "workload.samples_per_file=10", "workload.sample_size=5MiB"], 4),
    (["format=hdf5", "workload.samples=10", "workload.samples_per_file=10", "workload.sample_size=5MiB",
      "format.chunk_samples=2"], 1),  # chunked: h5py lays the chunks out
    (["format=npz", "workload.samples=10", "workload.samples_per_file=10"], 1),  # one file, one group
    (["format=npz", "workload.samples=10", "workload.samples_per_file=10", "workload.sample_size=5MiB"], 4),
    (["format=bin", "workload.samples=10", "workload.samples_per_file=10", "workload.sample_size=5MiB"], 4),
    (["format=bin", "workload.samples=2", "workload.samples_per_file=2", "workload.sample_size=5MiB"], 2),
    (["format=bin", "workload.samples=30", "workload.samples_per_file=10"], 3),  # 3 files
])
def test_writers_are_one_per_core_and_file_or_one_per_two_cores_and_group(tmp_path, overrides, want):
    """Several files: one writer per core, at most one per file. One file that several may write: one writer per
    two cores (each generating ahead in a thread), at most one per generation group. Else one."""
    plan = DatasetPlan.from_point(point(tmp_path, *overrides, "workload.sample_size_stdev=0"))
    files = plan.num_files > 1
    assert writer_count(plan, plan.sizes(), cores=8) == (min(3, want) if files else want)
    assert writer_count(plan, plan.sizes(), cores=4) == (min(3, want) if files else min(2, want))
    assert writer_count(plan, plan.sizes(), cores=3) == (min(3, want) if files else 1)
    assert writer_count(plan, plan.sizes(), cores=2) == (min(2, want) if files else 1)
    assert writer_count(plan, plan.sizes(), cores=1) == 1


@pytest.mark.parametrize(("cores", "files", "want"), [(2, 2, {0}), (2, 1, {1}), (1, 2, {0}), (8, 2, {2}), (3, 3, {0})])
def test_writers_generate_in_threads_only_where_cores_are_left(tmp_path, monkeypatch, cores, files, want):
    """Each writer generates its payload ahead in min(2, (cores - writers) // writers) threads: none where the
    writers fill the cores (each generates inline, one buffer), one for a lone writer of a file only one process
    may write on 2 cores, two with cores to spare. Every writer, forked or not, says what it was given."""
    said = tmp_path / "threads"
    said.mkdir()
    iter_groups = base_mod.FilePayload.iter_groups

    def spy(self, threads=None, *args, **kwargs):
        now = base_mod.GENERATOR_THREADS if base_mod._threads_now is None else base_mod._threads_now
        got = now if threads is None else threads
        (said / f"{os.getpid()}-{self.file_index}").write_text(str(got))
        return iter_groups(self, threads, *args, **kwargs)

    monkeypatch.setattr(base_mod.FilePayload, "iter_groups", spy)
    monkeypatch.setattr(writers_mod, "usable_cores", lambda: cores)
    fmt = ["format=hdf5", "format.chunk_samples=2"] if files == 1 else ["format=bin"]  # one file: h5py's slabs
    plan, plan_path = planned(tmp_path, *fmt, "workload.samples=12", f"workload.samples_per_file={12 // files}")
    generate_by_writers(plan_path)
    assert {int(f.read_text()) for f in said.iterdir()} == want
    assert base_mod._threads_now is None  # as it was, after


def test_a_writer_that_cannot_write_its_file_fails_the_generation_by_name(tmp_path, monkeypatch):
    """A one-rank point's generation, forked ahead (generation_runner) with 3 writers: the file writer 1 must
    write cannot be (a directory is in its place): one error naming the writer and its file, and no manifest."""
    from experiments.run import generation_runner

    monkeypatch.setattr(writers_mod, "usable_cores", lambda: 3)
    spec = point(tmp_path, "format=bin", "workload.samples=30", "workload.samples_per_file=10")
    plan = DatasetPlan.from_point(spec)
    gen = generation_runner(spec, tmp_path)

    def blocked(plan_path: str, ranks: int) -> None:
        os.mkdir(plan.file_path(1))
        gen(plan_path, ranks)

    with pytest.raises(LaunchError, match=r"(?s)^generate step failed: DatasetError: generation writer 1 of 3 "
                                          r"\(part-00001\.bin\) failed: IsADirectoryError"):
        ensure_dataset(plan, Layout(), blocked, 1)
    assert load_manifest(plan) is None and not (Path(plan.directory) / VERIFIED).exists()
    shutil.rmtree(plan.file_path(1))
    gen = generation_runner(spec, tmp_path)  # the same point generated again: 3 writers, a complete dataset
    info = ensure_dataset(plan, Layout(), gen, 1)
    assert info.generated and len(info.manifest["files"]) == 6


def test_a_killed_writer_fails_the_generation_and_the_others_are_stopped(tmp_path, monkeypatch):
    """Writer 1 of a shared file is killed (SIGKILL) while writer 0 waits forever: the error names writer 1, its
    share of the file and the signal; writer 0 is killed and reaped; nothing is verified."""
    monkeypatch.setattr(base_mod, "GROUP_BYTES", 16 * 1024)
    plan, plan_path = planned(tmp_path, "format=bin", "workload.samples=40", "workload.samples_per_file=40",
                              "workload.sample_size=3456")
    pids = tmp_path / "pids"
    pids.mkdir()

    def write_groups(self, path, payload, starts, part=None, written=None):
        (pids / str(part.start)).write_text(str(os.getpid()))
        if part.start == 0:
            os.read(os.pipe()[0], 1)  # blocks: nothing writes the pipe
        while not (pids / "0").exists():  # writer 0 has started
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(RangedFormat, "write_groups", write_groups)
    with pytest.raises(DatasetError, match=r"^generation writer 1 of 2 \(part-00000\.bin, groups \d+\.\.\d+ of \d+\) "
                                           r"failed: killed by SIGKILL$"):
        generate_by_writers(plan_path, writers=2)
    assert not (Path(plan.directory) / VERIFIED).exists()
    first = int((pids / "0").read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(first, 0)


def test_several_processes_write_the_one_file_strace_says(tmp_path):
    """strace, not ddlio, counts who wrote the file: two writers' processes each write part of the one file with
    positioned writes, and the file is what one writer writes."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    plan, plan_path = planned(tmp_path, "format=bin", "workload.samples=4", "workload.samples_per_file=4",
                              "workload.sample_size=3MiB", "workload.sample_size_stdev=0")
    log = tmp_path / "strace.log"
    code = ("import sys; from experiments.dataset.writers import generate_by_writers; "
            "generate_by_writers(sys.argv[1], writers=2)")
    res = subprocess.run(["strace", "-f", "-y", "-o", str(log), "-e", "trace=pwrite64,pwritev,pwritev2,write,writev",
                          sys.executable, "-c", code, str(plan_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    if res.returncode != 0 and "ptrace" in res.stderr:
        pytest.skip(f"strace cannot trace here: {res.stderr.strip()[:200]}")
    assert res.returncode == 0, res.stderr[-2000:]
    name = re.escape(plan.file_name(0))
    writers = {line.split()[0] for line in log.read_text().splitlines()
               if re.search(rf"^\d+\s+pwrite(64|v|v2)\(\d+<[^>]*{name}>", line)}
    assert len(writers) == 2
    got = files_digest(plan)
    clear(plan)
    generate_here(plan_path)
    assert files_digest(plan) == got
    assert np.array_equal(np.load(Path(plan.directory) / "sizes.npy"), plan.sizes())


def test_what_the_caller_had_buffered_is_printed_once_not_once_per_writer(tmp_path):
    plan, plan_path = planned(tmp_path, "format=bin", "workload.samples=30", "workload.samples_per_file=10")
    code = ("import sys; from experiments.dataset.writers import generate_by_writers; print('buffered-line'); "
            "generate_by_writers(sys.argv[1], writers=3)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout, a pipe, holds the line
    res = subprocess.run([sys.executable, "-c", code, str(plan_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.count("buffered-line") == 1
    assert len(verify_dataset(plan, plan.sizes())[0]) == 6


def test_each_writer_of_one_file_writes_behind_its_own_range(tmp_path):
    """Drop-behind per writer (RangeWriteBehind): each write's range is queued, and once WRITE_BEHIND_DEPTH are in
    flight the oldest is waited for and dropped from the page cache, so of 16 groups written by 2 writers only each
    writer's last 3 stay cached (the path-watching write-behind follows a growing end, which a file written in
    several places has not)."""
    from experiments.kernel import cache as pagecache
    from lustre.io import WRITE_BEHIND_DEPTH

    plan, plan_path = planned(tmp_path, "format=bin", "workload.samples=16", "workload.samples_per_file=16",
                              "workload.sample_size=8MiB", "workload.sample_size_stdev=0")
    assert len(plan.file_payload(0).groups()) == 16 and WRITE_BEHIND_DEPTH == 3
    generate_by_writers(plan_path, writers=2)
    assert pagecache.residency([Path(plan.file_path(0))]) < 0.5


@pytest.mark.parametrize("fmt", ["npz", "bin"])
def test_samples_larger_than_a_write_are_written_behind_a_chunk_at_a_time(tmp_path, fmt):
    """Four 24 MiB samples (each its own generation group, as MLPerf unet3d's are) in one file, one writer: written
    in 8 MiB calls, each written behind at once and dropped three calls later, so only the last three calls' pages
    stay in the page cache (a quarter), where one call per sample would leave the last three samples (three
    quarters)."""
    from experiments.kernel import cache as pagecache

    plan, plan_path = planned(tmp_path, f"format={fmt}", "workload.samples=4", "workload.samples_per_file=4",
                              "workload.sample_size=24MiB", "workload.sample_size_stdev=0")
    assert len(plan.file_payload(0).groups()) == 4
    generate_by_writers(plan_path, writers=1)
    assert pagecache.residency([Path(plan.file_path(0))]) < 0.35


class _OneRank:
    """A one-rank communicator as the kernel's step has: rank 0 of 1; Abort raises (the step would end)."""

    rank, size = 0, 1

    def Abort(self, code: int) -> None:  # mpi4py's name
        raise SystemExit(code)


def test_a_one_rank_kernel_writes_its_dataset_by_writers(tmp_path, monkeypatch, capsys):
    """A one-rank point's kernel (experiments.kernel.main.ready: comm.size == 1) generates through the writers,
    one a core: the same bytes as one process; a failure prints why and aborts the step."""
    from experiments.dataset.writers import generate_in_one_rank

    plan, plan_path = planned(tmp_path, "format=bin", "workload.samples=40", "workload.samples_per_file=10")
    generate_here(plan_path)
    alone = files_digest(plan)
    clear(plan)
    forked = []
    run = writers_mod.run_writers
    monkeypatch.setattr(writers_mod, "usable_cores", lambda: 2)
    monkeypatch.setattr(writers_mod, "run_writers", lambda n, *a: forked.append(n) or run(n, *a))
    generate_in_one_rank(_OneRank(), plan_path)
    assert forked == [2] and files_digest(plan) == alone
    assert (Path(plan.directory) / VERIFIED).exists()
    clear(plan)
    os.mkdir(plan.file_path(1))  # a file that cannot be written
    with pytest.raises(SystemExit):
        generate_in_one_rank(_OneRank(), plan_path)
    assert "rank 0: dataset generation failed: DatasetError: generation writer 1 of 2" in capsys.readouterr().err


def test_write_behind_queues_whole_pages_and_keeps_three_ranges_in_flight(tmp_path, monkeypatch):
    """RangeWriteBehind queues each write's whole pages only (a page the write ends inside goes with the next write
    that continues it): a half-written page queued would be dirtied again and written once more, alone, when its
    range is waited for. The oldest range is waited for once more than WRITE_BEHIND_DEPTH are in flight; a write
    elsewhere (another writer's share) starts at its first whole page."""
    import lustre.io as lio

    calls: list[tuple[int, int, int]] = []
    monkeypatch.setattr(lio, "_SYNC_FILE_RANGE", lambda fd, at, n, flags: calls.append((at, n, flags)) or 0)
    page, depth = lio.PAGE, lio.WRITE_BEHIND_DEPTH
    wb = lio.RangeWriteBehind()
    with open(tmp_path / "f", "wb") as f:
        at = 100
        for n in (5000, 3000, 100, 10 * page + 7, 2 * page, page, 3 * page + 1):
            wb(f.fileno(), at, n)
            at += n
        wb(f.fileno(), 50 * page + 10, 2 * page)  # elsewhere: from its first whole page
    queued = [(a, n) for a, n, flags in calls if flags == lio._SYNC_FILE_RANGE_WRITE]
    waited = [(a, n) for a, n, flags in calls if flags == lio._SYNC_FILE_RANGE_WAIT_ALL]
    assert all(a % page == 0 and n % page == 0 and n > 0 for a, n in queued)
    assert queued[0][0] == page  # 100 is inside the first page: not a whole page of it was written
    contiguous = queued[:-1]
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(contiguous))
    assert contiguous[-1][0] + contiguous[-1][1] == at // page * page
    assert queued[-1] == (51 * page, page)
    assert waited == queued[: len(queued) - depth]  # the oldest, once more than depth are in flight, in order
