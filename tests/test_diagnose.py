"""``python -m analysis diagnose`` on emulated points: every finding fires on a point built to fire it and stays quiet
on one built to keep it quiet.

Two real tiny points (HDF5, sample shuffle, sieve buffer 64 KiB and 16 KiB) are measured once for the module; the
other subjects are SYNTHETIC FIXTURES: one real result record, copied and altered (layout applied, rank times,
epochs, counters), stored through the store's own writer. They stand for what a point would store where this
machine cannot measure it (a Lustre layout, stragglers, a slow compute step), never for a measurement of it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from analysis.__main__ import main as analysis_main
from analysis.diagnose import Level, diagnose_subject
from analysis.diagnose.cli import collect
from analysis.diagnose.sources import emulated_subjects
from analysis.diagnose.thresholds import Thresholds
from conftest import SWEEP, run_cli
from ddlio.store import open_store_for_reading, open_store_for_writing


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two real points: hdf5, shuffle=sample, sieve_buf_size 65536 (the default) and 16384. Returns the store path
    and the result record of the 16384 point (the template of the synthetic fixtures)."""
    tmp = tmp_path_factory.mktemp("diagnose")
    r = run_cli([str(SWEEP), "-m", "workload=tiny", "format=hdf5", "workload.shuffle=sample",
                 "format.sieve_buf_size=65536,16384", f"data_root={tmp / 'data'}", f"db={tmp / 'r.db'}"], tmp, tmp)
    assert r.returncode == 0, r.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in sorted((tmp / "data").rglob("result.json"))]
    template = next(rec for rec in records if rec["point"]["format_options"]["sieve_buf_size"] == 16384)
    return {"db": str(tmp / "r.db"), "template": template, "tmp": tmp}


def findings_of(db: str, **thresholds: Any) -> dict[str, dict[str, Any]]:
    """first point key -> code -> finding, for every configuration in the store."""
    diags = collect(open_store_for_reading(db), None, Thresholds(**thresholds))
    return {d.subject.points[0]: {f.code: f for f in d.findings} for d in diags}


def variant(template: dict[str, Any], n: int, point: dict | None = None, totals: dict | None = None,
            layout: dict | None = None, epoch: dict | None = None, ranks: list[dict] | None = None) -> dict[str, Any]:
    """A SYNTHETIC copy of a real result record: its own key and label, with the fields given replaced."""
    rec = copy.deepcopy(template)
    key = f"synthetic{n:04d}"
    rec["point"].update(point or {}, point_key=key, seed=1000 + n)
    rec.update(point_key=key, result_id=key)
    rec["totals"].update(totals or {})
    if layout is not None:
        rec["layout"] = layout
    for e in rec["epochs"]:
        e.update(epoch or {})
        if ranks is not None:
            e["ranks"] = [{**e["ranks"][0], **r} for r in ranks]
    return rec


def store_variants(tmp: Path, records: list[dict[str, Any]]) -> str:
    db = str(tmp / "synthetic.db")
    store = open_store_for_writing(db)
    for rec in records:
        assert store.record(rec)
    return db


def lustre(count: int, size: int = 1048576) -> dict[str, Any]:
    """The layout record a Lustre point stores (the values lfs getstripe read back), SYNTHETIC here."""
    return {"applicable": True, "fs_type": "lustre", "requested": {"stripe_count": count, "stripe_size": size},
            "applied": {"stripe_count": count, "stripe_size": size}, "files": {}, "reason": ""}


