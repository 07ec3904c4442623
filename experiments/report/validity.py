"""The "Mutant validity" section of symptoms.md, report.html and ``trainwreck bench``:
per operator, how many of its mutants were not the bug they claim (``experiments.validity``).
"""

from __future__ import annotations

import html

import pandas as pd

from experiments.validity import totals, validity_table

TITLE = "Mutant validity"
INTRO = (
    "Is each mutant the bug its operator names? Every operator declares a witness, the "
    "runtime fact that makes a run its bug (a backward into a stale .grad, a dropout "
    "module in the wrong mode, a learning rate changed by the factor), compared with the "
    "unmutated loop's run on the same seed. Unconfirmed: no run showed it; the row's why "
    "says which (no effect on this model, mechanism never reached, not observable on this "
    "device, the run ended first). Stillborn: a run crashed before its witness fired in a "
    "way its operator does not declare, or its rewrite died of a Python-level error "
    "(NameError, AttributeError, ImportError, a call's arity or keywords) at a changed "
    "line before the first optimizer step. Equivalent: every run identical to the "
    "unmutated loop's on the same seed (losses, metrics, counters, held-out result, "
    "printed output), or declared equivalent up to float rounding. Unreached: the changed "
    "lines never ran. These mutants are shown in the tables but kept out of the severity "
    "statistics and the agreement with declared severities; the benchmark leaves their "
    "runs out of its ground truth, and the code of stillborn ones (the rest is measured on "
    "this device and budget: a dropped .to(device) does nothing on the CPU). Rates are of "
    "each operator's mutants."
)
_HEADERS = (
    ("operator", "operator"),
    ("mutants", "mutants"),
    ("stillborn", "stillborn"),
    ("unconfirmed", "unconfirmed"),
    ("equivalent", "equivalent"),
    ("unreached", "unreached"),
    ("judged", "judged as bugs"),
    ("stillborn_rate", "stillborn rate"),
    ("unconfirmed_rate", "unconfirmed rate"),
    ("equivalent_rate", "equivalent rate"),
    ("unconfirmed_why", "why unconfirmed"),
)


def summary_line(table: pd.DataFrame) -> str:
    """``12 mutants: 1 stillborn, 1 unconfirmed, 2 equivalent, 0 unreached, 8 judged as
    bugs``."""
    counts = totals(table)
    return (
        f"{counts['mutants']} mutants: {counts['stillborn']} stillborn, "
        f"{counts['unconfirmed']} unconfirmed, {counts['equivalent']} equivalent, "
        f"{counts['unreached']} unreached, {counts['judged']} judged as bugs"
    )


def _cells(row: dict) -> list[str]:
    return [
        f"{row[key]:.0%}"
        if key.endswith("_rate")
        else str(row[key] if row[key] == row[key] else "")
        for key, _ in _HEADERS
    ]


def validity_markdown(symptoms: pd.DataFrame) -> str:
    table = validity_table(symptoms)
    if table.empty:
        return ""
    lines = [f"## {TITLE}", "", INTRO, "", summary_line(table) + ".", ""]
    lines.append("| " + " | ".join(title for _, title in _HEADERS) + " |")
    lines.append("|" + "---|" * len(_HEADERS))
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in table.to_dict("records")]
    return "\n".join([*lines, ""])


def validity_html(symptoms: pd.DataFrame) -> str:
    table = validity_table(symptoms)
    if table.empty:
        return ""
    head = "".join(f"<th scope='col'>{html.escape(title)}</th>" for _, title in _HEADERS)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in _cells(row)) + "</tr>"
        for row in table.to_dict("records")
    )
    return (
        f'<section id="validity"><h2>{TITLE}</h2><p>{html.escape(INTRO)}</p>'
        f"<p>{html.escape(summary_line(table))}.</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
    )
