"""Darshan logs of real applications in the store: the real logs shipped inside the ``darshan`` wheel, imported
through the command line, checked against pydarshan's own accumulator."""

from __future__ import annotations

import argparse
import sqlite3
import warnings
from pathlib import Path

import pytest

darshan = pytest.importorskip("darshan", reason="pydarshan is not installed: pip install 'ddlio[darshan]'")

from analysis import import_darshan  # noqa: E402
from analysis.__main__ import main as analysis_main  # noqa: E402
from analysis.query import analysis_frame, summary_frame  # noqa: E402
from analysis.report import build_report  # noqa: E402
from ddlio.store import StoreReader  # noqa: E402
from helpers import point  # noqa: E402

BASE = Path(darshan.__file__).parent
LOGS = sorted([*BASE.glob("examples/example_logs/*.darshan"), *BASE.glob("tests/input/*.darshan")])


def darshans_own(log: Path) -> tuple[int, float] | None:
    """(POSIX records, agg_perf_by_slowest) as pydarshan's accumulator derives them; None without POSIX."""
    from darshan.backend.cffi_backend import accumulate_records

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = darshan.DarshanReport(str(log), read_all=True)
        if "POSIX" not in r.records or len(r.records["POSIX"]) == 0:
            return None
        frames = r.records["POSIX"].to_df()
        acc = accumulate_records(frames, "POSIX", r.metadata["job"]["nprocs"])
    return len(frames["counters"]), float(acc.derived_metrics.agg_perf_by_slowest)


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    import_darshan.setup_parser(parser)
    return import_darshan.main(parser.parse_args(list(argv)))


def test_the_wheel_ships_logs_with_and_without_posix_records():
    assert len(LOGS) >= 10 and any(p.name == "noposix.darshan" for p in LOGS)


