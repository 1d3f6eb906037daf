"""A point's run folder on the driver's side (:class:`~ddlio.runpaths.RunPaths` names its files): where it is,
preparing it for a new attempt (the previous outcome archived, the reproducer written), the job's note, and the
failure record of a job that left none."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ddlio.env import PROJECT_DIR
from ddlio.errors import DdlioError
from ddlio.plain import write_json_atomic
from ddlio.procs import process_started, processes_naming
from ddlio.records import LOST_WORDS, FailureRecord, Outcome
from ddlio.resources import RESOURCE_ERRNOS, resource_sentence
from ddlio.runpaths import RunPaths, runs_dir
from experiments.config import PointSpec
from experiments.executors.slurm import render_sbatch, site_options
from experiments.run.mpirun import failure_cause, read_log


def run_dir_for(spec: PointSpec, store_id: str = "") -> Path:
    """The point's run folder (:meth:`RunPaths.of`)."""
    return RunPaths.of(spec.data_root, spec.point_key, store_id).root


def job_info(run_dir: Path) -> dict[str, Any]:
    """The note the driver left of the point's job (``job_id``, ``folder``, ``executor``, ``submitted_utc``)."""
    try:
        return json.loads(RunPaths(run_dir).job.read_text())
    except (OSError, ValueError):
        return {}


def note_job(run_dir: Path, job_id: str, folder: Path, executor: str) -> None:
    """The scheduler accepted the point's job: note it in the run folder. Not fsynced (a sweep's sbatch notes
    1,000 points at once): the store's transaction that follows holds the same job id durably."""
    write_json_atomic(RunPaths(run_dir).job, {"job_id": job_id, "folder": str(folder), "executor": executor,
                                              "submitted_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                      durable=False)


#: the line a job writes on stderr when the point failed and its failure record could not be written (job.py)
_POINT_FAILED = re.compile(r"^ddlio: the point failed: (.+)$", re.M)
#: Python's words for a resource that ran out, with the path: ``[Errno 28] No space left on device: '/x/y'``
_RESOURCE_OSERROR = re.compile(r"\[Errno (\d+)\] [^:\n]*: '([^'\n]+)'")


def _said_by_job(texts: Iterable[str]) -> str | None:
    """What the job said the point failed with, when it could not write its failure record (a full disk)."""
    for text in texts:
        m = _POINT_FAILED.search(text)
        if m:
            return m.group(1).strip()
    return None


def _resource_cause(*texts: str) -> str | None:
    """One sentence (:func:`ddlio.resources.resource_sentence`) for the first resource error with a path in
    ``texts`` (what Python says of ENOSPC, EDQUOT, EMFILE, ENFILE), or None."""
    for text in texts:
        for m in _RESOURCE_OSERROR.finditer(text):
            code = int(m.group(1))
            if code in RESOURCE_ERRNOS:
                return resource_sentence(OSError(code, os.strerror(code), m.group(2)))
    return None


def lost_job_error(job_id: str, state: str, run_dir: Path, detail: str = "") -> str:
    """Why a job left no result: its scheduler state, what ended it if any of its logs tells (a signal by name,
    no space left, the time limit ...), ``detail``, and the tails of whatever it wrote; only the first line when a
    resource ran out (which, where, how much is left) or the job said what the point failed with."""
    info = job_info(run_dir)
    paths = RunPaths(run_dir)
    folder = Path(info.get("folder", paths.job_folder))
    logs = sorted(folder.glob(f"{job_id}_*_log.err")) + sorted(folder.glob(f"{job_id}_*_log.out"))
    logs += [log for step in ("kernel", "generate") for log in reversed(paths.logs(step))]
    texts = {log: read_log(log) for log in logs}
    said = _said_by_job(texts.values()) or _resource_cause(detail, *texts.values())
    cause = said or failure_cause(detail, *texts.values())
    codes = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT}
    if cause in codes:  # said without a path (a write to a full disk): the run folder is where it was written
        cause = said = resource_sentence(OSError(codes[cause], cause), where=run_dir)
    parts = [f"job {job_id} ended {state} {LOST_WORDS}" + (f": {cause}" if cause else "")]
    if said:  # the job's own words, or a resource that ran out: one sentence says it all, no log tails
        return parts[0]
    if detail:
        parts.append(detail.strip())
    for log, text in texts.items():
        tail = "\n".join(text.strip().splitlines()[-20:])
        if tail and (log.parent == folder or log.suffix == ".err"):
            parts.append(f"--- {log.name}\n{tail}")
    return "\n".join(parts)


def lost_record(spec: PointSpec, job_id: str, state: str, run_dir: Path, detail: str = "",
                job_state: str | None = None) -> FailureRecord:
    """The driver's failure record (outcome LOST) of a job that ended in ``state`` without leaving one."""
    return FailureRecord.of(spec.to_dict(), lost_job_error(job_id, state, run_dir, detail),
                            job_state=state if job_state is None else job_state, run_dir=str(run_dir),
                            outcome=Outcome.LOST)


def archive_outcome(rd: Path) -> None:
    """Move a previous attempt's outcome out of the way (into ``attempts/NNN/``), so that any result file found
    later is this submission's and nothing an earlier job wrote is ever deleted."""
    paths = RunPaths(rd)
    old = paths.outcome()
    if not old:
        return
    attempts = paths.attempts
    n = len(list(attempts.glob("*"))) if attempts.exists() else 0
    dest = attempts / f"{n:03d}"
    dest.mkdir(parents=True, exist_ok=True)
    for p in old:
        os.replace(p, dest / p.name)


#: in a folder :func:`private_dir` created: the mark that it is ddlio's, so that ddlio may close it to others
PRIVATE_MARK = ".ddlio-private"


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) with the folder itself readable by its owner only (mode 0700): run
    folders hold job scripts, configs and logs, which are nobody else's business. A folder ddlio did not create is
    never changed: only one that carries ddlio's mark (:data:`PRIVATE_MARK`, left when it created it), is a folder
    and not a link to one, is closed if others could enter it; a ``runs`` that is a user's folder, or links to one,
    keeps its mode. The datasets beside it keep the umask's modes."""
    if not (path.exists() or path.is_symlink()):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700, parents=True)  # 0700 whatever the umask leaves of it: created private
            (path / PRIVATE_MARK).touch()
            return path
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.is_symlink() or not (path / PRIVATE_MARK).is_file():
        return path
    st = path.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


