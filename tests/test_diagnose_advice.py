"""diagnose's advice fits its subject, and its severity what the subject's accelerator saw: SYNTHETIC subjects
(the facts a configuration of points reduces to), built here, never measurements."""

from __future__ import annotations

import itertools

import pytest

from analysis.diagnose import Level, Subject, diagnose_subject
from analysis.diagnose.cli import exit_status
from analysis.diagnose.model import EpochFacts
from analysis.diagnose.render import to_json, to_text

SMALL_HIST = {"reads": 5000, "small_reads": 5000}  # every read below 1 MiB, above the floor of 1000


def subject(key: str = "cfg-a", **kw) -> Subject:
    base = {"kind": "configuration", "key": key, "label": key, "points": ["p1"], "ranks": 1, "access": "fpp",
            "format": "hdf5", "sample_size": 3072, "num_files": 2, "file_bytes": 524288, "reader": "native",
            "fs_type": "ext4"}
    return Subject(**{**base, **kw})


def epoch(au: float) -> EpochFacts:
    return EpochFacts(point_key="p1", epoch=0, samples=100, meta_ops=2, au=au, wall_s=1.0, read_s=1 - au, meta_s=0.0,
                      compute_s=au, rank_io_s=[1 - au], first_read=False, cache="cold", cache_note="")


def codes(s: Subject) -> dict:
    return {f.code: f for f in diagnose_subject(s).findings}


@pytest.mark.parametrize(("fmt", "reader", "fs"), list(itertools.product(
    ("hdf5", "tfrecord", "npz", "npy", "jpeg"), ("native", "tf", "torch"), ("ext4", "lustre", "cephfs"))))
def test_every_finding_advises_in_the_terms_of_its_format_loader_and_file_system(fmt, reader, fs):
    layout = {"stripe_count": 8, "stripe_size": 1048576, "alignment": 1048576} if fs != "ext4" else {}
    s = subject(format=fmt, reader=reader, fs_type=fs, app_bytes=100, fs_bytes=1000, storage_bytes=10_000,
                **SMALL_HIST, **layout)
    found = codes(s)
    assert found["small-reads"].level == Level.HIGH and found["readahead"].level == Level.WARN
    advice = "\n".join(f.snippet + " " + " ".join(f.fix) for f in found.values())
    assert ("HDF5" in advice or "rdcc" in advice) == (fmt == "hdf5"), advice
    assert ("TFRecordDataset" in advice) == (fmt == "tfrecord"), advice
    assert ("DataLoader" in advice) == (reader == "torch"), advice
    assert ("tf.data:" in advice) == (reader == "tf"), advice
    assert ("lfs setstripe" in advice or "lctl" in advice) == (fs == "lustre"), advice
    assert ("ceph" in advice.lower()) == (fs == "cephfs"), advice
    assert "MPI-IO" not in advice  # ddlio's points are read with POSIX calls: collective MPI-IO is no knob of theirs


def test_small_reads_on_a_fed_accelerator_are_info_and_on_a_starved_one_high():
    fed = codes(subject(epochs=[epoch(0.947)], **SMALL_HIST))["small-reads"]
    starved = codes(subject(epochs=[epoch(0.5)], **SMALL_HIST))["small-reads"]
    assert fed.level == Level.INFO and "accelerator was fed (AU 0.947" in fed.message and not fed.fix
    assert starved.level == Level.HIGH and starved.fix


def test_a_tiny_run_below_the_call_floor_is_too_few_reads_to_judge_not_ok():
    f = codes(subject(reads=40, small_reads=40))["small-reads"]
    assert f.level == Level.INFO and "too few reads to judge" in f.message and f.counted["judged"] is False
    assert codes(subject(reads=40, small_reads=0))["small-reads"].level == Level.OK  # none small: judged ok


def test_reads_without_size_bins_are_not_ok_and_a_fail_on_gate_sees_them():
    d = diagnose_subject(subject(reader="torch", reads=5000, small_reads=0, size_bins=False, access="shared",
                                 shared_reads=5000))
    f = {f.code: f for f in d.findings}
    assert f["small-reads"].level == Level.WARN and "no size bins recorded" in f["small-reads"].message
    assert "shared-small-reads" not in f  # said once, not judged "ok" either
    assert exit_status([d], "warn") == 3
    assert "no size bins recorded" in to_text([d])


def test_the_worst_configuration_is_listed_first():
    calm = diagnose_subject(subject("cfg-calm", label="calm"))
    loud = diagnose_subject(subject("cfg-loud", label="loud", epochs=[epoch(0.5)], **SMALL_HIST))
    text = to_text([calm, loud])
    assert text.index("== loud") < text.index("== calm")
    assert to_json([calm, loud]).index('"cfg-calm"') < to_json([calm, loud]).index('"cfg-loud"')  # store order
