"""The leaderboard: one row per detector, detection at a fixed false-positive rate, the
clean-code column, the detection/false-positive curves, as Markdown, CSV and an HTML
section (a table and a small SVG, no scripts, no external assets)."""

from __future__ import annotations

import csv
import html
import io
import itertools
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from experiments.bench.operating import CURVE_FPRS, TARGET_FPR, Point, best_within, curve
from experiments.bench.score import (
    DetectorReport,
    ground_truth,
    is_style,
    per_group,
    scores,
    summarize,
)
from experiments.files import write_text_atomic

LEADERBOARD_COLUMNS = (
    "detector",
    "kind",
    "mutants",
    "detection_rate",
    "clean",
    "fp_rate",
    "fp_ci95",
    "detection_at_5fpr",
    "clean_code_fp",
    "localization",
    "category_accuracy",
    "changed",
    "median_steps",
    "mean_seconds",
    "errors",
    "note",
)


def _fpr_note(summary: dict[str, Any]) -> str:
    """Whether the clean cases can back a claim of FPR <= 5% at the operating point."""
    clean, high = summary["clean"], summary["fp_ci_high"]
    if not clean or summary["kind"] in ("static", "external"):  # a few scripts, not seeds
        return ""
    if summary["clean_failed"]:
        # A clean run the detector failed on is unflagged without being judged.
        return (
            f"FPR not measured: the detector failed on {summary['clean_failed']} of {clean}"
            " clean runs"
        )
    if high <= TARGET_FPR:
        return f"FPR <= {TARGET_FPR:g} established (95% upper bound {high:.3f})"
    return (
        f"FPR <= {TARGET_FPR:g} not established: {summary['false_positives']} of {clean}"
        f" clean runs flagged, 95% upper bound {high:.3f}"
    )


def leaderboard_rows(reports: Iterable[DetectorReport], tolerance: int = 0) -> list[dict[str, Any]]:
    rows = []
    for report in reports:
        if report.unavailable:
            row = dict.fromkeys(LEADERBOARD_COLUMNS)
            row.update(
                detector=report.name, kind=report.kind, note=f"unavailable: {report.unavailable}"
            )
            rows.append(row)
            continue
        summary = summarize(report.outcomes, tolerance, report.scored) | {"kind": report.kind}
        row = {column: summary.get(column) for column in LEADERBOARD_COLUMNS}
        row.update(detector=report.name, kind=report.kind)
        if summary["clean"]:
            row["fp_ci95"] = f"{summary['fp_ci_low']:.3f}-{summary['fp_ci_high']:.3f}"
        notes = [_fpr_note(summary)]
        kinds = sorted({o.error_kind for o in report.outcomes if o.error_kind})
        if kinds:
            notes.append("errors: " + ", ".join(kinds))
        first_fit = next((o.error for o in report.outcomes if o.error_kind == "fit"), None)
        if first_fit:
            notes.append(first_fit)
        row["note"] = "; ".join(note for note in notes if note)
        rows.append(row)
    return rows


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return str(value)


def markdown_table(rows: list[dict[str, Any]], columns: Iterable[str] | None = None) -> str:
    if not rows:
        return "(no rows)\n"
    names = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in rows:
        lines.append(
            "| " + " | ".join(_cell(row.get(name)).replace("|", "/") for name in names) + " |"
        )
    return "\n".join(lines) + "\n"


# -- curves ----------------------------------------------------------------------------------


def report_curve(report: DetectorReport) -> list[Point]:
    """Detection against false-positive rate over the detector's thresholds (run detectors
    use clean runs; source detectors the loops' clean scripts)."""
    outcomes = ground_truth(report.outcomes)
    clean = [o for o in outcomes if o.case.truth.clean and not is_style(o.case)]
    mutants = [o for o in outcomes if not o.case.truth.clean]
    return curve(scores(clean, report.scored), scores(mutants, report.scored))


def curve_rows(report: DetectorReport) -> list[dict[str, Any]]:
    """The best detection within each false-positive budget of ``CURVE_FPRS``."""
    points = report_curve(report)
    rows = []
    for budget in CURVE_FPRS:
        point = best_within(points, budget)
        rows.append(
            {
                "max_fpr": budget,
                "threshold": None if point is None else point.threshold,
                "fpr": None if point is None else point.fpr,
                "detection": None if point is None else point.detection,
                "false_positives": None if point is None else point.false_positives,
                "detected": None if point is None else point.detected,
            }
        )
    return rows