def test_hdf5_default_sieve_buffer_under_sample_shuffle_amplifies_and_16384_silences_it(real):
    found = findings_of(real["db"])
    by_sieve = {}
    for d in collect(open_store_for_reading(real["db"])):
        by_sieve[d.subject.format_options["sieve_buf_size"]] = {f.code: f for f in d.findings}
    loud, quiet = by_sieve[65536]["amplified-reads"], by_sieve[16384]["amplified-reads"]
    assert loud.level == Level.WARN and loud.value > 1.5 and loud.fix == ["format.sieve_buf_size=16384"]
    assert quiet.level == Level.OK and quiet.value < 1.1
    assert len(found) == 2
    # random order under shuffle=sample is the loader's: expected, info, where Drishti would call it a problem
    for codes in by_sieve.values():
        assert codes["random-reads"].level == Level.INFO


SYNTH: list[tuple[str, str, dict, dict]] = [
    # code, expected level, firing variant, quiet variant (keyword arguments of variant())
    ("small-reads", "high", {"totals": {"posix_reads": 5000, "posix_size_hist": [0, 0, 5000, 0, 0, 0, 0, 0, 0, 0]}},
     {"totals": {"posix_reads": 5000, "posix_size_hist": [0, 0, 0, 0, 0, 5000, 0, 0, 0, 0]}}),
    ("shared-small-reads", "high",
     {"totals": {"posix_reads": 5000, "posix_size_hist": [0, 0, 5000, 0, 0, 0, 0, 0, 0, 0]}},
     {"totals": {"posix_reads": 5000, "posix_size_hist": [0, 0, 0, 0, 0, 5000, 0, 0, 0, 0]}}),
    ("misaligned", "high", {"layout": lustre(1), "point": {"sample_size": 3072}},
     {"layout": lustre(1, 65536), "point": {"sample_size": 65536}}),
    ("readahead", "warn", {"totals": {"os_read_bytes": 10_000_000}}, {}),
    ("random-reads", "info", {}, {"point": {"shuffle": "none"}}),
    ("straggler-time", "warn", {"ranks": [{"io_time_s": 1.0}, {"io_time_s": 0.4}]},
     {"ranks": [{"io_time_s": 1.0}, {"io_time_s": 0.98}]}),
    ("stripe-layout", "warn", {"layout": lustre(8)}, {"layout": lustre(1)}),
    ("au-low", "high", {"epoch": {"au": 0.5}, "ranks": [{"compute_time_s": 0.5, "read_time_s": 0.4,
                                                         "meta_time_s": 0.01, "wall_time_s": 1.0}]},
     {"epoch": {"au": 0.95}, "ranks": [{"compute_time_s": 0.95, "read_time_s": 0.04, "wall_time_s": 1.0}]}),
    ("first-read", "warn", {"epoch": {"first_read": True}}, {"epoch": {"first_read": False}}),
    ("cache-not-cold", "warn", {"epoch": {"cache": "unknown", "cache_note": "mincore: not evicted"}},
     {"epoch": {"cache": "cold"}}),
    ("metadata-heavy", "warn", {"epoch": {"meta_ops": 128}}, {}),
]


@pytest.fixture(scope="module")
def synthetic(real) -> dict[str, dict[str, Any]]:
    """Every SYNTHETIC variant of SYNTH in one store: label -> code -> finding."""
    recs = []
    for i, (_, _, loud, quiet) in enumerate(SYNTH):
        recs += [variant(real["template"], 2 * i, **loud), variant(real["template"], 2 * i + 1, **quiet)]
    return findings_of(store_variants(real["tmp"], recs))


@pytest.mark.parametrize(("code", "level", "loud", "quiet"), SYNTH, ids=[s[0] for s in SYNTH])
def test_every_finding_fires_on_its_fixture_and_stays_quiet_on_the_other(synthetic, code, level, loud, quiet):
    i = [s[0] for s in SYNTH].index(code)
    fired, calm = synthetic[f"synthetic{2 * i:04d}"][code], synthetic[f"synthetic{2 * i + 1:04d}"][code]
    assert str(fired.level) == level, fired
    assert calm.level == Level.OK, calm
    if fired.level >= Level.WARN:
        assert fired.value is not None and fired.threshold is not None
        assert fired.fix or fired.snippet or fired.evidence, fired


