"""A point's outcome as types: the result record (:class:`ResultRecord`), the failure record
(:class:`FailureRecord`) and which of the three outcomes it is (:class:`Outcome`).

The kernel writes the result (``kernel-result.json``), the job adds its facts and writes ``result.json`` or
``failure.json`` (:class:`~ddlio.runpaths.RunPaths`) and returns the same record to the driver (a pickle through
submitit locally); the driver and ``analysis ingest`` read them back. On disk and in the store a record keeps its
JSON form (:meth:`ResultRecord.to_dict`, :meth:`FailureRecord.to_dict`): ``kind`` says which record it is.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from ddlio.runpaths import RECORDS, RunPaths

RESULT_KIND = "ddlio.result"
FAILURE_KIND = "ddlio.failure"
#: the words with which the driver's record of a job that left no record of its own says so, in the first line of
#: its error (``job 42 ended COMPLETED without a result``). Records and stores hold the outcome itself; records and
#: stores written before they did are read from these words (:meth:`Outcome.of_error`): the words stay these
LOST_WORDS = "without a result"
#: the longest error text a failure record keeps (characters, the end of it)
ERROR_CHARS = 4000


def utc_now() -> str:
    """The current UTC time as records write it (``2026-12-01T21:55:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Outcome(str, Enum):
    """How a point's measurement ended: a result, the job's own failure, or lost (the job ended or vanished without
    leaving a record; the driver wrote the failure)."""

    COMPLETED = "completed"
    FAILED = "failed"
    LOST = "lost"

    @classmethod
    def of_error(cls, error: str | None) -> Outcome:
        """The outcome a stored failure's error text tells: LOST for the driver's record of a job that left none."""
        first = (error or "").strip().split("\n", 1)[0]
        return cls.LOST if LOST_WORDS in first else cls.FAILED

    @classmethod
    def of_value(cls, value: str | None, error: str | None) -> Outcome:
        """The outcome a failure wrote (``value``), or, for one written before outcomes were (``value`` None or
        unknown), the one its error text tells."""
        try:
            return cls(value)
        except ValueError:
            return cls.of_error(error)

    @classmethod
    def of_stored(cls, status: str | None, error: str | None, outcome: str | None = None) -> Outcome | None:
        """The outcome of a store's row (``status`` completed / failed, its ``outcome`` as stored, its ``error``
        for a row stored before outcomes were); None while it has none."""
        if status == "completed":
            return cls.COMPLETED
        if status != "failed":
            return None
        if outcome in (cls.FAILED.value, cls.LOST.value):
            return cls(outcome)
        # a stored error keeps only its last ERROR_CHARS characters: the words may be anywhere in what is left
        return cls.LOST if LOST_WORDS in (error or "") else cls.FAILED


@dataclass
class ResultRecord:
    """A measured point: the kernel's record (``result_id``, ``totals``, ``epochs``, ranks, MPI ...) with the job's
    facts (``point``, ``run_dir``, ``env``, ``fs``, ``layout``, ``dataset``, ``point_seconds``) in ``fields``."""

    kind: ClassVar[str] = RESULT_KIND
    outcome: ClassVar[Outcome] = Outcome.COMPLETED

    point_key: str
    #: the run's totals (``bandwidth_mib_s`` in MiB/s, ``iops``, ``io_time_slowest_s`` in s, ``cache`` ...)
    totals: dict[str, Any]
    #: every other key of the record, as written
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def point(self) -> dict[str, Any]:
        return self.fields.get("point") or {}

    @property
    def error(self) -> str:
        return ""

    def with_facts(self, **facts: Any) -> ResultRecord:
        """The record with more of the job's facts (a key given again replaces the old value)."""
        return replace(self, fields={**self.fields, **facts})

    def to_dict(self) -> dict[str, Any]:
        return {**self.fields, "kind": RESULT_KIND, "point_key": self.point_key, "totals": self.totals}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ResultRecord:
        if d.get("kind") != RESULT_KIND or not isinstance(d.get("totals"), dict):
            raise ValueError(f"not a ddlio result record (kind {d.get('kind')!r})")
        rest = {k: v for k, v in d.items() if k not in ("kind", "point_key", "totals")}
        return cls(str(d.get("point_key") or (d.get("point") or {}).get("point_key", "")), d["totals"], rest)


@dataclass
class FailureRecord:
    """A point that could not be measured: its config and the error text (the end of it, :data:`ERROR_CHARS`)."""

    kind: ClassVar[str] = FAILURE_KIND

    point: dict[str, Any]
    error: str
    job_state: str = "FAILED"
    run_dir: str = ""
    finished_utc: str | None = field(default_factory=utc_now)
    #: FAILED (the job's own record) or LOST (the driver's, for a job that left none); written as ``outcome``
    #: (a record written before it was is read from its error text, :meth:`Outcome.of_error`)
    outcome: Outcome = Outcome.FAILED
    #: keys of the stored form this version does not know, kept as read
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, point: dict[str, Any], error: str, job_state: str = "FAILED", run_dir: str = "",
           outcome: Outcome = Outcome.FAILED) -> FailureRecord:
        """The failure of ``point`` now, its error text trimmed to its last :data:`ERROR_CHARS` characters."""
        return cls(point, error.strip()[-ERROR_CHARS:], job_state, run_dir, outcome=outcome)

    @property
    def point_key(self) -> str:
        return str(self.point["point_key"])

    def ended(self, job_id: str, state: str) -> FailureRecord:
        """This failure with the scheduler's account of how job ``job_id`` ended (``state``: CANCELLED, TIMEOUT ...)."""
        return replace(self, job_state=state, error=f"job {job_id} ended {state}: {self.error}")

    def to_dict(self) -> dict[str, Any]:
        return {**self.extra, "kind": FAILURE_KIND, "point_key": self.point_key, "point": self.point,
                "error": self.error, "job_state": self.job_state, "run_dir": self.run_dir,
                "finished_utc": self.finished_utc, "outcome": self.outcome.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FailureRecord:
        if d.get("kind") != FAILURE_KIND or not isinstance(d.get("point"), dict):
            raise ValueError(f"not a ddlio failure record (kind {d.get('kind')!r})")
        known = ("kind", "point_key", "point", "error", "job_state", "run_dir", "finished_utc", "outcome")
        error = str(d.get("error") or "")
        outcome = Outcome.of_value(d.get("outcome"), error)
        if outcome is Outcome.COMPLETED:
            raise ValueError("a failure record whose outcome is 'completed'")
        return cls(d["point"], error, d.get("job_state", "FAILED"), d.get("run_dir", ""),
                   d.get("finished_utc"), outcome, {k: v for k, v in d.items() if k not in known})


Record = ResultRecord | FailureRecord


def record_from_dict(d: Any) -> Record:
    """The record a JSON object holds (``kind``: ddlio.result or ddlio.failure); ValueError for anything else."""
    if not isinstance(d, dict):
        raise ValueError("not a ddlio record (not a JSON object)")
    return ResultRecord.from_dict(d) if d.get("kind") == RESULT_KIND else FailureRecord.from_dict(d)


def read_record(run_dir: str | os.PathLike) -> Record | None:
    """The result or failure record a job left in its run folder, if any (None too while one is being replaced,
    or on a stale handle of a shared file system: look again later)."""
    for p in RunPaths(Path(run_dir)).records:
        try:
            return record_from_dict(json.loads(p.read_text()))
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
    return None


def load_run_records(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """Every result or failure file's JSON object found below ``directory`` (for ``analysis ingest``, which counts
    those that are not ddlio records)."""
    out = []
    for name in RECORDS:
        for p in sorted(Path(directory).rglob(name)):
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):
                continue
    return out
