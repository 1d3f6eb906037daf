"""Slurm: submitting points as jobs (equal resources share a job array below MaxArraySize), holding points a site
limit refuses, harvesting the jobs an earlier driver left out, and what a dry run shows."""

from __future__ import annotations

import getpass
import re
import subprocess
from collections.abc import Sequence

from ddlio.errors import LaunchError
from ddlio.records import FailureRecord, Outcome, Record, read_record
from ddlio.runpaths import slurm_dir
from experiments.config import PointSpec
from experiments.executors.base import Harvest, Harvested, Host, Pending, Submitted, run_pack
from experiments.executors.slurm import (
    TERMINAL,
    check_available,
    is_submit_limit,
    job_script,
    job_states,
    make_executor,
    resources,
)
from experiments.executors.slurm.packing import packs, points_per_task
from experiments.executors.slurm.site import SiteInfo, site_answer

#: points per job array when Slurm's MaxArraySize cannot be read (its default is 1001)
MAX_ARRAY = 1000


class Refused(Exception):
    """sbatch refused a submission for a site limit that clears as other jobs end."""


def submit_chunk(group: list[PointSpec], host: Host, per_task: int = 1) -> list[Pending]:
    """Submit points with equal resources as one job (array), ``per_task`` points measured in turn by each array
    task (:mod:`.packing`); raise :class:`Refused` for a site limit."""
    folder = slurm_dir(group[0].data_root)
    executor = make_executor(group, folder, per_task)
    dirs = [host.prepare(s) for s in group]
    tasks = packs(len(group), per_task)
    try:
        with executor.batch():
            if per_task == 1:
                jobs = [executor.submit(host.job, s.to_dict(), str(rd)) for s, rd in zip(group, dirs, strict=True)]
            else:
                jobs = [executor.submit(run_pack, host.job, [(group[i].to_dict(), str(dirs[i])) for i in t])
                        for t in tasks]
    except Exception as e:  # sbatch refused: a limit that clears with time, or say what Slurm said
        if is_submit_limit(str(e)):
            raise Refused(str(e)) from e
        raise LaunchError(f"sbatch refused the job{'s' if len(group) > 1 else ''}: {e}") from e
    items = [(group[i], str(job.job_id), dirs[i]) for t, job in zip(tasks, jobs, strict=True) for i in t]
    many = getattr(host, "submitted_many", None)
    if many is not None:
        many(items, folder, "slurm")  # one store transaction for the sbatch's points
    else:
        for spec, job_id, rd in items:
            host.submitted(spec, job_id, rd, folder, "slurm")
    pending = [Pending(spec, job_id, rd) for spec, job_id, rd in items]
    host.report.submitted += len(group)
    ids = sorted({str(j.job_id).split("_")[0] for j in jobs})
    packed = f", {per_task} point(s) per array task" if per_task > 1 else ""
    host.echo(f"submitted {len(group)} point(s) as Slurm job {', '.join(ids)} "
              f"({group[0].nodes} node(s) x {group[0].ppn} rank(s){packed})")
    return pending


def array_plan(group: Sequence[PointSpec], site: SiteInfo | None) -> tuple[int, int]:
    """``(points per array task, array tasks per sbatch at most)`` for points with equal resources: the
    partition's MaxTime bounds a task (:func:`points_per_task`), Slurm's MaxArraySize an array (:data:`MAX_ARRAY`
    where Slurm could not be asked). The submission and the dry run both plan with it."""
    asked = site is not None and not site.error
    part = site.partition(group[0].cluster.partition) if asked else None
    k = points_per_task(group, part.max_time_min if part is not None else None)
    limit = site.max_array_size - 1 if asked and "MaxArraySize" in site.config else MAX_ARRAY
    return k, max(1, limit)


def submit_points(specs: Sequence[PointSpec], host: Host, max_array: int | None = None) -> Submitted:
    """Submit every point with its own resources; points with equal resources go out as job arrays below Slurm's
    MaxArraySize (``max_array`` tasks when given). Points sbatch refused for a limit that clears as jobs end (submit
    or job count per user, account or QOS) are held, to be submitted as slots free; a smaller array is tried
    first."""
    check_available()
    site = site_answer() if max_array is None else None
    groups: dict[tuple, list[PointSpec]] = {}
    for spec in specs:
        groups.setdefault(resources(spec), []).append(spec)
    out = Submitted()
    for g in groups.values():
        k, limit = array_plan(g, site)
        _submit_group(g, host, max(1, max_array or limit), out, k)
    return out