def test_every_example_log_is_stored_with_darshans_own_agg_perf_by_slowest(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert run(*map(str, LOGS), "--db", str(db)) == 0
    out = capsys.readouterr().out
    assert "noposix.darshan" in out and "missing from this log: POSIX records" in out
    df = summary_frame(StoreReader(str(db)))
    assert set(df["source"]) == {"darshan"} and set(df["status"]) == {"completed"}
    with sqlite3.connect(db) as c:
        stored = dict(c.execute("select run_dir, agg_perf_by_slowest_mib_s from points").fetchall())
    with_posix = 0
    for log in LOGS:
        own = darshans_own(log)
        got = stored.get(str(log.resolve()))
        if own is None:  # imported what it has: the job, no POSIX figures
            assert got is None
            continue
        if got is None:  # the same log (same bytes) shipped twice: stored once, under the first path
            continue
        with_posix += 1
        assert got == pytest.approx(own[1], rel=1e-3), log.name
    assert with_posix >= 6
    # importing again stores nothing twice
    n = len(df)
    assert run(str(LOGS[0]), "--db", str(db)) == 0 and "already in the store" in capsys.readouterr().out
    assert len(summary_frame(StoreReader(str(db)))) == n


def test_a_shared_file_log_is_shared_with_its_size_histogram(tmp_path):
    db = tmp_path / "r.db"
    log = BASE / "examples/example_logs/ior_hdf5_example.darshan"
    assert run(str(log), "--db", str(db)) == 0
    row = summary_frame(StoreReader(str(db))).iloc[0]
    assert (row.access, row.format, row.source) == ("shared", "hdf5", "darshan")
    assert row.posix_reads > 0 and row.posix_bytes_read > 0
    with sqlite3.connect(db) as c:
        hist, label = c.execute("select posix_size_hist, label from points").fetchone()
    assert sum(eval(hist)) == row.posix_reads and label.startswith("observed:")
    lustre = BASE / "examples/example_logs/example.darshan"
    assert run(str(lustre), "--db", str(db)) == 0
    with sqlite3.connect(db) as c:
        assert c.execute("select stripe_count, stripe_size from points where run_dir = ?",
                         (str(lustre.resolve()),)).fetchone() == (24, 1048576)


def test_observed_points_stay_out_of_the_emulated_analysis_and_are_in_the_report(tmp_path):
    from analysis.report import build_report

    db = tmp_path / "r.db"
    log = BASE / "examples/example_logs/ior_hdf5_example.darshan"
    assert run(str(log), "--db", str(db)) == 0
    store = StoreReader(str(db))
    assert analysis_frame(store).empty  # figures and guidelines compare sweep points only
    html = build_report(store)
    assert "Observed runs (1; imported Darshan logs, not emulated)" in html and "observed: " in html


def test_a_workload_preset_derived_from_a_log_is_a_valid_workload(tmp_path, capsys):
    import yaml

    out = tmp_path / "conf" / "app.yaml"
    log = BASE / "examples/example_logs/ior_hdf5_example.darshan"
    assert run(str(log), "--db", str(tmp_path / "r.db"), "--workload-out", str(out)) == 0
    assert "assumptions:" in capsys.readouterr().out
    text = out.read_text()
    assert "Assumptions:" in text and "access=shared" in text
    w = yaml.safe_load(text)
    spec = point(tmp_path, *(f"workload.{k}={w[k]}" for k in ("samples", "sample_size", "samples_per_file",
                                                              "epochs", "compute_time", "shuffle")))
    assert spec.workload.samples == w["samples"] and spec.workload.sample_size == w["sample_size"]


def test_a_file_that_is_not_a_darshan_log_is_bad_input_and_stores_nothing(tmp_path, capsys):
    bad = tmp_path / "not.darshan"
    bad.write_bytes(b"hello")
    db = tmp_path / "r.db"
    assert analysis_main(["import-darshan", str(bad), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "is not a readable Darshan log" in err and "Traceback" not in err
    assert not db.exists()
    assert analysis_main(["import-darshan", str(LOGS[0]), "--db", str(db), "--workload-out", "x.txt"]) == 2
    assert "must name a .yaml file" in capsys.readouterr().err and not db.exists()


def cut_log(tmp_path: Path, n: int = 2000) -> Path:
    """A real log cut to its first ``n`` bytes, as a job killed while writing it, or a copy cut short, leaves it."""
    cut = tmp_path / "cut.darshan"
    cut.write_bytes((BASE / "examples/example_logs/ior_hdf5_example.darshan").read_bytes()[:n])
    return cut


def test_a_truncated_log_is_refused_naming_what_failed_and_stores_nothing(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert analysis_main(["import-darshan", str(cut_log(tmp_path)), "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"error: import-darshan: {tmp_path / 'cut.darshan'} is damaged or truncated: libdarshan failed to read "
        "module(s) DXT_MPIIO, DXT_POSIX, H5D, LUSTRE, STDIO; nothing was stored (--partial keeps what could be "
        "read, labelled partial)"]
    assert "failed to read module" not in out  # libdarshan's own lines are captured, not shown
    assert not db.exists()


def _observed(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute("select label, error, run_dir from points where source = 'darshan'").fetchall()


def test_a_partial_log_kept_on_request_is_labelled_and_one_job_is_one_observed_run(tmp_path, capsys):
    db, cut = tmp_path / "r.db", cut_log(tmp_path)
    whole = BASE / "examples/example_logs/ior_hdf5_example.darshan"
    assert analysis_main(["import-darshan", str(cut), "--db", str(db), "--partial"]) == 0
    assert "a partial log: libdarshan failed to read module(s) DXT_MPIIO" in capsys.readouterr().out
    [(label, error, _)] = _observed(db)
    assert label == "observed (partial log): ior job 32324925 (4 ranks)"
    assert error.startswith("partial Darshan log, kept with --partial: libdarshan failed to read module(s)")
    assert summary_frame(StoreReader(str(db))).label.tolist() == [label]  # summary says so too
    assert "observed (partial log): ior job 32324925" in build_report(StoreReader(str(db)))  # and the report
    # the whole log of the same job replaces the partial one; the job imported again, or a copy of its log, or
    # the partial log once more, is still that one observed run
    assert run(str(whole), "--db", str(db)) == 0
    assert "replaces the partial log of this job" in capsys.readouterr().out
    copy = tmp_path / "copy.darshan"
    copy.write_bytes(whole.read_bytes())
    assert run(str(whole), str(copy), "--db", str(db)) == 0
    assert capsys.readouterr().out.count("this job is already in the store") == 2
    assert run(str(cut), "--db", str(db), "--partial") == 0
    assert "this job's whole log is already in the store and stays" in capsys.readouterr().out
    assert _observed(db) == [("observed: ior job 32324925 (4 ranks)", None, str(whole))]


def test_a_run_stored_by_an_earlier_ddlio_keyed_by_the_logs_bytes_is_found_by_its_job(tmp_path, capsys):
    from analysis.darshan_log import read_log
    from ddlio.store import open_store_for_writing

    db = tmp_path / "r.db"
    log = BASE / "examples/example_logs/ior_hdf5_example.darshan"
    assert open_store_for_writing(str(db)).record_observed(read_log(log)) == "new"  # no observed_key: as before
    [(old_key,)] = sqlite3.connect(db).execute("select point_key from points").fetchall()
    assert run(str(log), "--db", str(db)) == 0
    assert "this job is already in the store" in capsys.readouterr().out
    assert sqlite3.connect(db).execute("select point_key from points").fetchall() == [(old_key,)]
