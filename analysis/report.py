"""``python -m analysis report --out report.html``: one self-contained HTML file, readable offline.

Sections, answers first: what to use per scenario with its evidence (:mod:`analysis.report_sections`), the figures
(PNG embedded as base64 data URIs; the overview of every format on one scale first), the guidelines (statements, the
stripe layout and format per scenario with their intervals and verdicts, the validity of the points), what was swept
(sweeps and configurations), and the provenance of the measurements (package versions, hosts, OS, git commit, file
systems and the Lustre layouts applied). No script, no external stylesheet, font or image: the page needs no network.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import html
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import func, select

from analysis import frames as F
from analysis import guidelines as G
from analysis.checkpoint import checkpoint_configs, checkpoint_frame
from analysis.diagnose.cli import report_section as diagnosis_section
from analysis.figures import plan_figures, render_png
from analysis.outputs import check_file, mark_html, write_file
from analysis.query import (
    analysis_frame,
    failed_frame,
    hist_frame,
    observed_frame,
    parse_where,
    per_configuration,
    status_counts,
)
from analysis.reading import release_freed_memory
from analysis.report_frames import layouts_frame, provenance_frame, sweeps_frame
from analysis.report_sections import (
    answers_section,
    checkpoint_answers,
    prediction_section,
    readable,
    validity_section,
)
from ddlio.errors import DdlioError
from ddlio.store import Point, StoreReader, describe, open_store_for_reading

#: Most configuration rows shown in the report's table (the rest are counted, and in `export`).
MAX_CONFIG_ROWS = 400

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1200px;color:#222;
line-height:1.4;padding:0 1rem}
h1{font-size:1.6rem}h2{border-bottom:2px solid #4477aa;padding-bottom:.2rem;margin-top:2.2rem}
table{border-collapse:collapse;font-size:.82rem;margin:.6rem 0;width:100%;table-layout:auto}
th,td{border:1px solid #ccc;padding:.25rem .45rem;text-align:left;vertical-align:top;overflow-wrap:anywhere;
word-break:normal}
th{background:#eef2f7}td.num{text-align:right;font-variant-numeric:tabular-nums}
.recommend{background:#e3f4e1}.keep{background:#eef6ff}.undecided{background:#fdf0dd}
ul.answers li{padding:.2rem .4rem;margin:.2rem 0;list-style:none;overflow-wrap:anywhere}
figure{margin:1.2rem 0}figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:.85rem;color:#555}details{margin:1rem 0}summary{cursor:pointer;font-weight:600}
.note{color:#666;font-size:.85rem;overflow-wrap:anywhere}code{background:#f3f3f3;padding:0 .2rem;overflow-wrap:anywhere}
@media (max-width:700px){body{margin:1rem auto;padding:0 .5rem}table{font-size:.66rem}th,td{padding:.1rem .15rem}
ul.answers{padding-left:0}}
"""


def _e(v: Any) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def html_table(df: pd.DataFrame, row_class: pd.Series | None = None) -> str:
    """``df`` as an HTML table (escaped; numbers right-aligned, 4 significant digits)."""
    df = readable(df)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = []
    for i, row in enumerate(df.itertuples(index=False)):
        cls = f' class="{row_class.iloc[i]}"' if row_class is not None else ""
        cells = "".join(
            f'<td class="num">{_e(v)}</td>' if isinstance(v, int | float | np.number) and not isinstance(v, bool)
            else f"<td>{_e(v)}</td>" for v in row)
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _verdict_class(v: pd.Series) -> pd.Series:
    return v.map({"recommend": "recommend", "keep baseline": "keep"}).fillna("undecided")