SVG_MAX_FPR = 0.25  # the x axis: the region a user would accept, not up to "flag everything"


def _envelope(points: list[Point], max_fpr: float) -> list[tuple[float, float]]:
    """(fpr, detection) corners of the step curve up to ``max_fpr``: the best detection at
    each distinct rate, the curve held flat to the axis's end."""
    best: dict[float, float] = {}
    for point in points:
        if not math.isnan(point.fpr + point.detection) and point.fpr <= max_fpr:
            best[point.fpr] = max(best.get(point.fpr, 0.0), point.detection)
    corners: list[tuple[float, float]] = []
    for fpr in sorted(best):
        if not corners or best[fpr] > corners[-1][1]:
            corners.append((fpr, best[fpr]))
    if corners and corners[-1][0] < max_fpr:
        corners.append((max_fpr, corners[-1][1]))
    return corners


def curve_svg(reports: list[DetectorReport], size: int = 220) -> str:
    """Detection (y) against false-positive rate (x, 0 to ``SVG_MAX_FPR``) as step lines,
    one per detector, with the 5% budget marked."""
    pad = 30
    span = size - 2 * pad
    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")

    def xy(fpr: float, detection: float) -> str:
        return f"{pad + fpr / SVG_MAX_FPR * span:.1f},{pad + (1 - detection) * span:.1f}"

    target_x = pad + TARGET_FPR / SVG_MAX_FPR * span
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 160}" height="{size}"'
        ' role="img" aria-label="detection against false-positive rate">',
        f'<rect x="{pad}" y="{pad}" width="{span}" height="{span}" fill="none" stroke="#999"/>',
        f'<line x1="{target_x:.1f}" y1="{pad}" x2="{target_x:.1f}" y2="{pad + span}"'
        ' stroke="#999" stroke-dasharray="3,3"/>',
        f'<text x="{pad}" y="{size - 8}" font-size="10">false-positive rate'
        f" (0-{SVG_MAX_FPR:g}; dashed: {TARGET_FPR:g})</text>",
        f'<text x="4" y="{pad - 8}" font-size="10">detection (0-1)</text>',
    ]
    drawn = [r for r in reports if not r.unavailable and r.outcomes]
    for index, report in enumerate(drawn):
        corners = _envelope(report_curve(report), SVG_MAX_FPR)
        if not corners:
            continue
        steps = [xy(*corners[0])]
        for (_, previous), (fpr, detection) in itertools.pairwise(corners):
            steps += [xy(fpr, previous), xy(fpr, detection)]
        colour = colours[index % len(colours)]
        parts.append(
            f'<polyline points="{" ".join(steps)}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        parts.append(
            f'<text x="{size - 10}" y="{pad + 14 * index + 10}" font-size="11" fill="{colour}">'
            f"{html.escape(report.name)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


# -- files -----------------------------------------------------------------------------------


def _flagged_clean_code(report: DetectorReport) -> list[str]:
    return sorted(
        f"{o.case.script.path}: " + "; ".join(f.rule or f.category for f in o.findings)
        for o in report.outcomes
        if o.case.truth.clean and o.case.script is not None and o.detected
    )


def leaderboard_markdown(reports: list[DetectorReport], tolerance: int = 0) -> str:
    parts = [
        "# Detector leaderboard\n\n",
        f"`detection_at_5fpr`: the best detection over the detector's thresholds whose"
        f" false-positive rate on the clean runs (or clean loop scripts) is <= {TARGET_FPR:g};"
        " a detector that flags every clean case gets 0. `fp_ci95`: exact 95% interval of"
        " the false-positive rate. `clean_code_fp`: unmutated scripts (reference loops and"
        " tests/styles) with any finding, source detectors only.\n\n",
        markdown_table(leaderboard_rows(reports, tolerance), LEADERBOARD_COLUMNS),
    ]
    for report in reports:
        if report.unavailable:
            continue
        if report.fit_notes:
            parts.append(f"\n## {report.name}: calibration\n\n")
            parts.append("".join(f"- {note}\n" for note in report.fit_notes))
        flagged = _flagged_clean_code(report)
        if flagged:
            parts.append(f"\n## {report.name}: findings on clean code\n\n")
            parts.append("".join(f"- {line}\n" for line in flagged))
        if report.kind != "static":
            parts.append(f"\n## {report.name}: detection within a false-positive budget\n\n")
            parts.append(markdown_table(curve_rows(report)))
        parts.append(f"\n## {report.name}: per category\n\n")
        parts.append(markdown_table(per_group(report.outcomes, "category", tolerance)))
        parts.append(f"\n## {report.name}: per operator\n\n")
        parts.append(markdown_table(per_group(report.outcomes, "operator", tolerance)))
    return "".join(parts)


def html_section(reports: list[DetectorReport], tolerance: int = 0) -> str:
    """A self-contained ``<section>`` for the HTML report (no scripts, no external assets)."""
    rows = leaderboard_rows(reports, tolerance)
    head = "".join(f"<th>{html.escape(column)}</th>" for column in LEADERBOARD_COLUMNS)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(_cell(row.get(c)))}</td>" for c in LEADERBOARD_COLUMNS)
        + "</tr>"
        for row in rows
    )
    curves = [r for r in reports if not r.unavailable and r.kind != "static" and r.outcomes]
    curve_tables = "".join(
        f"<h3>{html.escape(report.name)}: detection within a false-positive budget</h3>"
        "<table><thead><tr><th>max FPR</th><th>threshold</th><th>FPR</th><th>detection</th>"
        "</tr></thead><tbody>"
        + "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(_cell(row[key]))}</td>"
                for key in ("max_fpr", "threshold", "fpr", "detection")
            )
            + "</tr>"
            for row in curve_rows(report)
        )
        + "</tbody></table>"
        for report in curves
    )
    return (
        '<section id="detector-benchmark"><h2>Detector benchmark</h2>'
        "<p>Detection rate over mutants, false-positive rate over unmutated runs/scripts "
        "(with its exact 95% interval), detection at a false-positive rate of at most "
        f"{TARGET_FPR:g} (a detector that flags everything gets 0), findings on clean code "
        "(reference loops and style scripts), localization and category accuracy over "
        "detected mutants.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        + (curve_svg(curves) + curve_tables if curves else "")
        + "</section>"
    )


