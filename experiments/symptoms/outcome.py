"""Outcome labels: what the bug did to the trained model. Only these set the severity.

- the status as it is: ``crash:<Type>``, ``oom``, ``timeout`` (not a crash), ``nan``;
- the model's quality against the reference's: ``worse_model``, ``model_at_chance``,
  measured by the loop's held-out evaluation (code the mutant cannot touch, run by the
  harness on the model the script trained) or, for a loop without one, by the val metric
  the script reports itself, else its reported val loss (``report(...)`` or captured from
  its logs; the mutant could have changed how they are computed: the catalog shows which
  source was used). A reported loss is no measure for a mutant of the loss function (its
  loss is on another scale). With no measure at all the run is ``unjudged`` (``verdict``);
- a number that lies: training and model as the reference's, but the val loss or val
  metric the script reports moved (``val_loss_lies_high`` ...): ``misleads``;
- extra cost: ``slower``, ``memory_growth``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from experiments.symptoms.reference import EFFECT_Z, Reference, is_number
from experiments.symptoms.vocabulary import Label, declare

Run = Mapping[str, Any]
Context = Mapping[str, Any]
# Best first. A loss is better lower: ``_margins`` negates it, so one rule serves all three.
QUALITY_FEATURE = {
    "holdout": "holdout_metric",
    "val_metric": "val_metric_final",
    "val_loss": "val_loss_final",
}
# A change under this share of the reference's margin over chance is too small to matter,
# however consistent over seeds.
PRACTICAL_SHARE = 0.02
LIE_RELATIVE = 0.2  # a val loss 20% off the truth is a number that misleads


def quality_source(run: Run, ref: Reference, *, scale_free: bool = False) -> str | None:
    """Which number measures the model: ``holdout``, ``val_metric``, ``val_loss`` or None."""
    for source, feature in QUALITY_FEATURE.items():
        if source == "val_loss" and scale_free:
            continue  # the mutant's loss is on another scale: its val loss measures that
        if is_number(run.get(feature)) and ref.center(feature) is not None:
            return source
    return None


def _worse_than_reference(run: Run, ref: Reference, source: str) -> bool:
    feature = QUALITY_FEATURE[source]
    return ref.above(run, feature) if source == "val_loss" else ref.below(run, feature)


def _has_chance(run: Run, ref: Reference, source: str) -> bool:
    if source == "val_loss":  # an untrained model's loss: the reference's first loss
        untrained, center = ref.center("initial_loss"), ref.center("val_loss_final")
        return untrained is not None and center is not None and untrained > center
    return is_number(run.get("holdout_chance")) or is_number(run.get("val_metric_vs_chance"))


def _margins(run: Run, ref: Reference, source: str) -> tuple[float, float, float] | None:
    """(run's metric, reference's metric, reference's margin over chance); a loss is
    negated, and its chance level is the untrained model's (the reference's first loss)."""
    if source == "val_loss":
        loss, center = run.get("val_loss_final"), ref.center("val_loss_final")
        untrained = ref.center("initial_loss")
        if not is_number(loss) or center is None:
            return None
        # The first training loss is the untrained model's only on the val loss's scale: a
        # script that divides its loss for gradient accumulation starts below its val loss.
        margin = untrained - center if untrained is not None and untrained > center else 0.0
        return -float(loss), -center, margin
    feature = QUALITY_FEATURE[source]
    metric, center = run.get(feature), ref.center(feature)
    if not is_number(metric) or center is None:
        return None
    chance = run.get("holdout_chance") if source == "holdout" else None
    if source == "val_metric" and is_number(run.get("val_metric_vs_chance")):
        chance = float(metric) - float(run["val_metric_vs_chance"])
    margin = center - float(chance) if is_number(chance) else abs(center)
    return float(metric), center, margin


def _model_at_chance(run: Run, ref: Reference, context: Context) -> bool:
    source = context["quality"]
    found = _margins(run, ref, source) if source else None
    if found is None or not _worse_than_reference(run, ref, source):
        return False
    metric, center, margin = found
    if not _has_chance(run, ref, source) or margin <= 0.05:
        return False
    return metric - (center - margin) < 0.1 * margin


def _worse_model(run: Run, ref: Reference, context: Context) -> bool:
    source = context["quality"]
    found = _margins(run, ref, source) if source else None
    if found is None or not _worse_than_reference(run, ref, source):
        return False
    metric, center, margin = found
    return center - metric > _practical(margin, center)


def reported_better(run: Run, ref: Reference, source: str) -> bool:
    """The script's own number says the mutant's model beats the reference's, beyond its
    spread and by a difference that matters: a bug rarely improves a model, and nothing
    independent checks the number (``curve._too_good`` reads it as such)."""
    found = _margins(run, ref, source)
    feature = QUALITY_FEATURE[source]
    better = ref.below(run, feature) if source == "val_loss" else ref.above(run, feature)
    if found is None or not better:
        return False
    if source == "val_loss" and not same_loss_scale(run, ref):
        return False  # a lower number of another loss function, not a better model
    metric, center, margin = found
    return metric - center > _practical(margin, center)


def same_loss_scale(run: Run, ref: Reference) -> bool:
    """The first training loss within 20% of the reference's: the same loss function."""
    init, ref_init = run.get("initial_loss"), ref.center("initial_loss")
    return is_number(init) and bool(ref_init) and abs(init / ref_init - 1.0) <= 0.2


