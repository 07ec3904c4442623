"""Mutants whose changed statements never ran are set aside, not judged.

The harness gives such a run the status ``unreached`` (``experiments/harness/reach.py``):
it executed exactly the unmutated code, so whatever it measured says nothing about the
bug. ``judge_reached`` keeps those runs out of the statistics, labels them ``unreached``
and lists each mutant that never ran on any seed with ``measured = unreached``, so the
tables show it as such (a mutant that ran on some seeds is judged on those alone).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pandas as pd

UNREACHED = "unreached"
_KEYS = ("loop", "device", "identity")
_COPIED = ("operator", "variant", "site", "category", "role")


def judge_reached(frame: pd.DataFrame, judge: Callable[[pd.DataFrame], Any]) -> Any:
    """``judge(frame)`` on the runs that reached their mutation; see the module docstring."""
    aside = frame["status"].eq(UNREACHED) if "status" in frame else None
    if aside is None or not aside.any():
        return judge(frame)
    judgement = judge(frame[~aside])
    labels = [
        [UNREACHED] if set_aside else list(judgement.run_labels.get(index, []))
        for index, set_aside in zip(frame.index, aside)
    ]
    reached = set(map(tuple, frame.loc[~aside, list(_KEYS)].itertuples(index=False)))
    rows = []
    for key, group in frame[aside].groupby(list(_KEYS), sort=True):
        if tuple(key) in reached:
            continue
        first = group.iloc[0]
        seeds = sorted(int(seed) for seed in group["seed"])
        rows.append(
            {
                **dict(zip(_KEYS, key)),
                **{name: first.get(name) for name in _COPIED},
                "n_seeds": len(seeds),
                "n_reference": 0,
                "seeds": json.dumps(seeds),  # JSON text, as in the judged rows
                "reference_seeds": "[]",
                "measured": UNREACHED,
                "symptoms": f"{UNREACHED} {len(seeds)}/{len(seeds)}",
                "label_fractions": json.dumps({UNREACHED: 1.0}),
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