def _csv_text(rows: list[dict[str, Any]], columns: Iterable[str] | None = None) -> str:
    buffer = io.StringIO()
    names = list(columns or (rows[0].keys() if rows else []))
    writer = csv.DictWriter(buffer, fieldnames=names, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def outcome_rows(reports: Iterable[DetectorReport]) -> list[dict[str, Any]]:
    rows = []
    for report in reports:
        for outcome in report.outcomes:
            truth = outcome.case.truth
            rows.append(
                {
                    "detector": report.name,
                    "case": outcome.case.case_id,
                    "loop": outcome.case.loop,
                    "seed": outcome.case.seed,
                    "operators": "+".join(truth.operators),
                    "categories": "+".join(truth.categories),
                    "mutant_lines": " ".join(map(str, truth.mutant_lines)),
                    "detected": outcome.detected,
                    "score": outcome.score,
                    "finding_categories": " ".join(f.category for f in outcome.findings),
                    "finding_lines": " ".join(str(f.line) for f in outcome.findings if f.line),
                    "finding_rules": " ".join(f.rule for f in outcome.findings),
                    "first_step": outcome.first_step,
                    "error": outcome.error or "",
                    "seconds": round(outcome.seconds, 4),
                }
            )
    return rows


def write_leaderboard(
    reports: list[DetectorReport], out_dir: Path, tolerance: int = 0
) -> list[Path]:
    """leaderboard.md, leaderboard.csv, per_operator.csv, curves.csv, outcomes.csv and
    section.html."""
    per_operator = [
        {"detector": report.name, **row}
        for report in reports
        for row in per_group(report.outcomes, "operator", tolerance)
    ]
    curves = [
        {"detector": report.name, **row}
        for report in reports
        if not report.unavailable and report.outcomes
        for row in curve_rows(report)
    ]
    files = {
        "leaderboard.md": leaderboard_markdown(reports, tolerance),
        "leaderboard.csv": _csv_text(leaderboard_rows(reports, tolerance), LEADERBOARD_COLUMNS),
        "per_operator.csv": _csv_text(per_operator),
        "curves.csv": _csv_text(curves),
        "outcomes.csv": _csv_text(outcome_rows(reports)),
        "section.html": html_section(reports, tolerance),
    }
    written = []
    for name, text in files.items():
        write_text_atomic(out_dir / name, text)
        written.append(out_dir / name)
    return written