def build_report(store: StoreReader, where: str | None = None, title: str = "ddlio report",
                 db_name: str = "") -> str:
    """The whole report as one HTML string (figures embedded as base64 PNG). The diagnosis (and the layouts
    table) is worked out in a process of its own beside the rest (it reads the store its own way), started before
    anything else when there is no filter; the guidelines in another while the figures are drawn."""
    db = store.url.render_as_string(hide_password=False)
    diagnosis = None if where else _Background(_diagnosis_html, db, None, None)
    try:
        points = analysis_frame(store, where, "figures")  # the guidelines of the report are drawn from them
        if diagnosis is None:  # the filter's points, as the diagnosis reads them
            diagnosis = _Background(_diagnosis_html, db, where, points["point_key"].tolist())
        return _assemble(store, db, where, title, db_name, points, diagnosis, checkpoint_frame(store, where))
    finally:
        if diagnosis is not None:
            diagnosis.close()  # a section failed before the diagnosis was asked for: it is not wanted


def _assemble(store: StoreReader, db: str, where: str | None, title: str, db_name: str, points: pd.DataFrame,
              diagnosis: _Background, ck: pd.DataFrame) -> str:
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    counts = status_counts(store)  # summary's statuses, counted in SQL: no second read of every point
    parts.append(f"<p class='note'>Generated {now} from <code>{html.escape(db_name)}</code>"
                 + (f", filter <code>{html.escape(where)}</code>" if where else "")
                 + f". Points in the store: {_n_points(store)} ("
                 + ", ".join(f"{n} {html.escape(str(k))}" for k, n in sorted(counts.items()))
                 + f"); {len(points)} completed points analysed"
                 + (f", and {len(ck)} checkpoint points" if len(ck) else "") + ".</p>")
    st = G.Settings()
    guides = _Background(_guidelines, db, points, st)
    try:
        figures = _figures_section(store, points, beside=(guides, diagnosis), checkpoints=ck)  # meanwhile
        lay, fmt, stmts, below, invalid_note = guides.result()
    finally:
        guides.close()
    parts += answers_section(lay, fmt, st.metric, invalid_note) if len(points) else []
    parts += figures
    parts += prediction_section(points) if len(points) else []
    parts += _guidelines_section(points, st, (lay, fmt, stmts), below) if len(points) or ck.empty else []
    parts += _checkpoint_section(ck, st) if len(ck) else []
    parts += _swept_section(store, points, failed_frame(store, None if where else points))
    # the diagnosis: its own package (analysis.diagnose); with a filter, of the points read here
    diagnosed, layouts = diagnosis.result()
    parts.append(diagnosed)
    parts.append("<h2>Provenance</h2><h3>Environments</h3>")
    parts.append(html_table(provenance_frame(store)))
    parts.append("<h3>File systems and stripe layouts</h3>")
    parts.append(html_table(layouts))
    parts.append("</body></html>\n")
    return "".join(parts)


def _diagnosis_html(db: str, where: str | None, keys: list[str] | None) -> tuple[str, pd.DataFrame]:
    """(the report's diagnosis section, :func:`layouts_frame`) of the store ``db`` (the diagnosis of the points
    ``keys`` when a filter chose them)."""
    store = open_store_for_reading(db)
    try:
        return (diagnosis_section(store, where, None if keys is None else pd.DataFrame({"point_key": keys})),
                layouts_frame(store))
    finally:
        store.engine.dispose()