#: how long processes left by an earlier attempt get to end after SIGTERM, then after SIGKILL (seconds)
ORPHAN_GRACE_S = (5.0, 2.0)


class OrphanError(DdlioError):
    """Processes of an earlier attempt at a point still run in its run folder and could not be stopped."""


#: words of a command line that ddlio's own processes of a point hold: its modules (the job, the MPI steps, the
#: generator), submitit's job runner, the MPI launchers; a process naming the run folder without one (a user's
#: ``tail -f`` of a log there) is never stopped
_DDLIO_COMMANDS = ("experiments.", "submitit", "mpiexec", "mpirun", "hydra_pmi_proxy", "srun")


def _started_by_ddlio(cmd: str) -> bool:
    return any(w in cmd for w in _DDLIO_COMMANDS)


def stop_orphans(rd: Path, echo: Callable[[str], None] | None = None) -> list[int]:
    """Stop the processes an earlier attempt at this point left running (its driver and job killed, ``kill -9``,
    while its MPI step or generator went on writing in ``rd``): this user's processes of this host whose command
    line names the run folder. The caller holds the point's claim and found its job gone, so they are that
    attempt's, nobody else's; only those running ddlio's own commands (:data:`_DDLIO_COMMANDS`) are stopped,
    never, say, a user's ``tail -f`` of a log there. SIGTERM, then SIGKILL; one line says what was stopped.
    Returns their pids; raises :class:`OrphanError` (one line: which still run, how to stop them) when some
    outlive SIGKILL (another user's, or stuck in the kernel)."""
    found = {pid: cmd for pid, cmd in processes_naming(rd).items() if _started_by_ddlio(cmd)}
    if not found:
        return []
    for sig, grace in zip((signal.SIGTERM, signal.SIGKILL), ORPHAN_GRACE_S, strict=True):
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        end = time.monotonic() + grace
        while any(process_started(p) for p in found) and time.monotonic() < end:
            time.sleep(0.05)
        left = [p for p in found if process_started(p)]
        if not left:
            break
    what = ", ".join(f"{p} ({found[p][:80]})" for p in sorted(found))
    if left:
        raise OrphanError(f"{len(left)} process(es) of an earlier attempt still run in {rd} and could not be "
                          f"stopped: {', '.join(map(str, left))}; stop them (kill -9 {' '.join(map(str, left))}) "
                          "and run the same command again")
    (echo or (lambda line: print(line, file=sys.stderr, flush=True)))(
        f"ddlio: stopped {len(found)} process(es) an earlier attempt of this point left running in {rd}: {what}")
    return sorted(found)


def prepare_run_dir(spec: PointSpec, store_id: str = "") -> Path:
    """Stop what an earlier attempt left running in the run folder (:func:`stop_orphans`), archive the point's
    previous outcome and write the standalone reproducer."""
    paths = RunPaths.of(spec.data_root, spec.point_key, store_id)
    rd = paths.root
    runs = private_dir(runs_dir(spec.data_root))
    if rd.parent != runs:
        private_dir(rd.parent)  # the store's folder: private even where runs/ is a user's folder left as it is
    rd.mkdir(parents=True, exist_ok=True)
    stop_orphans(rd)
    archive_outcome(rd)
    c = spec.cluster
    paths.repro.write_text(render_sbatch(
        label=spec.label, run_dir=str(rd), nodes=spec.nodes, ppn=spec.ppn,
        time_min=max(1, int(-(-float(c.timeout_min) // 1))), launch=c.launch, python=sys.executable,
        project_dir=str(PROJECT_DIR), kernel_spec=str(paths.kernel_spec),
        env={str(k): str(v) for k, v in c.env.items()}, **site_options(c),
    ))
    return rd
