"""One line, computed from the numbers, on why measured and declared severity differ.

An operator declares the severity its bug has in the textbook; a loop can disagree (Adam
absorbs a rescaled loss, a loop without dropout or BatchNorm does not care about eval
mode). The line names the evidence, so the learner sees where the claim does not hold.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from experiments.symptoms.reference import is_number
from experiments.symptoms.vocabulary import axis_of, base_name, rank
from experiments.validity import is_valid

# Optimizers that divide each update by a running estimate of the gradient's size: a
# loss multiplied by a constant leaves their steps (nearly) unchanged.
ADAPTIVE_OPTIMIZERS = frozenset(
    {"Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta", "SparseAdam"}
)
MECHANISMS = ("eval_mode_training", "grad_in_eval", "init_loss_off", "loss_floor", "too_good")


def disagreement(row: Mapping[str, Any], expected: str | None) -> str:
    """Why ``row['measured']`` differs from ``expected``; empty when they agree."""
    measured = row.get("measured")
    if (
        not expected
        or measured in (expected, "invalid", "unjudged", None)
        or not is_valid(measured)
    ):
        return ""
    fractions: dict[str, float] = json.loads(row.get("label_fractions") or "{}")
    quality = _quality(row)
    ended = _ended(fractions, int(row.get("n_seeds") or 0))
    if measured in ("crash", "timeout"):
        return f"{ended}: the run itself fails here, worse than declared ({expected})"
    if rank(measured) < rank(expected):
        return f"the model is worse than declared: {quality}" if quality else ended
    if measured == "misleads":
        return f"training is untouched ({quality}), but {_lying_number(row, fractions)}"
    ratio = _ratio(row.get("mutant_initial_loss"), row.get("ref_initial_loss"))
    optimizer = row.get("optimizer")
    if ratio is not None and abs(ratio - 1) > 0.2:
        # The same curve shape at another scale is a constant factor on the loss; a
        # different shape is a different loss function.
        shape = _ratio(row.get("mutant_final_over_initial"), row.get("ref_final_over_initial"))
        rescaled = shape is not None and abs(shape - 1) <= 0.3
        if rescaled and optimizer in ADAPTIVE_OPTIMIZERS:
            return (
                f"{optimizer} rescales gradients by their running size, so a loss scaled "
                f"x{ratio:.3g} (initial loss) trains the same model: {quality}"
            )
        if not rescaled and quality and measured in ("silent", "cost_only", "misleads"):
            return (
                f"a different loss (initial loss x{ratio:.3g}, the curve another shape) "
                f"trains a model as good here: {quality}"
            )
    fired = [name for name in MECHANISMS if any(base_name(k) == name for k in fractions)]
    if fired:
        how = ", ".join(fired)
        return f"{how} shows the bug, yet the outcome is {measured} on this loop: {quality}"
    outcome = [k for k in fractions if axis_of(k) == "outcome"]
    if not outcome and quality:
        return f"the model is as good as the reference's here: {quality}"
    return f"measured {', '.join(outcome) or 'nothing'}; {quality or 'no quality measure'}"


def _quality(row: Mapping[str, Any]) -> str:
    for feature, title in (
        ("holdout_metric", "held-out metric"),
        ("val_metric_final", "reported val metric"),
        ("val_loss_final", "reported val loss"),
    ):
        mine, ref = row.get(f"mutant_{feature}"), row.get(f"ref_{feature}")
        if is_number(mine) and is_number(ref):
            return f"{title} {mine:.3f} vs reference {ref:.3f}"
    return ""


def _lying_number(row: Mapping[str, Any], fractions: Mapping[str, float]) -> str:
    if any(k.startswith("val_loss_lies") for k in fractions):
        mine, ref = row.get("mutant_val_loss_final"), row.get("ref_val_loss_final")
        if is_number(mine) and is_number(ref):
            return f"the reported val loss is {mine:.3g} against {ref:.3g}"
    mine, ref = row.get("mutant_val_metric_final"), row.get("ref_val_metric_final")
    if is_number(mine) and is_number(ref):
        return f"the reported val metric is {mine:.3f} against {ref:.3f}"
    return "a reported number moved"


def _ended(fractions: Mapping[str, float], n_seeds: int) -> str:
    ends = {k: v for k, v in fractions.items() if base_name(k) in ("crash", "oom", "timeout")}
    if not ends:
        return "every run finished"
    return ", ".join(f"{round(v * n_seeds)}/{n_seeds} seeds {k}" for k, v in ends.items())


def _ratio(mine: Any, ref: Any) -> float | None:
    if is_number(mine) and is_number(ref) and ref:
        return float(mine) / float(ref)
    return None