def _practical(margin: float, center: float) -> float:
    """The smallest change of quality that matters: a share of the margin over chance, or
    of the value itself where no chance level is known."""
    return max(PRACTICAL_SHARE * abs(margin or center), 0.005)


# Curve symptoms that mean training itself went differently from the reference's.
TRAINING_SYMPTOMS = (
    "diverges",
    "no_learning",
    "slow_convergence",
    "oscillates",
    "loss_spike",
    "overfits",
    "eval_mode_training",
)


def _training_as_reference(run: Run, ref: Reference, context: Context) -> bool:
    """Same loss scale, same descent, no training symptom, same model: training unchanged."""
    same_start = same_loss_scale(run, ref)
    ratio, ref_ratio = run.get("final_over_initial"), ref.center("final_over_initial")
    same_descent = (
        is_number(ratio)
        and ref_ratio is not None
        and (ref.within(run, "final_over_initial") or abs(ratio - ref_ratio) <= 0.05)
    )
    quiet = not any(label in TRAINING_SYMPTOMS for label in context.get("symptoms", ()))
    same_model = not any(
        label in ("worse_model", "model_at_chance", "nan") for label in context["outcome"]
    )
    return same_start and same_descent and quiet and same_model


def _metric_lie(direction: int):
    def rule(run: Run, ref: Reference, context: Context) -> bool:
        # Only a held-out evaluation can tell a wrong val metric from a worse model.
        if context["quality"] != "holdout" or not _training_as_reference(run, ref, context):
            return False
        if not ref.within(run, "holdout_metric"):
            return False  # the model itself changed: its numbers may honestly move
        z = ref.z("val_metric_gap", run.get("val_metric_gap"))
        found = _margins(run, ref, "holdout")
        if z is None or found is None or direction * z <= EFFECT_Z:
            return False
        moved = abs(float(run["val_metric_gap"]) - (ref.center("val_metric_gap") or 0.0))
        return moved > max(PRACTICAL_SHARE * abs(found[2]), 0.005)

    return rule


def _loss_lie(direction: int):
    def rule(run: Run, ref: Reference, context: Context) -> bool:
        # When the reported loss is the only measure, a moved one is a worse (or better)
        # model as far as anything can tell, never a lie.
        if context["quality"] == "val_loss" or not _training_as_reference(run, ref, context):
            return False
        truth = ref.center("val_loss_final")
        # With a held-out loss, the reported loss is compared with the truth on the same
        # model; without one, with the reference's reported loss.
        feature = "val_loss_gap" if context["quality"] == "holdout" else "val_loss_final"
        if feature == "val_loss_gap" and not ref.within(run, "holdout_loss"):
            return False  # the model's true loss moved: the reported one may be honest
        z, center = ref.z(feature, run.get(feature)), ref.center(feature)
        if z is None or center is None or not truth or direction * z <= EFFECT_Z:
            return False
        metric_moved = context["quality"] == "val_metric" and not ref.within(
            run, "val_metric_final"
        )
        if metric_moved:
            return False  # the metric moved too: the model changed, not the number
        return abs(float(run[feature]) - center) > LIE_RELATIVE * abs(truth)

    return rule


