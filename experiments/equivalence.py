"""Equivalent mutants, measured: changed code whose runs are the reference's, bit for bit.

A mutant is ``equivalent`` when every one of its runs is identical to the unmutated
loop's run with the same seed and argv, and its judged severity is ``silent`` (time and
memory, which no two runs share exactly, showed nothing either). Its ``silent`` would say
nothing about how visible the bug is: there was no bug to see. A mutant identical on some
seeds only is not equivalent (it is judged as usual), nor is one with a seed the reference
did not run: identity is shown, never assumed.

"Identical" compares what the loop computed, never when or at what cost (``run_digest``):
every loss the trace holds (per ``backward()``, or per training loss call), the sampled
gradient norms and update ratios, every reported ``train_loss``/``val_loss``/``val_metric``,
and the end results: status, exception class, optimizer steps, backward and loss calls,
the forward counters (a model trained in ``eval()`` is a difference the telemetry sees,
even where it computes the same numbers), the first non-finite loss, the held-out
evaluation and the final reported numbers; and everything the script printed on stdout,
byte for byte (a test score it only prints is a number a bug can change: removing the
test set's normalization in ``binary_cancer`` changes nothing else). Floats are compared
exactly; NaN and infinities count as one "non-finite" value (the signature cache stores
both as null). A run whose trace was thinned (``trace_dropped``) or had no telemetry gets
no digest, and so can never show its mutant equivalent; a script that prints times never
has an equivalent mutant either (the safe side: it stays ``silent``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from experiments.harness.row import COUNTERS

EQUIVALENT = "equivalent"
_END_FIELDS = ("status", "exc_type", *COUNTERS, "nonfinite_at")
_END_FEATURES = (
    "holdout_metric",
    "holdout_loss",
    "holdout_error",
    "val_metric_final",
    "val_loss_final",
)
_MATCH = ("loop", "device", "seed", "argv")
# Verdicts that saw no effect: a mutant with one of them may be equivalent. ``unjudged``
# (issue 23: no quality measure) is one, since identical runs need no measure.
NO_EFFECT_SEEN = ("silent", "unjudged")


def run_digest(
    result: Mapping[str, Any],
    features: Mapping[str, Any],
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    output: bytes | None = None,
) -> str | None:
    """A digest of what the run computed (module docstring) and of what it printed
    (``output``, its stdout); None when it cannot be had."""
    if result.get("telemetry") is False or result.get("trace_dropped"):
        return None
    digest = hashlib.sha256(output or b"")
    ends = [result.get(name) for name in _END_FIELDS]
    ends += [_plain(features.get(name)) for name in _END_FEATURES]
    digest.update(json.dumps(ends, default=str).encode())
    for metric in sorted(curves):
        steps, values = curves[metric]
        values = np.asarray(values, dtype=np.float64)
        values = np.where(np.isfinite(values), values, np.nan)  # one bit pattern for NaN
        digest.update(metric.encode())
        digest.update(np.ascontiguousarray(steps, dtype=np.float64).tobytes())
        digest.update(np.ascontiguousarray(values).tobytes())
    return digest.hexdigest()[:32]


def _plain(value: Any) -> Any:
    """A feature as JSON can hold it exactly (repr of a float round-trips)."""
    if isinstance(value, float | np.floating):
        return repr(float(value)) if np.isfinite(value) else "non-finite"
    return value


def same_as_reference(frame: pd.DataFrame) -> pd.Series:
    """Per run: True/False whether a mutant run's digest equals the reference run's with
    the same loop, device, seed and argv; None for other runs, a missing digest or no such
    reference run."""
    result = pd.Series([None] * len(frame), index=frame.index, dtype=object)
    if not len(frame) or "trace_digest" not in frame:
        return result
    keys = [_key(row) for row in frame[list(_MATCH)].itertuples(index=False)]
    reference: dict[tuple, set[Any]] = {}
    for key, role, digest in zip(keys, frame["role"], frame["trace_digest"]):
        if role == "reference" and isinstance(digest, str):
            reference.setdefault(key, set()).add(digest)
    for index, key, role, digest in zip(frame.index, keys, frame["role"], frame["trace_digest"]):
        if role != "mutant" or not isinstance(digest, str) or key not in reference:
            continue
        # Two stored reference runs of one key (a rerun) must agree to stand as the reference.
        found = reference[key]
        result[index] = digest in found if len(found) == 1 else None
    return result


def _key(row: tuple) -> tuple:
    loop, device, seed, argv = row
    return (loop, device, seed, json.dumps(list(argv)) if isinstance(argv, list) else str(argv))


def mark_equivalent(
    frame: pd.DataFrame,
    judgement: Any,
    declared: Callable[[str, str], str] = lambda loop, identity: "",
    cost_only: Callable[[str], bool] = lambda operator: False,
) -> Any:
    """``judgement`` with every equivalent mutant (module docstring) measured and labelled
    ``equivalent``; its runs keep their severity (``silent``), so the sequential rule reads
    them as before. ``declared(loop, identity)``: the measurement of a mutant a person
    showed equivalent up to float rounding, which no bitwise comparison can show
    (``experiments/symptoms/equivalents.py``); it counts only where the mutant is silent.

    ``cost_only(operator)``: whether the operator's bug costs time or memory only (a graph
    kept with ``retain_graph=True``). Identical numbers are that bug's expected outcome, so
    where every run's witness showed the mechanism (``witness_state`` confirmed) the mutant
    is its bug, silent, and not equivalent."""
    if judgement is None or judgement.symptoms.empty or "same_as_reference" not in frame:
        return judgement
    symptoms = judgement.symptoms.copy()
    labels = judgement.run_labels.copy()
    by_mutant = frame.groupby(["loop", "device", "identity"], sort=False).groups
    for position, row in enumerate(symptoms.to_dict("records")):
        if row.get("role") != "mutant" or row.get("measured") not in NO_EFFECT_SEEN:
            continue
        members = by_mutant.get((row["loop"], row["device"], row["identity"]), [])
        if _mechanism_shown(frame, members, row.get("operator"), cost_only):
            continue
        same = [frame.at[index, "same_as_reference"] for index in members]
        measured = bool(same) and all(flag is True for flag in same)
        reason = "" if measured else declared(row["loop"], row["identity"])
        if not measured and not reason:
            continue
        at = symptoms.index[position]
        symptoms.loc[at, "measured"] = EQUIVALENT
        symptoms.loc[at, "outcome"] = (
            f"identical to the reference on {len(same)}/{len(same)} seeds"
            if measured
            else f"declared equivalent up to float rounding ({reason})"
        )
        symptoms.loc[at, "symptoms"] = ""
        symptoms.loc[at, "label_fractions"] = json.dumps({EQUIVALENT: 1.0})
        for index in members:
            labels.at[index] = [EQUIVALENT]
    return dataclasses.replace(judgement, run_labels=labels, symptoms=symptoms)


def _mechanism_shown(
    frame: pd.DataFrame, members: Any, operator: Any, cost_only: Callable[[str], bool]
) -> bool:
    """Whether a cost-only operator's every run showed its witness (``mark_equivalent``)."""
    if not isinstance(operator, str) or not cost_only(operator) or "witness_state" not in frame:
        return False
    states = [frame.at[index, "witness_state"] for index in members]
    return bool(states) and all(state == "confirmed" for state in states)
