"""The bug-interactions table as the catalog shows it (study.md, report.html) and as
``trainwreck quiz interactions`` writes it.

Its own module so that the catalog renders interactions without importing the quiz (which
imports the catalog to measure): the catalog -> quiz -> catalog circle is gone.
"""

from __future__ import annotations

import pandas as pd

CSV_FILE = "interactions.csv"
MARKDOWN_FILE = "interactions.md"
INTERACTION_FILES = (CSV_FILE, MARKDOWN_FILE)
# Impacts within this of the independence prediction (or of zero) are not interactions.
TOLERANCE = 0.1


def interactions_markdown(frame: pd.DataFrame) -> str:
    """The section for study.md / report.html: one table, the rule in one paragraph."""
    lines = [
        "## Interactions between bugs",
        "",
        "Impact = share of the correct loop's progress lost (validation metric over chance,",
        "or loss drop), median over seeds. Two independent bugs would lose",
        f"`1 - (1-a)(1-b)`; more than that (+{TOLERANCE}) amplifies, less masks, as expected",
        "adds; a pair that shows none of one bug's own symptoms masks it too.",
        "",
        "| loop | from | A | B | relation | hidden | a | b | A+B | expected | symptoms A+B |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in frame.itertuples(index=False):
        lines.append(
            f"| {row.loop} | {row.origin} | {row.a} | {row.b} | {row.relation} | {row.hidden} "
            f"| {_num(row.impact_a)} | {_num(row.impact_b)} | {_num(row.impact_ab)} "
            f"| {_num(row.expected_ab)} | {row.labels_ab} |"
        )
    return "\n".join(lines) + "\n"


def _num(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) else ""
