"""Rank 0, after the last epoch: every epoch's bytes checked against the plan, and the result record."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from ddlio.errors import KernelError
from ddlio.metrics import aggregate, aggregate_run
from experiments.kernel.sampling import drop_last_keep

if TYPE_CHECKING:
    from experiments.kernel.kernel import Kernel


def epoch_rows(k: Kernel, all_planned: list[list[int]]) -> tuple[list[dict[str, Any]], list[int]]:
    """Every epoch's aggregate row and planned bytes; a :class:`~ddlio.errors.KernelError` where the reads did not
    return the plan (every rank's planned bytes, from the record sizes measured at generation for the ids it was
    given, and the number of samples the epoch must cover in total)."""
    plan, nranks, tf = k.plan, k.nranks, k.tf
    keep = drop_last_keep(plan, k.point, nranks)
    want_samples = nranks * keep if keep is not None else plan.samples
    if (tf is not None and keep is not None) or k.torch is not None:
        want_samples = None  # tf.data drops each rank's own remainder; reader=torch checks its sampler's ids
    slack = 0
    if tf is not None and plan.format == "tfrecord":
        from experiments.kernel import tfdata  # lazy: TensorFlow

        slack = tfdata.TF_OTHER_READS_MAX * nranks
    planned_per_epoch = [sum(p[e] for p in all_planned) for e in range(len(k.epochs))]
    rows = []
    for e, (ranks_e, cache_row) in enumerate(zip(k.epochs, k.cache_rows, strict=True)):
        planned_e = planned_per_epoch[e]
        agg = aggregate(ranks_e)
        agg.update(cache_row, epoch=e, bytes_planned=planned_e, ranks=[r.to_dict() for r in ranks_e])
        if not planned_e <= agg["bytes_read"] <= planned_e + slack or want_samples not in (None, agg["samples"]):
            raise KernelError(
                f"epoch {e}: the reads returned {agg['bytes_read']} bytes for {agg['samples']} samples, the plan "
                f"is {planned_e} bytes for {want_samples} samples: the measurement is not trustworthy"
            )
        rows.append(agg)
    return rows, planned_per_epoch


def result_record(k: Kernel, ranks_info: list[dict[str, Any]], all_planned: list[list[int]]) -> dict[str, Any]:
    """The result record of kernel ``k``'s run (rank 0), from every rank's info and planned bytes per epoch."""
    rows, planned_per_epoch = epoch_rows(k, all_planned)
    total = aggregate_run(k.epochs)
    states = {row["cache"] for row in k.cache_rows}
    total.update(
        bytes_planned=sum(planned_per_epoch),
        cache=states.pop() if len(states) == 1 else "mixed",
        max_rss_kib=max(r["max_rss_kib"] for r in ranks_info),
    )
    MPI = k.MPI
    return {
        "kind": "ddlio.result",
        "version": 1,
        "result_id": uuid.uuid4().hex,
        "point_key": k.point_key,
        "dataset_key": k.plan.key,
        "ranks": k.nranks,
        "nodes": sorted({r["node"] for r in ranks_info}),
        "hosts": sorted({r["host"] for r in ranks_info}),
        "rank_info": ranks_info,
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
        "mpi_vendor": "{} {}".format(MPI.get_vendor()[0], ".".join(map(str, MPI.get_vendor()[1]))),
        "totals": total,
        "epochs": rows,
        "settle": k.settle,
        "started_utc": k.started,
        "started_unix": k.started_unix,  # seconds since the epoch: the measurement's span, for overlaps
        "finished_unix": time.time(),
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
