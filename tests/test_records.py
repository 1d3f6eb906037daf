"""A point's records as types: their JSON form is what run folders and stores already hold, and the outcome is
an Enum read back from that form."""

from __future__ import annotations

import json
import pickle

import pytest

from ddlio.records import (
    FailureRecord,
    Outcome,
    ResultRecord,
    load_run_records,
    read_record,
    record_from_dict,
)
from ddlio.runpaths import RunPaths

POINT = {"point_key": "k1", "format": "hdf5"}


def test_a_result_keeps_every_key_it_was_written_with():
    kernel = {"kind": "ddlio.result", "version": 1, "point_key": "k1", "result_id": "r", "totals": {"iops": 2.0},
              "epochs": [], "nodes": ["n1"]}
    rec = ResultRecord.from_dict(kernel).with_facts(point=POINT, run_dir="/r")
    assert rec.to_dict() == {**kernel, "point": POINT, "run_dir": "/r"}
    assert record_from_dict(rec.to_dict()) == rec and rec.outcome is Outcome.COMPLETED


def test_a_failure_has_its_stored_form_and_a_lost_job_reads_back_as_lost():
    rec = FailureRecord.of(POINT, "  job 7 ended COMPLETED without a result\nlog tail  ", job_state="COMPLETED",
                           run_dir="/r", outcome=Outcome.LOST)
    d = rec.to_dict()
    assert set(d) == {"kind", "point_key", "point", "error", "job_state", "run_dir", "finished_utc", "outcome"}
    assert d["outcome"] == "lost"
    assert d["kind"] == "ddlio.failure" and d["error"] == "job 7 ended COMPLETED without a result\nlog tail"
    assert record_from_dict(d) == rec and pickle.loads(pickle.dumps(rec)) == rec
    assert FailureRecord.of(POINT, "KernelError: boom").outcome is Outcome.FAILED
    assert len(FailureRecord.of(POINT, "x" * 5000).error) == 4000


def test_a_stored_rows_outcome():
    assert Outcome.of_stored("completed", None) is Outcome.COMPLETED
    assert Outcome.of_stored("failed", "job 1 ended TIMEOUT without a result: time limit") is Outcome.LOST
    assert Outcome.of_stored("failed", "LaunchError: kernel step failed") is Outcome.FAILED
    assert Outcome.of_stored("submitted", None) is None
    # the stored outcome decides where there is one, whatever the text says
    assert Outcome.of_stored("failed", "the point's reader said: without a result", "failed") is Outcome.FAILED
    assert Outcome.of_stored("failed", "killed", "lost") is Outcome.LOST


def test_the_outcome_is_written_not_read_from_the_text():
    """A job's own failure whose error happens to hold the driver's words stays FAILED; a record written before
    outcomes were (no ``outcome`` key) is read from its text."""
    rec = FailureRecord.of(POINT, "ValueError: a line without a result in it")
    assert record_from_dict(rec.to_dict()).outcome is Outcome.FAILED
    old = {k: v for k, v in FailureRecord.of(POINT, "job 3 ended FAILED without a result").to_dict().items()
           if k != "outcome"}
    assert record_from_dict(old).outcome is Outcome.LOST
    with pytest.raises(ValueError):
        record_from_dict({**rec.to_dict(), "outcome": "completed"})


def test_a_run_folders_records(tmp_path):
    paths = RunPaths(tmp_path / "a")
    paths.root.mkdir()
    assert read_record(paths.root) is None
    paths.failure.write_text(json.dumps(FailureRecord.of(POINT, "boom").to_dict()))
    assert isinstance(read_record(paths.root), FailureRecord)
    (tmp_path / "b").mkdir()
    RunPaths(tmp_path / "b").result.write_text("{not json")
    assert [r["kind"] for r in load_run_records(tmp_path)] == ["ddlio.failure"]