class _Background:
    """``fn(*args)`` worked out in a forked process while this one goes on (a second CPU): :meth:`result` waits
    for it (its exception, raised here); :meth:`close` stops it if its result is no longer wanted. Ctrl-C reaches
    the whole process group: the child ignores it, the parent stops it."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        from multiprocessing import get_context  # lazy: only the report works beside itself

        ctx = get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
        self._proc.start()
        send.close()

    def result(self) -> Any:
        try:
            ok, value = self._recv.recv()
        except EOFError:
            raise DdlioError(f"the report's background process died (exit code {self._proc.exitcode}): out of "
                             "memory? see dmesg") from None
        finally:
            self.close()
        if not ok:
            raise value
        return value

    def alive(self) -> bool:
        """Whether it is still working."""
        return self._proc.is_alive()

    def close(self) -> None:
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
        self._recv.close()


def _child(send: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        out = (True, fn(*args))
    except BaseException as e:  # whatever it is, the parent raises it
        out = (False, e)
    try:
        send.send(out)
    except Exception as e:  # an exception that does not pickle: its text does
        send.send((False, RuntimeError(f"{type(out[1]).__name__}: {out[1]}" if not out[0] else repr(e))))
    send.close()


def _n_points(store: StoreReader) -> int:
    """Every point of the store (any status, observed runs too)."""
    with store.session() as s:
        return int(s.execute(select(func.count()).select_from(Point)).scalar() or 0)


def _swept_section(store: StoreReader, points: pd.DataFrame, failed: pd.DataFrame) -> list[str]:
    """What was swept: the sweeps, the configurations (mean of repetitions), observed runs and failed points."""
    parts = ["<h2>What was swept</h2>"]
    sw = sweeps_frame(store)
    parts.append(html_table(sw) if len(sw) else "<p>No sweep recorded (points were ingested).</p>")
    cfg = F.configs(points)
    shown = cfg.reindex(columns=["format", "access", "label", "n", "bandwidth_mib_s_mean", "bandwidth_mib_s_std",
                                 "iops_mean", "io_time_slowest_s_mean", "wall_time_s_mean", "lat_p50_us_mean",
                                 "lat_p99_us_mean", "amplification_mean"])
    shown = shown.rename(columns={
        "label": "configuration", "n": "repetitions", "bandwidth_mib_s_mean": "bandwidth MiB/s",
        "bandwidth_mib_s_std": "± std", "iops_mean": "IOPS", "io_time_slowest_s_mean": "I/O time s",
        "wall_time_s_mean": "runtime s", "lat_p50_us_mean": "p50 µs", "lat_p99_us_mean": "p99 µs",
        "amplification_mean": "amplification"})
    parts.append(f"<h3>Configurations ({len(cfg)}; mean of repetitions)</h3>")
    parts.append(html_table(shown.head(MAX_CONFIG_ROWS)))
    if len(cfg) > MAX_CONFIG_ROWS:
        parts.append(f"<p class='note'>{len(cfg) - MAX_CONFIG_ROWS} more configurations: "
                     "<code>python -m analysis export</code> has them all.</p>")
    observed = observed_frame(store)
    if len(observed):
        obs = observed.drop(columns=["point_key"]).rename(columns={
            "label": "observed run (Darshan log)", "agg_perf_by_slowest_mib_s": "agg_perf_by_slowest MiB/s",
            "io_time_slowest_s": "agg_time_by_slowest s", "sample_size": "mean read bytes", "run_dir": "log"})
        parts.append(f"<h3>Observed runs ({len(observed)}; imported Darshan logs, not emulated)</h3>"
                     "<p class='note'>Real applications' runs as Darshan recorded them (POSIX module; bandwidth as "
                     "Darshan derives agg_perf_by_slowest, read and written bytes), beside the sweep's points; "
                     "they are not part of the guidelines or the figures' comparisons.</p>")
        parts.append(html_table(obs.head(MAX_CONFIG_ROWS)))
    if len(failed):
        f = failed[["label", "repeat", "error"]].copy()
        f["error"] = f["error"].fillna("").str.split("\n").str[0].str.slice(0, 200)
        parts.append(f"<h3>Failed points ({len(failed)})</h3>" + html_table(f.head(MAX_CONFIG_ROWS)))
    return parts


def _valid(points: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    from analysis.validity import valid_only  # lazy: validity reads query's frames

    return valid_only(points)


def _guidelines(db: str, points: pd.DataFrame,
                st: G.Settings) -> tuple[pd.DataFrame, pd.DataFrame, list[dict], list[str], str]:
    """(layout guidelines, format guidelines, statements, notes on caches below the client, the note on the
    points left out as invalid) of ``points`` of the store ``db``: the guidelines of the valid ones, the notes of
    all."""
    if points.empty:
        return pd.DataFrame(), pd.DataFrame(), [], [], ""
    _, invalid_note = _valid(points[["validity", "invalid_reasons"]])
    store = open_store_for_reading(db)
    try:
        lay, fmt, stmts = G.compute(points, st)
        release_freed_memory()  # the comparisons' copies, before the notes read the epochs
        return lay, fmt, stmts, G.below_notes(store, points), invalid_note
    finally:
        store.engine.dispose()


def _guidelines_section(points: pd.DataFrame, st: G.Settings,
                        computed: tuple[pd.DataFrame, pd.DataFrame, list[dict]], below: list[str]) -> list[str]:
    """The guidelines: the statements, then the stripe layout and the format per scenario."""
    parts = ["<h2>Guidelines</h2>"]
    if points.empty:
        return [*parts, "<p>No completed points: nothing to recommend.</p>"]
    lay, fmt, stmts = computed
    parts.append(f"<p class='note'>{html.escape(F.METRICS[st.metric][0])}: mean of repetitions "
                 f"[{st.confidence:.0%} bootstrap interval, {st.n_boot} resamples, seed {st.seed}]. "
                 "<b>cannot decide</b> means the data do not separate the best choice from another: intervals "
                 "overlap, repetitions are missing, or striping was not applicable (not Lustre).</p>")
    for n in below:
        parts.append(f"<p class='note below'><b>Cache below the client.</b> {html.escape(n)}</p>")
    parts.append("<h3>Statements</h3><ul>")
    for s in stmts:
        ev = "".join(f"<li>{html.escape(e)}</li>" for e in s["evidence"])
        parts.append(f"<li>{html.escape(s['text'])}<ul>{ev}</ul></li>")
    parts.append("</ul>" if stmts else "<li>none: nothing is decided yet</li></ul>")
    lcols = ["access", "format", "nodes", "ppn", "size_class", "verdict", "best", "best_mean", "best_lo",
             "best_hi", "baseline", "gain_pct", "gain_lo_pct", "gain_hi_pct", "reason"]
    lcols = [c for c in lcols if c in lay.columns]
    fcols_ok = set(fmt.columns)
    parts.append("<h3>Stripe layout per scenario</h3>" + (html_table(lay[lcols], _verdict_class(lay["verdict"]))
                                                          if len(lay) else "<p>none measured</p>"))
    fcols = ["access", "nodes", "ppn", "size_class", "verdict", "best", "best_layout", "best_mean", "best_lo",
             "best_hi", "runner_up", "gain_pct", "gain_lo_pct", "gain_hi_pct", "reason"]
    fcols = [c for c in fcols if c in fcols_ok]
    parts.append("<h3>Format per scenario</h3>" + (html_table(fmt[fcols], _verdict_class(fmt["verdict"]))
                                                   if len(fmt) else "<p>none measured</p>"))
    text, bad = validity_section(points)
    parts.append(f"<h3>Validity</h3><p class='note'>{html.escape(text)}</p>")
    if len(bad):
        parts.append(html_table(bad.head(MAX_CONFIG_ROWS)))
    return parts


def _checkpoint_section(ck: pd.DataFrame, st: G.Settings) -> list[str]:
    """Checkpoints: what to use per scale for writing and for restoring (:mod:`analysis.guidelines.checkpoint`),
    the guideline's table and the configurations measured (means of repetitions)."""
    from analysis.guidelines.checkpoint import checkpoint_guidelines  # lazy: only with checkpoint points

    rows, notes = checkpoint_guidelines(ck, st)
    parts = ["<h2 id='checkpoints'>Checkpoints</h2>", *checkpoint_answers(rows, notes)]
    cols = ["phase", "nodes", "ppn", "setting", "verdict", "best", "best_mean", "best_lo", "best_hi", "best_n",
            "runner_up", "gain_pct", "gain_lo_pct", "gain_hi_pct", "reason"]
    if len(rows):
        parts.append("<h3>Per scale, writing and restoring apart (MiB/s)</h3>"
                     + html_table(rows[cols].rename(columns={"setting": "checkpoint"}),
                                  _verdict_class(rows["verdict"])))
    metrics = ["write_bandwidth_mib_s", "read_bandwidth_mib_s", "write_throughput_gib_s", "read_throughput_gib_s",
               "fsync_time_s", "write_meta_time_s", "write_crc_time_s", "read_copy_time_s"]
    cfg = checkpoint_configs(ck, metrics)
    shown = cfg[["label", "n", *[f"{m}_mean" for m in metrics]]].rename(columns={
        "label": "configuration", "n": "repetitions", "write_bandwidth_mib_s_mean": "write MiB/s",
        "read_bandwidth_mib_s_mean": "restore MiB/s", "write_throughput_gib_s_mean": "write GiB/s (MLPerf)",
        "read_throughput_gib_s_mean": "restore GiB/s (MLPerf)", "fsync_time_s_mean": "fsync s",
        "write_meta_time_s_mean": "write metadata s", "write_crc_time_s_mean": "save checksums s",
        "read_copy_time_s_mean": "restore copies s"})
    parts.append(f"<h3>Checkpoint configurations ({len(cfg)}; mean of repetitions)</h3>"
                 + html_table(shown.head(MAX_CONFIG_ROWS)))
    return parts


