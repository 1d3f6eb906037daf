"""Observed runs: a Darshan log (read by :mod:`analysis.darshan_log`) stored as a completed point with
``source = darshan``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ddlio.identity import config_digest
from ddlio.store.models import Point, _now
from ddlio.store.rows import RowWriter, _json_safe


class ObservedMixin(RowWriter):
    """The writer's :meth:`record_observed`."""

    def record_observed(self, obs: dict[str, Any]) -> str:
        """Store an observed run (a Darshan log read by :mod:`analysis.darshan_log`) as a completed point with
        ``source = darshan``, keyed by its job (``obs["observed_key"]``: job id, start time, user, ranks, command),
        not by the log's bytes: importing the job again, or a copy of its log, stores nothing new. A partial log
        (``obs["partial"]``) is labelled so; the whole log of a job stored from a partial one replaces it, a
        partial one never replaces a whole one. Rows stored by an earlier ddlio (keyed by the log's bytes) are
        found by their job. Returns ``"new"``, ``"same"`` (already stored), ``"replaced"`` (a partial run by the
        whole log) or ``"kept"`` (the whole run stays; this log is partial). Config columns a log cannot tell are
        0 / ``observed``."""
        key = obs.get("observed_key") or "darshan-" + obs["log_sha256"][:20]
        with Session(self.engine) as s, s.begin():
            old = s.get(Point, key) or self._same_job(s, obs)
            if old is not None:
                if not (old.config or {}).get("partial") or obs.get("partial"):
                    return "kept" if obs.get("partial") and not (old.config or {}).get("partial") else "same"
                s.delete(old)  # the partial run gives way to its whole log
                s.flush()
            verdict = "new" if old is None else "replaced"
            nbytes = obs.get("posix_bytes_read")
            app = obs.get("mpiio_bytes_read") or None
            reads = obs.get("posix_reads")
            files = len(obs.get("files", []))
            name = obs.get("exe") or Path(obs["log"]).name
            end = obs.get("end_unix")
            partial = "; ".join(obs.get("partial") or [])
            partial = f"partial Darshan log, kept with --partial: {partial}" if partial else ""
            stored = _json_safe(obs)
            row = Point(
                point_key=key, dataset_key="darshan", status="completed", source="darshan", attempts=0,
                label=f"observed{' (partial log)' if partial else ''}: {name} job {obs.get('job_id') or '?'} "
                      f"({obs.get('ranks', 0)} ranks)", error=partial or None,
                job_id=obs.get("job_id") or None, job_state="OBSERVED", run_dir=obs["log"],
                format=obs.get("format", "other"), format_options={}, access=obs.get("access", "unknown"),
                stripe_count=int(obs.get("stripe_count", 0)), stripe_size=int(obs.get("stripe_size", 0)), nodes=0,
                ppn=0, ranks=int(obs.get("ranks", 0)), repeat=0, seed=0, workload=f"darshan:{name}"[:64],
                samples=int(reads or 0), sample_size=round(nbytes / reads) if reads else 0, sample_size_stdev=0,
                samples_per_file=round(reads / files) if reads and files else 0, num_files=files,
                batch_size=0, epochs=1, compute_time_s=0.0, cache_policy="observed", cluster="darshan",
                data_root=obs.get("data_root", ""), config=stored, config_digest=config_digest(stored),
                bytes_read=app if app else nbytes, posix_reads=reads, posix_bytes_read=nbytes,
                posix_read_time_s=obs.get("posix_read_time_s"), posix_size_hist=obs.get("posix_size_hist"),
                amplification=nbytes / app if app and nbytes is not None else None,
                io_time_slowest_s=obs.get("agg_time_by_slowest_s"),
                bandwidth_mib_s=obs.get("agg_perf_by_slowest_mib_s"),
                agg_perf_by_slowest_mib_s=obs.get("agg_perf_by_slowest_mib_s"),
                wall_time_s=obs.get("run_time_s"), cache="observed",
                started_unix=obs.get("start_unix"), finished_unix=end,
                finished_utc=dt.datetime.fromtimestamp(end, dt.timezone.utc).replace(tzinfo=None) if end else None,
                submitted_utc=_now(), result=_json_safe(obs),
            )
            s.add(row)
        return verdict

    @staticmethod
    def _same_job(s: Session, obs: dict[str, Any]) -> Point | None:
        """An observed run already stored for the job of ``obs`` (under another key: an earlier ddlio keyed runs
        by the log's bytes): same job id, start time, ranks and executable."""
        rows = s.scalars(select(Point).where(Point.source == "darshan", Point.job_id == (obs.get("job_id") or None),
                                             Point.started_unix == obs.get("start_unix"),
                                             Point.ranks == int(obs.get("ranks", 0)))).all()
        return next((r for r in rows if (r.config or {}).get("exe") == obs.get("exe")), None)
