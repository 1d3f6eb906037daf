"""``python -m analysis diagnose``: coded I/O findings with thresholds and fixes, for every configuration of
emulated points and every observed run (imported Darshan log) in the store.

- :mod:`~analysis.diagnose.thresholds`: the limits, a settings file as Drishti's ``--config``;
- :mod:`~analysis.diagnose.findings` and :mod:`~analysis.diagnose.dl`: one small function per finding;
- :mod:`~analysis.diagnose.sources`: the subjects read from the store; :mod:`~analysis.diagnose.darshan`: what a
  Darshan log gives, counted as Drishti counts it;
- :mod:`~analysis.diagnose.render`: text, JSON, CSV and HTML; :mod:`~analysis.diagnose.cli`: the command.
"""

from __future__ import annotations

import dataclasses

from analysis.diagnose.dl import FINDINGS as _DL
from analysis.diagnose.findings import DRISHTI
from analysis.diagnose.findings import FINDINGS as _IO
from analysis.diagnose.model import EpochTable, Finding, Level, Subject
from analysis.diagnose.thresholds import Thresholds

#: every finding, in the order shown
ALL_FINDINGS = (*_IO, *_DL)

__all__ = ["ALL_FINDINGS", "DRISHTI", "Diagnosis", "Finding", "Level", "Subject", "Thresholds", "diagnose_subject"]


@dataclasses.dataclass
class Diagnosis:
    """The findings about one subject (those that apply; level ok where quiet)."""

    subject: Subject
    findings: list[Finding]

    @property
    def worst(self) -> Level:
        return max((f.level for f in self.findings), default=Level.OK)

    @property
    def reproduce(self) -> str:
        """Observed runs with a finding at warn or above: the commands that emulate the run as a ddlio sweep, to
        measure a fix before changing the job ("" otherwise)."""
        return self.subject.repro if self.worst >= Level.WARN else ""


def diagnose_subject(s: Subject, t: Thresholds | None = None) -> Diagnosis:
    """Every finding that applies to ``s``, with the thresholds ``t`` (default: :class:`Thresholds`)."""
    t = t or Thresholds()
    held = s.epochs
    if isinstance(held, EpochTable):  # made objects once for all the findings, then held compactly again
        s.epochs = list(held)
    try:
        return Diagnosis(s, [f for fn in ALL_FINDINGS if (f := fn(s, t)) is not None])
    finally:
        s.epochs = held