def _figures_section(store: StoreReader, points: pd.DataFrame, beside: tuple[_Background, ...] = (),
                     checkpoints: pd.DataFrame | None = None) -> list[str]:
    """The figures, embedded as base64 PNG (or why each was not drawn), drawn in worker processes on the CPUs
    that the processes working ``beside`` them leave (one at least): their memory adds up too; the checkpoint
    figures of ``checkpoints`` after train's."""
    parts = ["<h2>Figures</h2>"]
    keys, hists = hist_frame(store, points["point_key"].tolist(), by=per_configuration(points))
    jobs = plan_figures(points, keys, hists, checkpoints=checkpoints)
    workers = max(1, (os.cpu_count() or 1) - sum(b.alive() for b in beside))
    images = render_png(jobs, workers=workers)  # drawn in worker processes, as the figures command draws them
    # many per-format figures of few bars each: the overview (small multiples, one scale) stands for them
    per_format = [j.name for j in jobs if j.name.startswith("config_") and j.draw is not None]
    fold = any(j.name == "overview_bandwidth" for j in jobs) and len(per_format) > 2 and \
        F.configs(points).groupby("format").size().max() <= 4
    folded = []
    for job, png in zip(jobs, images, strict=True):
        if png is None:
            parts.append(f"<p class='note'>Not drawn: {html.escape(job.caption)}: "
                         f"{html.escape(job.skipped or '')}</p>")
            continue
        b64 = base64.b64encode(png).decode("ascii")
        fig = (f"<figure id='{html.escape(job.name)}'><img alt='{html.escape(job.caption)}' "
               f"src='data:image/png;base64,{b64}'><figcaption>{html.escape(job.caption)}</figcaption></figure>")
        (folded if fold and job.name in per_format else parts).append(fig)
    if folded:
        parts.append(f"<details><summary>Each format's IOPS, I/O time and runtime ({len(folded)} figures)</summary>"
                     + "".join(folded) + "</details>")
    return parts


def setup_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", help="SQLite file or SQLAlchemy URL (default: $DDLIO_DB or ./results.db)")
    parser.add_argument("--out", default="report.html", help="the HTML file to write (default: ./report.html)")
    parser.add_argument("--where", help="keep the points where this holds, e.g. \"format == 'hdf5' and nodes >= 2\" "
                                          "(columns, literals, comparisons, in [...], and/or/not, arithmetic)")
    parser.add_argument("--title", default="ddlio report", help="the page's title")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing output that ddlio did not write (never a file shipped in conf/)")


def main(args: argparse.Namespace) -> int:
    parse_where(args.where)  # a refused filter is named before the store is opened
    out = check_file(args.out, "html", args.force)  # and the output path before any work
    store = open_store_for_reading(args.db)
    text = build_report(store, args.where, args.title, db_name=describe(store.url))
    write_file(out, mark_html(text))
    print(f"wrote {out} ({len(text) / 1024:.0f} KiB)")
    return 0
