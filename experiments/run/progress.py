"""What a sweep did and says as it goes: :class:`SweepReport` (the counts, the failures, each point's last
outcome) and the line each outcome prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ddlio.evidence import AU_FLOOR, MIN_IO_S, stripe_unapplied, too_short
from ddlio.identity import cache_text, labels
from ddlio.records import ResultRecord


@dataclass
class SweepReport:
    """What one call of :func:`~experiments.run.driver.launch` did."""

    total: int
    skipped: int = 0
    not_retried: int = 0
    submitted: int = 0
    reattached: int = 0
    completed: int = 0
    failed: int = 0
    still_running: int = 0
    #: points another live driver was measuring, whose outcome this call waited for and reports as its own
    followed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    #: each point's last outcome in this call (point key -> completed | failed); the exit status follows it
    final: dict[str, str] = field(default_factory=dict)
    #: each point's label among this call's points (:func:`point_labels`): repetitions alone share one
    labels: dict[str, str] = field(default_factory=dict)

    def label(self, spec: Any) -> str:
        """``spec``'s label among this call's points (its own paper label if it was not among them)."""
        return self.labels.get(spec.point_key, spec.label)

    @property
    def failed_points(self) -> list[str]:
        """Points whose last outcome in this call is a failure (a LOST point measured again is not one)."""
        return [k for k, v in self.final.items() if v != "completed"]


def point_labels(points: Sequence[Any]) -> dict[str, str]:
    """Point key -> label (:func:`ddlio.identity.labels`) of ``points`` (PointSpecs shown together)."""
    configs = [p.to_dict() for p in points]
    return {c["point_key"]: lab for c, lab in zip(configs, labels(configs), strict=True)}


def _cache(policy: Any, state: Any, fs_type: Any, note: Any = None) -> str:
    """``cache cold (verified)``, ``cache storage_cold (...)``, ``cache unknown (asked cold): why``."""
    return "cache " + cache_text(policy, state, fs_type, note)


def result_line(record: ResultRecord) -> str:
    """``812.3 MiB/s, 6498 IOPS, cache cold (verified)``: a measured point's totals, the cache said as the point
    asked for it (``storage_cold``) and why it is ``unknown`` when it is."""
    t, point = record.totals, record.point
    if "bandwidth_mib_s" not in t:  # a workload kind beyond train: its line, else its metrics (WorkloadKind.record)
        if record.fields.get("line"):
            return str(record.fields["line"])
        return ", ".join(f"{m['name']} {m['value']:.4g}{' ' + m['unit'] if m.get('unit') else ''}"
                         for m in record.fields.get("metrics") or ()) or "measured"
    notes = [e.get("cache_note") for e in record.fields.get("epochs", []) if isinstance(e, dict)]
    return (f"{t['bandwidth_mib_s']:.1f} MiB/s, {t['iops']:.0f} IOPS, " + au_words(t.get("au"), point)
            + _cache(point.get("cache"), t.get("cache"), point.get("fs_type"), next((n for n in notes if n), None))
            + "".join(f"; warning: {w}" for w in trust_warnings(record)))


def au_words(au: Any, point: dict[str, Any]) -> str:
    """``AU 0.93 (fed, ≥ 0.90), `` for a point with a compute time (``point``: its stored form; AU 0-1 against its
    ``au_floor``), "" for one without (its AU is 0 by construction)."""
    if au is None or au != au or not float(point.get("compute_time") or 0) > 0:
        return ""
    floor = float(point.get("au_floor", AU_FLOOR))
    word = f"fed, ≥ {floor:.2f}" if float(au) >= floor else f"starved, < {floor:.2f}"
    return f"AU {float(au):.2f} ({word}), "


def trust_warnings(record: ResultRecord) -> list[str]:
    """Why a measured point is not to be trusted, as its line says it (the reasons :mod:`analysis.validity` stores
    as ``invalid``, by the same rules of :mod:`ddlio.evidence`): timed I/O below :data:`MIN_IO_S`, a stripe count
    asked for on a file system that does not stripe."""
    t, out = record.totals, []
    io = t.get("io_time_slowest_s")
    if too_short(io):
        out.append(f"timed I/O {float(io) * 1000:.3g} ms is under the {MIN_IO_S} s floor: too short to trust "
                   "(invalid; grow workload.samples or workload.epochs)")
    layout = record.fields.get("layout") or {}
    asked = layout.get("requested") or {}
    count = asked.get("stripe_count", record.point.get("stripe_count"))
    if stripe_unapplied(count, asked.get("stripe_size", record.point.get("stripe_size")), layout.get("applicable")):
        fs = (record.fields.get("fs") or {}).get("type") or record.point.get("fs_type") or "this file system"
        out.append(f"stripe={count} not applied: {fs} does not stripe (invalid; left out of best and the guidelines)")
    return out


def adopted_line(row: dict[str, Any]) -> str:
    """The same for a point another driver measured (its store row)."""
    bw, iops = row.get("bandwidth_mib_s") or 0.0, row.get("iops") or 0.0
    cache = _cache(row.get("cache_policy"), row.get("cache"), row.get("fs_type"))
    return f"{bw:.1f} MiB/s, {iops:.0f} IOPS, {cache} (measured by another driver)"


def first_line(error: str) -> str:
    """The headline of an error text."""
    lines = error.strip().splitlines()
    return lines[0] if lines else "unknown error"