def test_what_the_findings_recommend_is_in_ddlios_terms(real, synthetic):
    i = [s[0] for s in SYNTH].index
    stripe = synthetic[f"synthetic{2 * i('stripe-layout'):04d}"]["stripe-layout"]
    assert stripe.fix[0] == "stripe=1" and "lfs setstripe -c 1" in stripe.snippet  # 2 files of 512 KiB, 8 OSTs
    au = synthetic[f"synthetic{2 * i('au-low'):04d}"]["au-low"]
    assert au.counted["bound"] == "reads" and "workload.read_threads=4" in au.fix
    mis = synthetic[f"synthetic{2 * i('misaligned'):04d}"]["misaligned"]
    reads = real["template"]["totals"]["posix_reads"]  # 3 KiB samples end to end: 1 in 1024 starts on a MiB
    assert mis.counted == {"misaligned": round(reads * (1 - 1024 / 1048576)), "total": reads}
    # 1.125 MiB: a multiple of 3072 and of 64 KiB, so no sample crosses a stripe
    assert mis.fix == ["stripe_size=1179648", "format.alignment=1048576"] and "lfs setstripe" in mis.snippet
    strag = synthetic[f"synthetic{2 * i('straggler-time'):04d}"]["straggler-time"]
    assert "rank 0" in strag.evidence[0] and "epoch 0" in strag.evidence[0]


def test_samples_inside_one_stripe_start_off_its_boundary_but_are_only_info(real, tmp_path):
    rec = variant(real["template"], 901, layout=lustre(1))  # 16 KiB samples, 1 MiB stripes: 1 in 64 aligned
    f = findings_of(store_variants(tmp_path, [rec]))["synthetic0901"]["misaligned"]
    assert f.level == Level.INFO and f.value > 0.9 and not f.fix and "none crosses" in f.message


def test_a_shared_file_read_by_many_ranks_over_one_stripe_is_striped_too_narrow(real, tmp_path):
    rec = variant(real["template"], 900, layout=lustre(1), point={"ranks": 32, "ppn": 32})
    rec["dataset"]["disk_bytes"] = 2 * 64 * 1048576  # two 64 MiB files
    found = findings_of(store_variants(tmp_path, [rec]))["synthetic0900"]
    f = found["stripe-layout"]
    assert f.level == Level.WARN and f.fix == ["stripe=32"] and f.value == 32


def test_repetitions_are_one_configuration_and_striping_not_applied_is_not_judged(real, tmp_path):
    a = variant(real["template"], 1, layout=lustre(8))
    b = copy.deepcopy(a)
    b["point"].update(repeat=1, point_key="synthetic-rep1")
    b.update(point_key="synthetic-rep1", result_id="synthetic-rep1")
    db = store_variants(tmp_path, [a, b, variant(real["template"], 2)])
    subjects = emulated_subjects(open_store_for_reading(db), ["synthetic0001", "synthetic-rep1", "synthetic0002"])
    assert sorted(len(s.points) for s in subjects) == [1, 2]
    unstriped = next(s for s in subjects if len(s.points) == 1)
    codes = {f.code for f in diagnose_subject(unstriped).findings}
    assert "stripe-layout" not in codes and "misaligned" not in codes  # ext4's layout: striping not applied