def _memory_growth(run: Run, ref: Reference, context: Context) -> bool:
    slope, center = run.get("mem_growth_mb_per_step"), ref.center("mem_growth_mb_per_step")
    steps = run.get("optimizer_steps") or 0
    if not is_number(slope) or center is None:
        return False
    return ref.above(run, "mem_growth_mb_per_step") and (slope - center) * steps >= 16.0


# The run's own cost, best measure first: CPU seconds of its process (user+sys: the load of
# a shared machine barely moves them), the median measured step time x steps (older runs
# without CPU time; stalls under load fall outside the median), and wall time last.
COST_FEATURES = ("cpu_time_s", "step_cost_s", "train_time_s")
# Over 20 seeds of the unmutated loops the own-cost measures spread <= 1.3x max/min while
# wall time, under the load of other processes, reached 2.1x its reference's (docs/truth.md,
# docs/adaptive.md): each measure's factor sits above its own reference spread.
SLOWER_FACTORS = {"cpu_time_s": 1.5, "step_cost_s": 1.5, "train_time_s": 2.5}


def cost_feature(run: Run, ref: Reference) -> str | None:
    """The first cost measure both the run and its reference have."""
    for feature in COST_FEATURES:
        if is_number(run.get(feature)) and ref.center(feature) is not None:
            return feature
    return None


def _slower(run: Run, ref: Reference, context: Context) -> bool:
    feature = cost_feature(run, ref)
    if feature is None:
        return False
    center = ref.center(feature)
    return ref.above(run, feature) and run[feature] >= SLOWER_FACTORS[feature] * center


def _nan(run: Run, ref: Reference, context: Context) -> bool:
    went_nan = is_number(run.get("first_nan_step")) or run.get("status") == "nan"
    return went_nan and ref.nan_rate <= 0.2


STATUS_LABELS = (
    declare(Label("crash", "outcome", "crash",
                  "the run raised (crash:<ExceptionType>) or was killed", needs_finished_run=False,
                  hint="the script stops with an error")),
    declare(Label("oom", "outcome", "crash",
                  "the run went over its memory cap", needs_finished_run=False,
                  hint="the run runs out of memory")),
    declare(Label("timeout", "outcome", "timeout",
                  "the run did not finish within its deadline (slow or hung, not a crash)",
                  needs_finished_run=False,
                  hint="the run does not finish within its time limit")),
)  # fmt: skip
OUTCOMES = (
    declare(Label("nan", "outcome", "breaks_training",
                  "the loss went non-finite: the model's weights are garbage",
                  _nan, needs_finished_run=False, needs_spread=False,
                  hint="the loss becomes NaN or infinite")),
    declare(Label("model_at_chance", "outcome", "breaks_training",
                  "the trained model kept under 10% of the reference's margin over chance",
                  _model_at_chance,
                  hint="the trained model does no better than guessing")),
    declare(Label("worse_model", "outcome", "degrades",
                  "the trained model scores clearly below the reference's",
                  _worse_model, suppressed_by=("model_at_chance",),
                  hint="the trained model scores worse than the correct loop's")),
)  # fmt: skip
# Judged after the symptoms: a number lies only while training shows nothing.
LIES = (
    declare(Label("val_metric_lies_high", "outcome", "misleads",
                  "the reported val metric is higher than the held-out one says", _metric_lie(1),
                  hint="the reported validation score is better than the model is")),
    declare(Label("val_metric_lies_low", "outcome", "misleads",
                  "the reported val metric is lower than the held-out one says", _metric_lie(-1),
                  hint="the reported validation score is worse than the model is")),
    declare(Label("val_loss_lies_high", "outcome", "misleads",
                  "training is as the reference's but the reported val loss is too high",
                  _loss_lie(1),
                  hint="the reported validation loss is higher than the model's")),
    declare(Label("val_loss_lies_low", "outcome", "misleads",
                  "training is as the reference's but the reported val loss is too low",
                  _loss_lie(-1),
                  hint="the reported validation loss is lower than the model's")),
)  # fmt: skip
COSTS = (
    declare(Label("memory_growth", "outcome", "cost_only",
                  "memory grows step after step (16 MB or more beyond the reference)",
                  _memory_growth, needs_finished_run=False,
                  hint="memory grows step after step")),
    declare(Label("slower", "outcome", "cost_only",
                  "training cost 1.5x the reference's or more (CPU time; else step time x "
                  "steps; 2.5x on wall time alone)", _slower,
                  hint="training takes noticeably longer")),
)  # fmt: skip
