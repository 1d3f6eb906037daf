"""Observed runs: a Darshan log (read by :mod:`analysis.darshan_log`) stored as a completed point with
``source = darshan``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from ddlio.store.models import Point, _now
from ddlio.store.rows import RowWriter, _json_safe


class ObservedMixin(RowWriter):
    """The writer's :meth:`record_observed`."""

    def record_observed(self, obs: dict[str, Any]) -> bool:
        """Store an observed run (a Darshan log read by :mod:`analysis.darshan_log`) as a completed point with
        ``source = darshan``, keyed by the log's content: importing the same log again changes nothing. Returns
        whether it was new. Config columns a log cannot tell are 0 / ``observed``."""
        key = "darshan-" + obs["log_sha256"][:20]
        with Session(self.engine) as s, s.begin():
            if s.get(Point, key) is not None:
                return False
            nbytes = obs.get("posix_bytes_read")
            app = obs.get("mpiio_bytes_read") or None
            reads = obs.get("posix_reads")
            files = len(obs.get("files", []))
            name = obs.get("exe") or Path(obs["log"]).name
            end = obs.get("end_unix")
            row = Point(
                point_key=key, dataset_key="darshan", status="completed", source="darshan", attempts=0,
                label=f"observed: {name} job {obs.get('job_id') or '?'} ({obs.get('ranks', 0)} ranks)",
                job_id=obs.get("job_id") or None, job_state="OBSERVED", run_dir=obs["log"],
                format=obs.get("format", "other"), format_options={}, access=obs.get("access", "unknown"),
                stripe_count=int(obs.get("stripe_count", 0)), stripe_size=int(obs.get("stripe_size", 0)), nodes=0,
                ppn=0, ranks=int(obs.get("ranks", 0)), repeat=0, seed=0, workload=f"darshan:{name}"[:64],
                samples=int(reads or 0), sample_size=round(nbytes / reads) if reads else 0, sample_size_stdev=0,
                samples_per_file=round(reads / files) if reads and files else 0, num_files=files,
                batch_size=0, epochs=1, compute_time_s=0.0, cache_policy="observed", cluster="darshan",
                data_root=obs.get("data_root", ""), config=_json_safe(obs),
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
        return True
