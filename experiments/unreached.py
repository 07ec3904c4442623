"""Runs that say nothing about the bug are set aside, not judged: ``unreached``,
``stillborn`` and ``unconfirmed`` mutants.

The harness gives a run the status ``unreached`` when its changed statements never ran
(``experiments/harness/reach.py``): it executed exactly the unmutated code. It gives
``stillborn`` to a run that died of a Python-level error at a changed line before its first
optimizer step, when the operator does not declare such a crash
(``experiments/harness/raised.py``): the rewrite cannot run, so it is not the bug its
operator names. The catalog gives ``unconfirmed`` to a run that ended without its
operator's witness, and ``stillborn`` to one that crashed, before its witness fired, in a
way its operator does not declare (``experiments.witness``, ``catalog/witnesses.py``).
``judge_reached`` keeps those runs out of the statistics (no severity,
no effect size, no seed in the sequential rule), labels each with its status, and lists
each mutant none of whose runs was judged with ``measured`` set to that status.

A mutant that ran its changed lines on some seeds only is judged on those alone (a branch
taken on some seeds); a mutant stillborn on any seed is stillborn as a whole: a rewrite
that cannot run on one seed is not the bug it claims on the others.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pandas as pd

UNREACHED = "unreached"
STILLBORN = "stillborn"
UNCONFIRMED = "unconfirmed"
# Worst first: a mutant with runs of several is the first of them it has.
SET_ASIDE = (STILLBORN, UNCONFIRMED, UNREACHED)
_KEYS = ("loop", "device", "identity")
_COPIED = ("operator", "variant", "site", "category", "role")


def judge_reached(frame: pd.DataFrame, judge: Callable[[pd.DataFrame], Any]) -> Any:
    """``judge(frame)`` on the runs that say something about their bug; see the module
    docstring."""
    if "status" not in frame:
        return judge(frame)
    stillborn = set(
        map(tuple, frame.loc[frame["status"].eq(STILLBORN), list(_KEYS)].itertuples(index=False))
    )
    keys = list(map(tuple, frame[list(_KEYS)].itertuples(index=False)))
    whole = pd.Series([key in stillborn for key in keys], index=frame.index)
    aside = frame["status"].isin((UNREACHED, UNCONFIRMED)) | whole
    if not aside.any():
        return judge(frame)
    judgement = judge(frame[~aside])
    labels = [
        [_status(frame, index)] if set_aside else list(judgement.run_labels.get(index, []))
        for index, set_aside in zip(frame.index, aside)
    ]
    judged = set(map(tuple, frame.loc[~aside, list(_KEYS)].itertuples(index=False)))
    rows = []
    for key, group in frame[aside].groupby(list(_KEYS), sort=True):
        if tuple(key) in judged:
            continue
        first = group.iloc[0]
        seeds = sorted(int(seed) for seed in group["seed"])
        status = STILLBORN if tuple(key) in stillborn else _worst(group["status"])
        count = int(group["status"].eq(status).sum())
        rows.append(
            {
                **dict(zip(_KEYS, key)),
                **{name: first.get(name) for name in _COPIED},
                "n_seeds": len(seeds),
                "n_reference": 0,
                "seeds": json.dumps(seeds),  # JSON text, as in the judged rows
                "reference_seeds": "[]",
                "measured": status,
                "outcome": _why(group, status),
                "symptoms": f"{status} {count}/{len(seeds)}",
                "label_fractions": json.dumps({status: count / len(seeds)}),
            }
        )
    symptoms = judgement.symptoms
    if rows:
        extra = pd.DataFrame(rows).reindex(columns=symptoms.columns)
        symptoms = pd.concat([symptoms, extra], ignore_index=True) if len(symptoms) else extra
    severity = [
        None if set_aside else judgement.run_severity.get(index)
        for index, set_aside in zip(frame.index, aside)
    ]
    return dataclasses.replace(
        judgement,
        run_labels=pd.Series(labels, index=frame.index, dtype=object),
        run_severity=pd.Series(severity, index=frame.index, dtype=object),
        symptoms=symptoms,
    )


def _worst(statuses: pd.Series) -> str:
    return next(status for status in SET_ASIDE if statuses.eq(status).any())


def _why(group: pd.DataFrame, status: str) -> str | None:
    """One line: the witness verdict of the mutant's first run of ``status`` (the catalog's
    ``witness`` column), else a stillborn run's exception."""
    run = group[group["status"].eq(status)].iloc[0]
    said = run.get("witness")
    if isinstance(said, str) and said:
        return said
    if status != STILLBORN:
        return None
    text = ": ".join(str(part) for part in (run.get("exc_type"), run.get("exc_message")) if part)
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def _status(frame: pd.DataFrame, index: Any) -> str:
    """A set-aside run's label: its own status, or ``stillborn`` for a run of a stillborn
    mutant that itself ended otherwise (its verdict would describe a broken rewrite)."""
    status = str(frame.at[index, "status"])
    return status if status in SET_ASIDE else STILLBORN
