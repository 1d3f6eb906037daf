"""Diagnoses as text (one block per subject, findings worst first), JSON, CSV (one row per finding) and an HTML
section (the report's, or a page of its own)."""

from __future__ import annotations

import csv
import html
import io
import json
from typing import Any

from analysis.diagnose import DRISHTI, Diagnosis
from analysis.diagnose.model import Level

CSV_COLUMNS = ["kind", "subject", "label", "code", "drishti", "level", "title", "value", "threshold", "unit",
               "message", "evidence", "fix", "snippet"]


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.4g}"


def by_severity(diags: list[Diagnosis]) -> list[Diagnosis]:
    """The diagnoses worst first (high, warn, info, ok), in their given order within a level: as the text and
    HTML list them (JSON and CSV keep the store's order, for programs that compare runs)."""
    return sorted(diags, key=lambda d: -d.worst)


def rows(diags: list[Diagnosis]) -> list[dict[str, Any]]:
    """One flat row per finding (:data:`CSV_COLUMNS`)."""
    out = []
    for d in diags:
        for f in d.findings:
            out.append({"kind": d.subject.kind, "subject": d.subject.key, "label": d.subject.label, "code": f.code,
                        "drishti": DRISHTI.get(f.code, ""), "level": str(f.level), "title": f.title,
                        "value": f.value, "threshold": f.threshold, "unit": f.unit, "message": f.message,
                        "evidence": "; ".join(f.evidence), "fix": " ".join(f.fix), "snippet": f.snippet})
    return out


def to_json(diags: list[Diagnosis]) -> str:
    return json.dumps([{"kind": d.subject.kind, "subject": d.subject.key, "label": d.subject.label,
                        "points": d.subject.points, "worst": str(d.worst), "reproduce": d.reproduce,
                        "findings": [{**f.as_dict(), "drishti": DRISHTI.get(f.code)} for f in d.findings]}
                       for d in diags], indent=2, default=str) + "\n"


def to_csv(diags: list[Diagnosis]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows(diags):
        w.writerow({**r, "value": _num(r["value"]), "threshold": _num(r["threshold"])})
    return buf.getvalue()


def to_text(diags: list[Diagnosis], show_ok: bool = False) -> str:
    """Human-readable: per subject its findings, worst first, with value, threshold, evidence and fix."""
    if not diags:
        return "nothing to diagnose: no completed points or observed runs (matching the filter)\n"
    lines = []
    for d in by_severity(diags):
        s = d.subject
        what = ("observed run" if s.kind == "observed" else f"{len(s.points)} checkpoint point(s)"
                if s.kind == "checkpoint" else f"{len(s.points)} point(s)")
        lines.append(f"== {s.label}  [{s.key}, {what}]  worst: {d.worst}")
        quiet = [f for f in d.findings if f.level == Level.OK]
        if not d.findings:
            lines.append("  nothing to judge: no finding applies to what was stored (e.g. a log without POSIX records)")
        for f in sorted(d.findings, key=lambda f: -f.level):
            if f.level == Level.OK and not show_ok:
                continue
            vt = f"  ({_num(f.value)} vs {_num(f.threshold)} {f.unit})" if f.value is not None else ""
            lines.append(f"  {str(f.level).upper():<4} {f.code}: {f.message}{vt}")
            lines += [f"       evidence: {e}" for e in f.evidence]
            if f.fix:
                lines.append(f"       sweep next: python sweep.py ... {' '.join(f.fix)}")
            lines += [f"       outside ddlio: {line}" for line in f.snippet.splitlines()]
        if quiet and not show_ok:
            lines.append(f"  ok   {', '.join(f.code for f in quiet)}")
        if d.reproduce:
            lines.append(f"  measure the fix before you change your job: {d.reproduce}")
    return "\n".join(lines) + "\n"


#: row colour per level (inline: the section sits in the report's page, which has its own stylesheet)
_BG = {"high": "#fbe3e3", "warn": "#fdf0dd", "info": "#eef6ff", "ok": "#e3f4e1"}


def to_html_section(diags: list[Diagnosis]) -> str:
    """The diagnosis as one HTML section (a heading and a table; escaped; no script)."""
    parts = ["<h2 id='diagnosis'>Diagnosis</h2><p class='note'>Coded findings per configuration and observed run "
             "(<code>python -m analysis diagnose</code>; thresholds with <code>--thresholds</code>). "
             "Findings at level ok are counted, not listed.</p>"]
    if not diags:
        return parts[0] + "<p>Nothing to diagnose.</p>"
    head = "".join(f"<th>{c}</th>" for c in ("subject", "level", "code", "finding", "value / threshold", "evidence",
                                              "sweep next", "outside ddlio"))
    body = []
    for d in by_severity(diags):
        shown = [f for f in d.findings if f.level != Level.OK]
        ok = len(d.findings) - len(shown)
        for f in sorted(shown, key=lambda f: -f.level):
            body.append(
                f"<tr style='background:{_BG[str(f.level)]}'><td>{html.escape(d.subject.label)}</td>"
                f"<td>{f.level}</td><td>{html.escape(f.code)}</td><td>{html.escape(f.message)}</td>"
                f"<td class='num'>{_num(f.value)} / {_num(f.threshold)}</td>"
                f"<td>{'<br>'.join(html.escape(e) for e in f.evidence)}</td>"
                f"<td><code>{html.escape(' '.join(f.fix))}</code></td>"
                f"<td><code>{html.escape(f.snippet)}</code></td></tr>")
        body.append(f"<tr style='background:{_BG['ok']}'><td>{html.escape(d.subject.label)}</td><td>ok</td>"
                    f"<td colspan='6'>{ok} finding(s) quiet</td></tr>")
        if d.reproduce:
            body.append(f"<tr><td>{html.escape(d.subject.label)}</td><td></td><td colspan='6'>measure the fix "
                        f"before you change your job: <code>{html.escape(d.reproduce)}</code></td></tr>")
    return "".join(parts) + f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}" \
                            "</tbody></table>"


def to_html_page(diags: list[Diagnosis]) -> str:
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ddlio diagnosis</title></head>"
            f"<body>{to_html_section(diags)}</body></html>\n")
