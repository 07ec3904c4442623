"""The "Minimal strength" section of symptoms.md, study.md and report.html.

Built from the CSVs ``trainwreck strength`` (or the catalog's strength pass) leaves in
``RESULTS/strength/``: one row per (loop, operator, direction) with the weakest setting
at which the bug shows in the outcome and in a symptom, and the bracket it was found in.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

STRENGTH_DIR = "strength"  # in the results folder, beside catalog/
COLUMNS = ("loop", "operator", "direction", "outcome from", "symptom from", "settings", "runs")


def load_strength(folder: Path, loops: set[str] | None = None) -> pd.DataFrame:
    """Every stored search as one summary row (empty when there are none)."""
    rows = []
    for path in sorted(Path(folder).glob("*.csv")):
        try:
            frame = pd.read_csv(path)
        except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
            continue
        if frame.empty or {"loop", "operator", "direction", "seeds"} - set(frame.columns):
            continue
        first = frame.iloc[0]
        if loops is not None and first["loop"] not in loops:
            continue
        param = frame.columns[3]  # the axis parameter, right after direction
        rows.append(
            {
                "loop": first["loop"],
                "operator": first["operator"],
                "direction": first["direction"],
                "outcome from": _threshold(frame, param, "outcome"),
                "symptom from": _threshold(frame, param, "symptom"),
                "settings": len(frame),
                "runs": int(frame["seeds"].sum()),
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _threshold(frame: pd.DataFrame, param: str, axis: str) -> str:
    found = frame[frame[f"{axis}_threshold"].astype(bool)]
    if len(found):
        value = found.iloc[0][param]
        below = frame[~frame[f"shows_{axis}"].astype(bool)]
        weaker = f" (not at {_shown(below.iloc[-1][param])})" if len(below) else ""
        return f"{param}={_shown(value)}{weaker}"
    strongest = frame.iloc[-1][param]
    return f"not up to {param}={_shown(strongest)}"


def _shown(value) -> str:
    return value if isinstance(value, str) else f"{float(value):.3g}"


INTRO = (
    "The weakest setting of each parametric operator at which its bug shows, in the outcome "
    "(measured severity not silent) and in any symptom (a label on 80% of seeds), found by "
    "log-space bisection with adaptive seeds at each setting (docs/adaptive.md)."
)


def strength_markdown(summary: pd.DataFrame) -> str:
    if summary.empty:
        return ""
    lines = ["## Minimal strength", "", INTRO, ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for row in summary.to_dict("records"):
        lines.append("| " + " | ".join(str(row[column]) for column in COLUMNS) + " |")
    return "\n".join([*lines, ""])


def strength_html(summary: pd.DataFrame) -> str:
    if summary.empty:
        return ""
    return (
        '<section id="strength"><h2>Minimal strength</h2><p>'
        + html.escape(INTRO)
        + "</p>"
        + summary.to_html(index=False, escape=True, border=0, na_rep="")
        + "</section>"
    )
