"""The start-up handshake between an MPI step's ranks and the watchdog that launched it.

The launcher (``experiments.run.mpirun.run_step``) names a file in :data:`STARTED_ENV`; every MPI program ddlio
runs as a step (the dataset generator, the reader kernel) calls :func:`announce_started` right after MPI start-up,
and rank 0 creates that file once all ranks are through. A step whose file does not appear in time is killed as
hung in start-up. The handshake lives on the floor because both sides use it: the runner and the programs it runs.
"""

from __future__ import annotations

import os
import time

#: the environment variable that names the file rank 0 creates once every rank is through MPI start-up
STARTED_ENV = "DDLIO_STEP_STARTED"


def announce_started(comm: object) -> None:
    """In an MPI step's ranks, right after MPI start-up: wait until every rank is through it (a barrier), then
    rank 0 creates the file :data:`STARTED_ENV` names (it holds the time, in seconds since the epoch), which tells
    the launcher's watchdog that the step started. Without the variable (a reproducer run by hand) only the
    barrier."""
    comm.Barrier()  # type: ignore[attr-defined]
    path = os.environ.get(STARTED_ENV)
    if path and comm.rank == 0:  # type: ignore[attr-defined]
        with open(path, "w") as f:
            f.write(f"{time.time():.3f}\n")
