"""Mutant validity: is each mutant the bug it claims? Counted per operator.

Four measured answers set a mutant apart from the severity statistics, the agreement of
measured and declared severity and the benchmark's ground truth: ``stillborn`` (its
rewrite cannot run, or it crashed before its witness in a way its operator does not
declare: ``experiments/harness/raised.py``, ``experiments.witness``), ``unconfirmed`` (its
runs never showed its operator's witness: ``experiments.witness``), ``equivalent`` (its
runs are the reference's, bit for bit: ``experiments.equivalence``) and ``unreached`` (its
changed lines never ran: ``experiments.unreached``). ``validity_table`` counts them per operator from the
catalog's symptoms table, for the catalog's "Mutant validity" section and ``trainwreck
bench``.
"""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from experiments.equivalence import EQUIVALENT
from experiments.unreached import STILLBORN, UNCONFIRMED, UNREACHED

NOT_THE_BUG = (STILLBORN, UNCONFIRMED, EQUIVALENT, UNREACHED)
VALIDITY_COLUMNS = (
    "operator",
    "mutants",
    "stillborn",
    "unconfirmed",
    "equivalent",
    "unreached",
    "judged",
    "stillborn_rate",
    "unconfirmed_rate",
    "equivalent_rate",
    "unconfirmed_why",
)


def is_valid(measured: object) -> bool:
    """Whether a mutant with this measured verdict stands as its bug."""
    return measured not in NOT_THE_BUG


def validity_table(symptoms: pd.DataFrame) -> pd.DataFrame:
    """One row per operator over the mutants (role ``mutant``) of ``symptoms``: how many,
    how many stillborn, unconfirmed, equivalent and unreached, how many judged as bugs, and
    the rates (of the operator's mutants). Worst first: most not-the-bug mutants, then name."""
    if symptoms.empty or "role" not in symptoms:
        return pd.DataFrame(columns=list(VALIDITY_COLUMNS))
    mutants = symptoms[symptoms["role"] == "mutant"]
    rows = []
    for operator, group in mutants.groupby("operator", sort=True):
        measured = group["measured"]
        counts = {status: int(measured.eq(status).sum()) for status in NOT_THE_BUG}
        said = group["outcome"] if "outcome" in group else pd.Series("", index=group.index)
        why = Counter(_reason(text) for text in said[measured.eq(UNCONFIRMED)])
        rows.append(
            {
                "operator": operator,
                "mutants": len(group),
                **counts,
                "judged": len(group) - sum(counts.values()),
                "stillborn_rate": counts[STILLBORN] / len(group),
                "unconfirmed_rate": counts[UNCONFIRMED] / len(group),
                "equivalent_rate": counts[EQUIVALENT] / len(group),
                "unconfirmed_why": "; ".join(f"{text} {n}" for text, n in why.most_common()),
            }
        )
    table = pd.DataFrame(rows, columns=list(VALIDITY_COLUMNS))
    if table.empty:
        return table
    table["_aside"] = table[list(NOT_THE_BUG)].sum(axis=1)
    table = table.sort_values(["_aside", "operator"], ascending=[False, True], kind="stable")
    return table.drop(columns="_aside").reset_index(drop=True)


def totals(table: pd.DataFrame) -> dict[str, int]:
    """The column sums of ``validity_table``: mutants, stillborn, unconfirmed, equivalent,
    unreached, judged."""
    names = ("mutants", *NOT_THE_BUG, "judged")
    return {name: int(table[name].sum()) if len(table) else 0 for name in names}


def _reason(outcome: object) -> str:
    """``no effect on this model`` from ``unconfirmed (no effect on this model): ...``."""
    found = re.match(r"unconfirmed \(([^)]*)\)", str(outcome or ""))
    return found.group(1) if found else "unconfirmed"
