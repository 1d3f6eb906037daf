"""What a sweep did and says as it goes: :class:`SweepReport` (the counts, the failures, each point's last
outcome) and the line each outcome prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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

    @property
    def failed_points(self) -> list[str]:
        """Points whose last outcome in this call is a failure (a LOST point measured again is not one)."""
        return [k for k, v in self.final.items() if v != "completed"]


def result_line(record: ResultRecord) -> str:
    """``812.3 MiB/s, 6498 IOPS, cache cold``: a measured point's totals."""
    t = record.totals
    return f"{t['bandwidth_mib_s']:.1f} MiB/s, {t['iops']:.0f} IOPS, cache {t['cache']}"


def adopted_line(row: dict[str, Any]) -> str:
    """The same for a point another driver measured (its store row)."""
    bw, iops = row.get("bandwidth_mib_s") or 0.0, row.get("iops") or 0.0
    return f"{bw:.1f} MiB/s, {iops:.0f} IOPS, cache {row.get('cache')} (measured by another driver)"


def first_line(error: str) -> str:
    """The headline of an error text."""
    lines = error.strip().splitlines()
    return lines[0] if lines else "unknown error"


