"""The MPI reader kernel's entry: ``mpiexec -n RANKS python -m experiments.kernel SPEC.json``; :func:`run` is one
rank's run (:class:`~experiments.kernel.kernel.Kernel`), :func:`main` reads the spec and writes the result."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from ddlio.errors import FormatError, KernelError
from ddlio.mpistep import GATE_ENV, announce_started, last_words, phase_path, wait_for_gate
from ddlio.plain import write_json_atomic
from ddlio.records import ResultRecord
from ddlio.runpaths import RunPaths
from experiments.dataset.generate import generate_in
from experiments.kernel.kernel import Kernel


def run(spec: dict[str, Any]) -> dict[str, Any] | None:
    """Run the kernel on this rank; rank 0 returns the result record, the others None."""
    k = Kernel(spec)
    for epoch in range(k.point.workload.epochs):
        k.prepare_epoch(epoch)
        k.measure_epoch(epoch)
    return k.result()


def ready(comm: Any) -> None:
    """A step started ahead (``ddlio.mpistep.GATE_ENV``): wait at the gate until the job has the dataset and the
    measurement lock; when the job asks first (``kernel.gen``: a plan), generate the dataset with these ranks
    (:func:`~experiments.dataset.generate_in`, what the generator's MPI step does; one rank forks writers for the
    cores it has: :func:`~experiments.dataset.writers.generate_in_one_rank`), say so (rank 0:
    ``kernel.generated``) and wait again. Without a gate (a reproducer): at once."""
    gate = os.environ.get(GATE_ENV)
    if not gate:
        return
    gen, generated = phase_path(gate, "gen"), phase_path(gate, "generated")
    _, found = wait_for_gate(comm, also=(gen,))
    if found == gen:
        # rank 0 reads what to write and tells the others: a file just made on another node may not be visible
        # to every node's view of a shared file system yet
        plan_path = comm.bcast(json.loads(Path(gen).read_text())["plan"] if comm.rank == 0 else None, root=0)
        if comm.size == 1:
            from experiments.dataset.writers import generate_in_one_rank  # lazy: not in every rank's start-up

            generate_in_one_rank(comm, plan_path)
        else:
            generate_in(comm, plan_path)
        if comm.rank == 0:
            write_json_atomic(generated, {"ranks": comm.size}, durable=False)  # a note: the manifest is durable
        wait_for_gate(comm)


def main(argv: list[str]) -> int:
    """``python -m experiments.kernel SPEC.json [--result PATH]`` (``--result`` overrides the spec's result
    path: the reproducer writes beside the original result instead of over it)."""
    spec_path = argv[0]
    spec = json.loads(Path(spec_path).read_text())
    if len(argv) == 3 and argv[1] == "--result":
        spec["result_path"] = argv[2]
        spec["trace_prefix"] = Path(argv[2]).stem + "-"
    from mpi4py import MPI  # lazy: MPI starts up on import (only in an MPI step)

    rank = MPI.COMM_WORLD.rank
    announce_started(MPI.COMM_WORLD)
    try:
        ready(MPI.COMM_WORLD)
        result = run(spec)
    except KernelError as e:
        print(f"ddlio kernel: {e}", file=sys.stderr, flush=True)
        return 3
    except Exception as e:
        last_words(f"ddlio kernel rank {rank} failed: {type(e).__name__}: {e}")
        if isinstance(e, FormatError):  # the dataset's bytes are damaged: tell the job, which invalidates it
            with contextlib.suppress(OSError):
                RunPaths(Path(spec["result_path"]).parent).damaged.write_text(f"rank {rank}: {e}\n")
        traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(2)
        return 2
    if result is not None:
        write_json_atomic(spec["result_path"], ResultRecord.from_dict(result).to_dict())
    return 0

