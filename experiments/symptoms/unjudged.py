"""Why a row has no verdict (measured ``unjudged``), and what would give it one.

The words are shared by the symptoms table (``unjudged_reason``, shown as the row's "why"),
the rendered catalog and the printed summary, so the way to measure a loop is said the same
everywhere: a held-out evaluation the harness runs, or a validation number the script
already logs (``report(...)``, TensorBoard, wandb, Lightning, ``logging``, stdout), or a
pattern for one it prints in its own words (``loop.metrics``).
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.symptoms.reference import MIN_SPREAD_SEEDS, Reference
from experiments.symptoms.verdict import REPORTED, RunVerdict
from experiments.symptoms.vocabulary import TOO_FEW_SEEDS, UNJUDGED, base_name

HOW_TO_MEASURE = (
    "name a held-out evaluation (loop.holdout=module:function), or log a validation number "
    "(report(val_loss=..., val_metric=...), TensorBoard, wandb, logging or a printed "
    '"val loss 2.01"), or match the line your script prints with loop.metrics="REGEX" '
    "(named groups val_loss, val_metric)"
)
NO_MEASURE = "no quality measure"
TOO_FEW = "too few seeds"
REPORTED_BETTER = "better than the reference can reach"
THROUGH_MUTANT = "computed through the mutated code"


def too_few_text(ref: Reference) -> str:
    return (
        f"{TOO_FEW}: {ref.n_runs} finished reference runs, a label needs {MIN_SPREAD_SEEDS} "
        f"(run --seeds {MIN_SPREAD_SEEDS} or more)"
    )


def unjudged_reason(measured: str, verdicts: Sequence[RunVerdict], ref: Reference) -> str:
    """One line on why ``measured`` is ``unjudged``; empty for a row with a verdict."""
    if measured != UNJUDGED:
        return ""
    if not ref.has_spread or any(TOO_FEW_SEEDS in v.labels for v in verdicts):
        return too_few_text(ref)
    finished = [v for v in verdicts if v.finished]
    if finished and all(v.quality is None for v in finished):
        return f"{NO_MEASURE}: the curve cannot tell silent from degrades; {HOW_TO_MEASURE}"
    if any(v.through_mutant for v in finished):
        return (
            f"the reported number is {THROUGH_MUTANT} (changed lines ran during evaluation); "
            "a held-out evaluation would measure it: loop.holdout=module:function"
        )
    shown = sorted(
        {base_name(label) for v in verdicts for label in v.labels if base_name(label) in v.control}
    )
    if shown:
        return (
            f"its evidence ({', '.join(shown)}) also shows on the unmutated control of this "
            "loop, so it is not evidence of the bug"
        )
    if any(v.quality in REPORTED and "too_good" in v.labels for v in finished):
        return (
            f"the reported validation number is {REPORTED_BETTER} and no held-out "
            "evaluation checks it (loop.holdout=module:function would)"
        )
    return f"{NO_MEASURE} on some seeds; {HOW_TO_MEASURE}"
