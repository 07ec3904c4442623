"""The lines the printed summary says per loop about its verdicts: which source measured
the loop's outcome, a control that is not silent, the rows left ``unjudged`` with the
way to measure them (docs/truth.md, "No verdict without a measure"), and the mutants
``unconfirmed`` by their witness, per reason ("Is the mutant the bug it claims?")."""

from __future__ import annotations

from collections import Counter

import pandas as pd

from experiments.symptoms import HOW_TO_MEASURE, MIN_SPREAD_SEEDS, UNJUDGED, control_warnings
from experiments.symptoms.unjudged import NO_MEASURE, REPORTED_BETTER, THROUGH_MUTANT, TOO_FEW
from experiments.unreached import UNCONFIRMED


def verdict_notes(symptoms: pd.DataFrame) -> list[str]:
    """One line per loop (its outcome source, its control's warning), then one per loop
    and reason for its unjudged mutants."""
    if symptoms.empty or "outcome_source" not in symptoms:
        return []
    warnings = control_warnings(symptoms)
    lines = []
    for (loop, device), group in symptoms.groupby(["loop", "device"], sort=True):
        sources = Counter(group["outcome_source"].dropna())
        source = sources.most_common(1)[0][0] if sources else "nothing (no run finished)"
        lines.append(f"{loop} ({device}): outcome measured by {source}")
        if (loop, device) in warnings:
            lines.append(f"{loop} ({device}): {warnings[(loop, device)]}")
        mutants = group[(group["role"] == "mutant") & (group["measured"] == UNJUDGED)]
        reasons = Counter(_reason_kind(str(reason)) for reason in mutants["unjudged_reason"])
        for kind, count in sorted(reasons.items()):
            lines.append(f"{loop} ({device}): {count} mutants unjudged, {_advice(kind)}")
        unconfirmed = group[(group["role"] == "mutant") & (group["measured"] == UNCONFIRMED)]
        why = Counter(_unconfirmed_kind(str(text)) for text in unconfirmed["outcome"])
        for kind, count in sorted(why.items()):
            lines.append(
                f"{loop} ({device}): {count} mutants unconfirmed ({kind}): their runs never "
                "showed their operator's witness (the why column of symptoms.md)"
            )
    return lines


def _unconfirmed_kind(outcome: str) -> str:
    """``not observable on this device`` from ``unconfirmed (not observable ...): ...``."""
    head = outcome.split("): ", 1)[0]
    return head.removeprefix("unconfirmed (") if head.startswith("unconfirmed (") else "no witness"


def _reason_kind(reason: str) -> str:
    for kind in (TOO_FEW, NO_MEASURE):
        if reason.startswith(kind):
            return kind
    if THROUGH_MUTANT in reason:
        return "through"
    if "control" in reason:
        return "control"
    return "better" if REPORTED_BETTER in reason else "other"


def _advice(kind: str) -> str:
    if kind == TOO_FEW:
        return (
            f"{TOO_FEW} (a label needs {MIN_SPREAD_SEEDS} reference seeds): run --seeds "
            f"{MIN_SPREAD_SEEDS} or more"
        )
    if kind == NO_MEASURE:
        return f"{NO_MEASURE} (the curve cannot tell silent from degrades): {HOW_TO_MEASURE}"
    if kind == "through":
        return (
            "the script's own number is computed through the mutated code (their changed "
            "lines ran while it evaluated), so it cannot vouch for them: name a held-out "
            "evaluation (loop.holdout=module:function)"
        )
    if kind == "control":
        return "their evidence also shows on the unmutated control"
    if kind == "better":
        return (
            "the script's own number says their model beats the reference's, and nothing "
            "independent checks it: name a held-out evaluation (loop.holdout=module:function)"
        )
    return "see the why column of symptoms.md"
