"""Did each mutant run show its bug? The runs frame's witness verdicts.

Every mutant run is compared with the unmutated run of its loop, device, seed and argv
(``experiments.witness.decide_runs``): a run without its operator's witness becomes
``unconfirmed``, one that crashed before it in a way the operator does not declare
``stillborn``; both are then set aside like ``unreached`` runs (``experiments.unreached``).
The frame keeps what the run itself did in ``ended`` (the harness's status), the verdict
in ``witness`` (one line: what fired, or why nothing did) and ``witness_state``
(``confirmed``, ``unconfirmed``, ``stillborn``, ``unknown``; empty for unmutated runs);
the probes' raw facts are dropped (they are in each run's ``result.json``).
"""

from __future__ import annotations

import pandas as pd

from experiments.witness import CONFIRMED, STILLBORN, UNCONFIRMED, decide_runs

_FIELDS = (
    "loop",
    "device",
    "seed",
    "argv",
    "identity",
    "operators",
    "params",
    "status",
    "exc_type",
    "exc_message",
    "witness",
)


def mark_witnesses(frame: pd.DataFrame) -> None:
    """Decide every mutant run's witness in ``frame`` (in place; module docstring)."""
    if not len(frame):
        for column in ("ended", "witness", "witness_state"):
            frame[column] = pd.Series(dtype=object)
        return
    if "witness" not in frame:
        frame["witness"] = None
    records = frame.reindex(columns=list(_FIELDS)).to_dict("records")
    verdicts = decide_runs(records)
    if "ended" not in frame:
        frame.insert(frame.columns.get_loc("status") + 1, "ended", frame["status"])
    frame["witness"] = [_line(verdict) for verdict in verdicts]
    frame["witness_state"] = ["" if verdict is None else verdict.state for verdict in verdicts]
    for state in (UNCONFIRMED, STILLBORN):
        frame.loc[frame["witness_state"].eq(state), "status"] = state


def _line(verdict) -> str:
    if verdict is None:
        return ""
    if verdict.state == CONFIRMED and verdict.undeclared:
        return f"{verdict.text} ({verdict.undeclared})"
    return verdict.text


def with_witness_column(symptoms: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """``symptoms`` with ``witness`` after ``why``: per mutant, what its first confirmed run
    showed (or why none did); a crash its operator does not declare, after the witness
    fired, also heads ``why`` ("undeclared: <exception>"), for a reader to judge."""
    if symptoms.empty or "witness" not in frame:
        return symptoms
    said: dict[tuple, str] = {}
    confirmed: set[tuple] = set()
    undeclared: dict[tuple, str] = {}
    keys = zip(frame["loop"], frame["device"], frame["identity"])
    for key, state, line in zip(keys, frame["witness_state"], frame["witness"]):
        if not line:
            continue
        if key not in said or (state == CONFIRMED and key not in confirmed):
            said[key] = line  # the first confirmed run's line, else the first run's
        if state == CONFIRMED:
            confirmed.add(key)
        if "(undeclared: " in line:
            undeclared.setdefault(key, line[line.index("(undeclared: ") + 1 : -1])
    symptoms = symptoms.copy()
    rows = list(zip(symptoms["loop"], symptoms["device"], symptoms["identity"]))
    position = symptoms.columns.get_loc("why") + 1 if "why" in symptoms else len(symptoms.columns)
    symptoms.insert(position, "witness", [said.get(key, "") for key in rows])
    if "why" in symptoms and undeclared:
        symptoms["why"] = [
            "; ".join(part for part in (undeclared.get(key, ""), str(why or "")) if part)
            for key, why in zip(rows, symptoms["why"])
        ]
    return symptoms
