"""N-1 checkpoints against stripe count on a striping file system, ddlio beside fio in the same run.

At each stripe count, a directory of its own on the file system gets that layout (ddlio's storage backend sets it,
as for a point's checkpoint directories); ddlio writes and restores an N-1 checkpoint there (``kind=checkpoint
access=shared``, two ranks), and fio writes and reads the same shards at the same offsets in a subdirectory, which
inherits the layout (:func:`checkpoint_vs_fio.fio_round`). Rounds alternate which tool goes first. What the bench
prints per stripe count: the mean MiB/s of each tool (MLPerf-style for ddlio: bytes over the largest per-rank
duration, fsync included; fio's job bytes over its longest job with ``end_fsync``), and the gain of each stripe count
over stripe 1 for each tool, with ddlio's gain over fio's: the goal is that stripe count moves ddlio as it moves fio.

Every round writes new files, and CephFS places a file's objects by its inode, so how many OSDs a checkpoint's
writes reach at once is drawn anew each round: with OSDs capped, that count is the round's ceiling. The bench
therefore also prints, per round and tool, the ceiling that placement allows (:func:`placement_ceiling`: the
objects written at once, their OSDs from the inode and layout each file read back and ``ceph osd map``, each OSD
capped at ``--osd-cap``), and each tool's writes over their own ceilings, so that a gain that differs between the
tools can be told from a placement that differed.

Meant for the one-box CephFS of tests/cluster/cephfs.sh with its write caps on and objects large enough that stripe
count 1 keeps a rank's writes on one OSD at a time::

    bash tests/cluster/cephfs.sh start && bash tests/cluster/cephfs.sh throttle 24 24
    CEPH_CONF=/tmp/ddlio-cephfs-ci/ceph.conf python bench/checkpoint_stripes.py \\
        --dir "$(bash tests/cluster/cephfs.sh mountpoint)/bench" --stripes 1,2,4,8 --object-size 64MiB
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkpoint_vs_fio import fio_round, plan_of, point, run_ddlio, settle

from ddlio.units import format_size, parse_size

MIB = 1024**2


def placement_ceiling(layout: dict[str, Any], regions: list[tuple[int, int]], cap_mib_s: float,
                      samples: int = 64) -> float | None:
    """The bandwidth (MiB/s) the OSDs allow a checkpoint in one file of this read-back layout (``inode``,
    ``pool``, ``stripe_count``, ``object_size``), each rank writing its region (``offset``, ``bytes``) front to
    back at the same pace, every OSD capped at ``cap_mib_s``: at each of ``samples`` instants, the objects being
    written (the object sets, ``stripe_count`` objects each, that hold the ranks' current offsets) share their
    OSDs, and an OSD holding ``k`` of them gives each ``cap / k``, so the writes, spread evenly over the objects,
    go at ``cap x objects / (the most objects on one OSD)``; averaged as time is (harmonic mean). None when the
    monitors cannot be asked."""
    from lustre.ceph import map_objects

    sc, os_ = int(layout["stripe_count"]), int(layout["object_size"])
    at_once: list[set[int]] = []
    for i in range(samples):
        objs: set[int] = set()
        for off, n in regions:
            q = (off + n * i // samples) // (sc * os_)
            objs.update(range(q * sc, q * sc + sc))
        at_once.append(objs)
    names = {o: f"{int(layout['inode']):x}.{o:08x}" for objs in at_once for o in objs}
    osds = map_objects(str(layout["pool"]), sorted(set(names.values())))
    if osds is None:
        return None
    rates = []
    for objs in at_once:
        load: dict[int, int] = {}
        for o in objs:
            load[osds[names[o]]] = load.get(osds[names[o]], 0) + 1
        rates.append(cap_mib_s * len(objs) / max(load.values()))
    return len(rates) / sum(1 / r for r in rates)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, type=Path, help="a directory on the striping file system")
    ap.add_argument("--stripes", default="1,2,4,8", help="stripe counts, comma-separated")
    ap.add_argument("--size", default="256MiB", help="the whole checkpoint (both ranks' shards)")
    ap.add_argument("--transfer", default="4MiB", help="bytes of each write and read call")
    ap.add_argument("--object-size", default="64MiB", help="CephFS object size of the layout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--osd-cap", type=float, default=24.0,
                    help="MiB/s each OSD is capped at (tests/cluster/cephfs.sh throttle), for the placement ceiling")
    args = ap.parse_args(argv)
    if shutil.which("fio") is None:
        raise SystemExit("fio is not installed (apt-get install fio)")
    from lustre import Layout, apply_layout, read_back

    size, transfer, objsize = parse_size(args.size), parse_size(args.transfer), parse_size(args.object_size)
    stripes = [int(s) for s in args.stripes.split(",")]
    base = args.dir / f"ckpt-stripes-{uuid.uuid4().hex[:8]}"
    res: dict[int, dict[str, list[float]]] = {}
    try:
        for s in stripes:
            d = base / f"stripe{s}"
            record = apply_layout(d, Layout(s, MIB, objsize))
            if not record.applicable:
                raise SystemExit(f"striping does not apply at {args.dir}: {record.reason}")
            spec = point(d, size, transfer, "n1", 2, overrides=[f"stripe={s}", f"object_size={objsize}"])
            plan = plan_of(spec)
            got: dict[str, list[float]] = {"ddlio_w": [], "ddlio_r": [], "fio_w": [], "fio_r": [],
                                           "ddlio_ceil": [], "fio_ceil": []}
            regions = [(plan.offset(r), plan.shard_bytes[r]) for r in range(plan.ranks)]
            for k in range(args.rounds):
                for tool in (("ddlio", "fio") if k % 2 == 0 else ("fio", "ddlio")):
                    settle(1.0)
                    if tool == "ddlio":
                        rec: dict[str, Any] = {}
                        m = run_ddlio(spec, d / "run", rec)
                        got["ddlio_w"].append(m["write_throughput_gib_s"] * 1024)
                        got["ddlio_r"].append(m["read_throughput_gib_s"] * 1024)
                        lay = rec["layout"]["files"][f"ckpt-0/{plan.data_file(0)}"]
                        c = placement_ceiling(lay, regions, args.osd_cap)
                        if c is not None:
                            got["ddlio_ceil"].append(c)
                    else:
                        probe = d / "fio-ckpt" / "probe"
                        probe.parent.mkdir(parents=True, exist_ok=True)
                        probe.write_bytes(b"x")
                        lay = read_back(probe)  # what fio's files inherit
                        probe.unlink()
                        if lay.get("stripe_count") != s:
                            raise SystemExit(f"fio's directory has stripe count {lay.get('stripe_count')}, not {s}")
                        f = fio_round(plan, d, transfer,
                                      inspect=lambda files, rg=regions: placement_ceiling(
                                          {**read_back(files[0]), "inode": files[0].stat().st_ino}, rg,
                                          args.osd_cap))
                        got["fio_w"].append(f["write"])
                        got["fio_r"].append(f["read"])
                        if f["inspected"] is not None:
                            got["fio_ceil"].append(f["inspected"])
            res[s] = got
            print(f"stripe {s}: " + "; ".join(f"{k} " + " ".join(f"{x:.0f}" for x in v) for k, v in got.items()),
                  flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    # each round writes new files, whose objects CephFS places anew (by inode): a mean over rounds averages the
    # placement's luck (how many distinct OSDs a file's objects land on), which a median of few rounds does not
    med = {s: {k: statistics.mean(v) if v else float("nan") for k, v in g.items()} for s, g in res.items()}
    # each round's write over its own placement's ceiling: what a tool made of the OSDs its files drew
    def over_ceiling(g: dict[str, list[float]], tool: str) -> float:
        w, c = g[f"{tool}_w"], g[f"{tool}_ceil"]
        return statistics.mean(a / b for a, b in zip(w, c, strict=True)) if w and len(w) == len(c) else float("nan")

    eff = {s: {t: over_ceiling(g, t) for t in ("ddlio", "fio")} for s, g in res.items()}
    first = stripes[0]
    print(f"\nN-1 checkpoint of {format_size(size)} by 2 ranks, {format_size(transfer)} calls, objects of "
          f"{format_size(objsize)}, {args.rounds} rounds (means, MiB/s; gain = over stripe {first})")
    print("| stripe | ddlio write | fio write | write gain ddlio / fio | ddlio restore | fio read "
          "| read gain ddlio / fio | placement ceiling ddlio / fio | write / ceiling ddlio / fio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in stripes:
        m, b = med[s], med[first]
        gw = (m["ddlio_w"] / b["ddlio_w"], m["fio_w"] / b["fio_w"])
        gr = (m["ddlio_r"] / b["ddlio_r"], m["fio_r"] / b["fio_r"])
        print(f"| {s} | {m['ddlio_w']:.1f} | {m['fio_w']:.1f} | {gw[0]:.2f} / {gw[1]:.2f} | {m['ddlio_r']:.1f} | "
              f"{m['fio_r']:.1f} | {gr[0]:.2f} / {gr[1]:.2f} | {m['ddlio_ceil']:.1f} / {m['fio_ceil']:.1f} | "
              f"{eff[s]['ddlio']:.2f} / {eff[s]['fio']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
