"""Mutant validity: is each mutant the bug it claims? Counted per operator.

Three measured answers set a mutant apart from the severity statistics, the agreement of
measured and declared severity and the benchmark's ground truth: ``stillborn`` (its
rewrite cannot run: ``experiments/harness/raised.py``), ``equivalent`` (its runs are the
reference's, bit for bit: ``experiments.equivalence``) and ``unreached`` (its changed lines
never ran: ``experiments.unreached``). ``validity_table`` counts them per operator from the
catalog's symptoms table, for the catalog's "Mutant validity" section and ``trainwreck
bench``.
"""

from __future__ import annotations

import pandas as pd

from experiments.equivalence import EQUIVALENT
from experiments.unreached import STILLBORN, UNREACHED

NOT_THE_BUG = (STILLBORN, EQUIVALENT, UNREACHED)
VALIDITY_COLUMNS = (
    "operator",
    "mutants",
    "stillborn",
    "equivalent",
    "unreached",
    "judged",
    "stillborn_rate",
    "equivalent_rate",
)


def is_valid(measured: object) -> bool:
    """Whether a mutant with this measured verdict stands as its bug."""
    return measured not in NOT_THE_BUG


def validity_table(symptoms: pd.DataFrame) -> pd.DataFrame:
    """One row per operator over the mutants (role ``mutant``) of ``symptoms``: how many,
    how many stillborn, equivalent and unreached, how many judged as bugs, and the two
    rates (of the operator's mutants). Worst first: most not-the-bug mutants, then name."""
    if symptoms.empty or "role" not in symptoms:
        return pd.DataFrame(columns=list(VALIDITY_COLUMNS))
    mutants = symptoms[symptoms["role"] == "mutant"]
    rows = []
    for operator, group in mutants.groupby("operator", sort=True):
        measured = group["measured"]
        counts = {status: int(measured.eq(status).sum()) for status in NOT_THE_BUG}
        rows.append(
            {
                "operator": operator,
                "mutants": len(group),
                **counts,
                "judged": len(group) - sum(counts.values()),
                "stillborn_rate": counts[STILLBORN] / len(group),
                "equivalent_rate": counts[EQUIVALENT] / len(group),
            }
        )
    table = pd.DataFrame(rows, columns=list(VALIDITY_COLUMNS))
    if table.empty:
        return table
    table["_aside"] = table["stillborn"] + table["equivalent"] + table["unreached"]
    table = table.sort_values(["_aside", "operator"], ascending=[False, True], kind="stable")
    return table.drop(columns="_aside").reset_index(drop=True)


def totals(table: pd.DataFrame) -> dict[str, int]:
    """The column sums of ``validity_table``: mutants, stillborn, equivalent, unreached,
    judged."""
    names = ("mutants", STILLBORN, EQUIVALENT, UNREACHED, "judged")
    return {name: int(table[name].sum()) if len(table) else 0 for name in names}
