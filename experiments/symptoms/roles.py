"""Which runs are the reference, the noop control, and the mutants."""

from __future__ import annotations

import pandas as pd

NOOP = "noop"
REFERENCE = "none"


def assign_roles(runs: pd.DataFrame) -> pd.Series:
    """``reference``, ``noop`` or ``mutant`` for every run.

    An explicit control (identity or operator ``noop``) is ``noop``. Otherwise unmutated
    runs on seeds that no mutant of the same (loop, device) used become the noop control,
    as long as at least two unmutated seeds remain shared with the mutants as reference.
    """
    roles = pd.Series("mutant", index=runs.index, dtype=object)
    explicit_noop = (runs["identity"] == NOOP) | runs["operator"].eq(NOOP)
    roles[explicit_noop] = NOOP
    unmutated = (runs["identity"] == REFERENCE) & ~explicit_noop
    roles[unmutated] = "reference"
    for _, group in runs.groupby(["loop", "device"], sort=False):
        if explicit_noop[group.index].any():
            continue
        mutant_seeds = set(group.loc[roles[group.index] == "mutant", "seed"])
        plain = group[unmutated[group.index]]
        if not mutant_seeds:
            continue
        spare = plain.index[~plain["seed"].isin(mutant_seeds)]
        if len(spare) >= 2 and len(plain) - len(spare) >= 2:
            roles[spare] = NOOP
    return roles