def _submit_group(group: list[PointSpec], host: Host, max_array: int, out: Submitted, per_task: int = 1) -> None:
    rest, size = list(group), max_array  # size: array tasks per sbatch
    while rest:
        chunk = rest[:size * per_task]
        try:
            out.pending += submit_chunk(chunk, host, per_task)
        except Refused as e:
            if size > 1:  # an array counts each task against the limit: try fewer at once
                size = max(1, min(size, -(-len(chunk) // per_task)) // 2)
                continue
            reason = refusal_reason(str(e))
            if queue_is_empty():  # no job of the user's is out: nothing can end and free a slot
                for spec in rest:
                    host.finish(spec, FailureRecord.of(spec.to_dict(), (
                        f"sbatch refused the job for {reason} although none of your jobs is queued or running: "
                        f"the limit is below one job and cannot clear by waiting; ask the site\n{e}"),
                        job_state="REFUSED"))
                return
            out.held += rest
            out.held_reason = reason
            return
        rest = rest[len(chunk):]


def queue_is_empty() -> bool:
    """Whether squeue lists no job of this user (False when it cannot tell)."""
    try:
        p = subprocess.run(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i"], capture_output=True, text=True,
                           timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0 and not p.stdout.strip()


def refusal_reason(message: str) -> str:
    """The limit's name in sbatch's refusal (``QOSMaxSubmitJobPerUserLimit``), or its words."""
    m = re.search(r"\b((?:QOS|Assoc)\w*Limit|MaxSubmit\w*|MaxJobs\w*)\b", message)
    if m:
        return m.group(1)
    m = re.search(r"Batch job submission failed: ([^\n]+)", message)
    return m.group(1).strip() if m else "a site limit"


def with_slurm_state(record: Record, job_id: str, state: str) -> Record:
    """A failure the job recorded itself, with Slurm's account of the job when Slurm ended it (cancelled, timed
    out, preempted ...): the driver inside the job only saw its MPI step die."""
    if not isinstance(record, FailureRecord) or state not in TERMINAL or state == "COMPLETED":
        return record
    return record.ended(job_id, state)


def harvest_jobs(jobs: Sequence[Harvest], host: Host) -> Harvested:
    """Slurm's word first (it may say why the job's own record exists): a job that ended, or left its record,
    is harvested (and measured again when it failed and is retried); the others are waited for."""
    out = Harvested()
    states = job_states(h.job_id for h in jobs) if jobs else {}
    for h in jobs:
        job_state = states.get(h.job_id, "UNKNOWN")
        record = read_record(h.run_dir)
        if job_state not in TERMINAL and record is None:
            host.observe(h.spec, job_state)
            out.pending.append(Pending(h.spec, h.job_id, h.run_dir, state=job_state))
            continue
        record = with_slurm_state(record, h.job_id, job_state) if record else host.lost(
            h.spec, h.job_id, job_state, h.run_dir)
        again = record.outcome is not Outcome.COMPLETED and h.retry
        host.finish(h.spec, record, keep=again)
        if again:
            out.again.append(h.spec)
    return out


def describe(specs: Sequence[PointSpec]) -> list[str]:
    """A dry run's headline for points that share resources, and the whole job script sbatch would receive for
    their first submission, planned as :func:`submit_points` plans it (:func:`array_plan`) and written as it is
    written (:func:`job_script`)."""
    group = list(specs)
    k, limit = array_plan(group, site_answer())
    first = group[: limit * k]
    tasks = len(packs(len(first), k))
    packed = f", {k} point(s) per array task ({tasks} task(s))" if k > 1 else ""
    lines = [f"Slurm {'job array' if tasks > 1 else 'job'} of {len(first)} point(s){packed}"]
    rest = len(group) - len(first)
    if rest:
        lines.append(f"  and {rest} more point(s) in further submissions of at most {limit} array task(s) each")
    lines.append("  the job script sbatch receives:")
    script = job_script(first, slurm_dir(group[0].data_root), per_task=k)
    return [*lines, "\n".join("  | " + ln for ln in script.splitlines() if ln)]
