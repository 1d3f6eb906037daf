"""SYNTHETIC checkpoint points for the analysis tests: records of the shape the checkpoint kind stores (kind
``checkpoint``, the stored config's ``checkpoint`` part, its results as ``metrics`` that become ``point_metrics``
rows), written through the store's own writer (:meth:`ddlio.store.Store.record`), as the stand-in kind of
tests/test_kind_seam.py lands there. They stand for what a checkpoint sweep would store, never for a measurement.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ddlio.store import Store

MIB = 1024 * 1024
#: a point's stored form (the tiny workload's train keys, the local cluster), written out here rather than composed
#: from conf/, so that these stores do not follow the presets (a checkpoint point's stored form holds them too)
BASE: dict[str, Any] = {
    "access": "shared", "batch_size": 8, "cache": "cold", "cluster": {"name": "local", "executor": "local",
    "launch": "mpiexec -n {ranks}", "timeout_min": 30, "env": {}}, "compute_time": 0.0, "compute_time_stdev": 0.0,
    "data_root": "/tmp/ddlio-data", "dataset_key": "d0", "drop_last": False, "epochs": 2, "format": "hdf5",
    "format_options": {}, "fs_type": "ext4", "nodes": 1, "num_files": 2, "payload": "random", "point_key": "",
    "ppn": 1, "prefetch": 2, "ranks": 1, "read_threads": 0, "reader": "native", "repeat": 0, "sample_shape": [],
    "sample_size": 16384, "sample_size_stdev": 0, "samples": 64, "samples_per_file": 32, "seed": 42,
    "settle": True, "shuffle": "none", "stripe_count": 1, "stripe_size": MIB, "striping_applicable": False,
    "trace": False, "workload_name": "tiny",
}
#: the units the checkpoint kind declares, by metric (its contract)
UNITS = {
    "checkpoints": "", "checkpoint_bytes": "bytes", "files": "", "bytes_written": "bytes", "os_write_bytes": "bytes",
    "write_time_s": "s", "write_bandwidth_mib_s": "MiB/s", "write_duration_max_s": "s",
    "write_throughput_gib_s": "GiB/s", "fsync_time_s": "s", "write_meta_time_s": "s", "write_lat_p50_us": "us",
    "write_lat_p99_us": "us", "writes": "", "bytes_read": "bytes", "os_read_bytes": "bytes", "read_time_s": "s",
    "read_bandwidth_mib_s": "MiB/s", "read_duration_max_s": "s", "read_throughput_gib_s": "GiB/s",
    "read_meta_time_s": "s", "read_lat_p50_us": "us", "read_lat_p99_us": "us", "reads": "",
    "restore_resident_fraction": "", "write_to_read_s": "s", "write_crc_time_s": "s", "read_copy_time_s": "s",
}


def metrics_of(ranks: int, checkpoint_bytes: int, write_mib_s: float, read_mib_s: float | None, count: int = 1,
               access: str = "shared", transfer: int = 4 * MIB, fsync_share: float = 0.1, meta_share: float = 0.02,
               resident: float = 0.0, **extra: float) -> dict[str, float]:
    """A consistent set of checkpoint metrics: ``count`` checkpoints of ``checkpoint_bytes`` (all ranks) written at
    ``write_mib_s`` and restored at ``read_mib_s`` (None: restore=none, no read metrics); ``extra`` overrides."""
    total = checkpoint_bytes * count
    wt = total / MIB / write_mib_s
    files = 1 if access == "shared" else ranks + 1
    m = {"checkpoints": count, "checkpoint_bytes": checkpoint_bytes, "files": files, "bytes_written": total,
         "os_write_bytes": total, "write_time_s": wt, "write_bandwidth_mib_s": write_mib_s,
         "write_duration_max_s": wt * 1.05, "write_throughput_gib_s": total / 2**30 / (wt * 1.05),
         "fsync_time_s": wt * fsync_share, "write_meta_time_s": wt * meta_share, "write_lat_p50_us": 900.0,
         "write_lat_p99_us": 4000.0, "writes": max(1, total // transfer), "restore_resident_fraction": resident,
         "write_to_read_s": 2.0}
    if read_mib_s is not None:
        rt = total / MIB / read_mib_s
        m.update(bytes_read=total, os_read_bytes=total, read_time_s=rt, read_bandwidth_mib_s=read_mib_s,
                 read_duration_max_s=rt * 1.05, read_throughput_gib_s=total / 2**30 / (rt * 1.05),
                 read_meta_time_s=rt * 0.01, read_lat_p50_us=500.0, read_lat_p99_us=2000.0,
                 reads=max(1, total // transfer))
    m.update(extra)
    return m


def checkpoint_record(base: dict[str, Any] = BASE, *, write: float, read: float | None = 1000.0, access: str = "shared",
                      stripe_count: int = 1, stripe_size: int = MIB, nodes: int = 1, ppn: int = 2, repeat: int = 0,
                      layout: str = "dcp", lustre: bool = True, name: str = "llama3_8b",
                      checkpoint_bytes: int = 64 * MIB, transfer: int = 4 * MIB, count: int = 1,
                      finished: str = "2026-01-01T00:00:00Z", **metric_overrides: float) -> dict[str, Any]:
    """The result record of one SYNTHETIC checkpoint point of the configuration given (bandwidths in MiB/s,
    sizes in bytes), for the base point ``base`` (a stored form: :data:`BASE` by default)."""
    p = json.loads(json.dumps(base))
    part = {"name": name, "num_layers": 32, "hidden_size": 4096, "tensor": 1, "pipeline": 1, "zero_stage": 1,
            "size": 0, "layout": layout, "transfer_size": transfer, "count": count,
            "restore": "none" if read is None else "all", "read_shift": 0}
    p.update(kind="checkpoint", checkpoint=part, access=access, stripe_count=stripe_count, stripe_size=stripe_size,
             nodes=nodes, ppn=ppn, ranks=nodes * ppn, repeat=repeat, striping_applicable=lustre,
             fs_type="lustre" if lustre else "ext4")
    p["point_key"] = hashlib.sha256(json.dumps(
        [access, stripe_count, stripe_size, nodes, ppn, repeat, layout, name, checkpoint_bytes, transfer, count,
         read is None]).encode()).hexdigest()[:20]
    values = metrics_of(p["ranks"], checkpoint_bytes, write, read, count, access, transfer, **metric_overrides)
    layout_rec = {"applicable": lustre, "fs_type": "lustre" if lustre else "ext4",
                  "reason": "" if lustre else "ext4 is not Lustre: striping not applied",
                  "requested": {"stripe_count": stripe_count, "stripe_size": stripe_size},
                  "applied": {"stripe_count": stripe_count, "stripe_size": stripe_size} if lustre else {},
                  "files": {}}
    return {"kind": "ddlio.result", "point_key": p["point_key"], "result_id": p["point_key"], "point": p,
            "totals": {}, "epochs": [], "nodes": [f"n{i}" for i in range(nodes)], "mpi_library": "MPICH",
            "metrics": [{"name": k, "value": float(v), "unit": UNITS[k]} for k, v in values.items()],
            "env": {"host": "h", "os": "Linux", "packages": {"numpy": "2"}, "git": {"commit": "abc", "dirty": False}},
            "checkpoints": {"shard_bytes": _equal_shards(checkpoint_bytes, p["ranks"])},
            "fs": {"type": "lustre" if lustre else "ext4"}, "layout": layout_rec, "finished_utc": finished,
            "started_unix": 1.0, "finished_unix": 2.0}


def _equal_shards(total: int, ranks: int) -> list[int]:
    """``total`` bytes as ``ranks`` shards of equal size (the remainder on the last), as a record stores them."""
    return [total // ranks] * (ranks - 1) + [total - total // ranks * (ranks - 1)]


def add_checkpoints(store: Store, rows: list[dict[str, Any]]) -> list[str]:
    """Store one SYNTHETIC checkpoint point per row (keyword arguments of :func:`checkpoint_record`); their keys."""
    keys = []
    for r in rows:
        rec = checkpoint_record(BASE, **r)
        assert store.record(rec)
        keys.append(rec["point_key"])
    return keys


def checkpoint_store(tmp_path: Path, rows: list[dict[str, Any]], name: str = "ck.db") -> Store:
    """A SQLite store under ``tmp_path`` holding one SYNTHETIC checkpoint point per row."""
    store = Store(str(tmp_path / name))
    add_checkpoints(store, rows)
    return store


def add_train(store: Store, rows: list[dict[str, Any]]) -> None:
    """Store one SYNTHETIC train point per row (keyword arguments of tests/test_analysis.py's ``result_record``:
    bandwidth in MiB/s, format, access, stripe_count, repeat ...) on :data:`BASE`, beside the checkpoint points."""
    from test_analysis import result_record

    for r in rows:
        assert store.record(result_record(BASE, **r))