@pytest.mark.parametrize("chosen", [False, True])
def test_two_stored_forms_of_one_configuration_are_one_subject(real, tmp_path, chosen):
    """A repetition stored by a newer ddlio carries a knob at its default that the older one lacked: another
    stored config (another digest), the same configuration. Both are one subject, with both points' epochs."""
    from ddlio.identity import DEFAULTS

    a = variant(real["template"], 1)
    b = copy.deepcopy(a)
    b["point"].update(repeat=1, point_key="synthetic-rep1", **{k: v for k, v in DEFAULTS.items()
                                                               if k not in a["point"]})
    assert b["point"].keys() != a["point"].keys()
    b.update(point_key="synthetic-rep1", result_id="synthetic-rep1")
    db = store_variants(tmp_path, [a, b, variant(real["template"], 2, point={"batch_size": 2})])
    keys = ["synthetic0001", "synthetic-rep1", "synthetic0002"] if chosen else None
    subjects = emulated_subjects(open_store_for_reading(db), keys)
    assert sorted(len(s.points) for s in subjects) == [1, 2]
    two = next(s for s in subjects if len(s.points) == 2)
    assert two.points == sorted(["synthetic0001", "synthetic-rep1"])
    assert [e.point_key for e in two.epochs] == sorted(["synthetic0001", "synthetic-rep1"] * len(a["epochs"]))
    assert two.reads == 2 * next(s for s in subjects if len(s.points) == 1).reads


def test_the_command_text_json_csv_html_thresholds_and_fail_on(real, tmp_path, capsys):
    db = real["db"]
    assert analysis_main(["diagnose", "--db", db]) == 0
    text = capsys.readouterr().out
    assert "WARN amplified-reads" in text and "format.sieve_buf_size=16384" in text
    assert analysis_main(["diagnose", "--db", db, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["worst"] for d in data} == {"warn", "info"}
    assert analysis_main(["diagnose", "--db", db, "--format", "csv"]) == 0
    head, *lines = capsys.readouterr().out.splitlines()
    assert head.startswith("kind,subject,label,code,drishti,level") and any(",amplified-reads,," in x for x in lines)
    assert analysis_main(["diagnose", "--db", db, "--format", "html"]) == 0
    assert "<h2 id='diagnosis'>" in capsys.readouterr().out
    assert analysis_main(["diagnose", "--db", db, "--fail-on", "warn"]) == 3
    assert analysis_main(["diagnose", "--db", db, "--fail-on", "high"]) == 0
    assert analysis_main(["diagnose", "--db", db, "--where", "amplification < 1.1", "--fail-on", "warn"]) == 0
    capsys.readouterr()
    cfg = tmp_path / "t.yaml"
    cfg.write_text("amplification: 5.0\nsmall:\n  requests: 0.2\n")
    assert analysis_main(["diagnose", "--config", str(cfg), "--thresholds"]) == 0
    shown = capsys.readouterr().out
    assert "amplification" in shown and " 5.0 " in shown and "small_requests" in shown and " 0.2 " in shown
    assert analysis_main(["diagnose", "--db", db, "--config", str(cfg), "--fail-on", "warn"]) == 0


@pytest.mark.parametrize(("text", "says"), [
    ("amplificaton: 2\n", "unknown threshold(s) amplificaton; valid: small_bytes"),
    ("au_min: 3\n", "au_min must be a fraction"),
    ("small_bytes: big\n", "small_bytes = 'big' is not a valid int"),
    ("- 1\n", "must hold a mapping"),
])
def test_a_bad_settings_file_is_one_message_and_exit_2(tmp_path, capsys, text, says):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    assert analysis_main(["diagnose", "--config", str(cfg), "--thresholds"]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_bad_format_or_a_missing_store_is_exit_2(tmp_path, capsys):
    assert analysis_main(["diagnose", "--format", "xml", "--db", str(tmp_path / "r.db")]) == 2
    assert "text, json, csv, html" in capsys.readouterr().err
    assert analysis_main(["diagnose", "--db", str(tmp_path / "none.db")]) == 2
    assert not (tmp_path / "none.db").exists()


def test_the_report_has_the_diagnosis_section(real, tmp_path, capsys):
    out = tmp_path / "report.html"
    assert analysis_main(["report", "--db", real["db"], "--out", str(out)]) == 0
    page = out.read_text()
    assert "<h2 id='diagnosis'>Diagnosis</h2>" in page and "amplified-reads" in page
    assert "format.sieve_buf_size=16384" in page
