"""Symptom labels: what someone watching the run would notice (curve, init loss, telemetry).

They never set the severity while a quality measure exists (see ``vocabulary``). Two
ways to judge the curve:

- the same loss as the reference: each label needs an effect (``|z| > 3`` against the
  reference's seeds) and a sanity condition in the run's own numbers;
- a mutant that changes the loss function or its reduction (operator category ``loss``)
  has a loss on another scale, so its curve labels come only from scale-free features of
  its own run (ratios to its own initial loss, its own flattening) and from the outcome;
  raw comparisons with the reference's losses would only measure the change of scale.
  ``init_loss_off`` is judged either way: the shifted initial loss is how you notice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from experiments.symptoms.outcome import reported_better, same_loss_scale
from experiments.symptoms.reference import EFFECT_Z, Reference, is_number
from experiments.symptoms.vocabulary import Label, declare

Run = Mapping[str, Any]
Context = Mapping[str, Any]


def _model_worse(context: Context) -> bool:
    return any(label in ("worse_model", "model_at_chance") for label in context["outcome"])


def _improvement_share(run: Run, ref: Reference) -> float | None:
    """The mutant's improvement (1 - final/initial) as a share of the reference's."""
    ratio, ref_ratio = run.get("final_over_initial"), ref.center("final_over_initial")
    if not is_number(ratio) or ref_ratio is None or 1.0 - ref_ratio < 0.05:
        return None
    return (1.0 - float(ratio)) / (1.0 - ref_ratio)


def _diverges(run: Run, ref: Reference, context: Context) -> bool:
    ratio, smooth, peak = (
        run.get("final_over_initial"),
        run.get("max_over_initial"),
        run.get("peak_over_initial"),
    )
    ended_above = is_number(ratio) and ratio > 1.2
    rose = is_number(smooth) and smooth > 3.0
    blew_up = is_number(peak) and peak > 10.0
    if context["scale_free"]:
        return ended_above or rose or blew_up
    return (
        (ended_above and ref.above(run, "final_over_initial"))
        or (rose and ref.above(run, "max_over_initial"))
        or (blew_up and ref.above(run, "peak_over_initial"))
    )


def _no_learning(run: Run, ref: Reference, context: Context) -> bool:
    ratio = run.get("final_over_initial")
    if not is_number(ratio) or ratio > 1.2:  # ended well above its start: diverges
        return False
    if context["scale_free"]:
        # Less than 10% below its own start, and a model no better than that says.
        return ratio > 0.9 and (_model_worse(context) or context["quality"] is None)
    share = _improvement_share(run, ref)
    return share is not None and ref.above(run, "final_over_initial") and share < 0.2


def _slow_convergence(run: Run, ref: Reference, context: Context) -> bool:
    if context["scale_free"]:
        # Still going down at the end of its budget while the model came out worse.
        slope, plateau = run.get("log_slope_last_half"), run.get("plateau_frac")
        still_falling = is_number(slope) and slope < -0.5 and is_number(plateau) and plateau < 0.1
        return still_falling and _model_worse(context)
    share = _improvement_share(run, ref)
    ends_worse = share is not None and ref.above(run, "final_over_initial") and share < 0.9
    area, ref_area = run.get("mean_log_progress"), ref.center("mean_log_progress")
    lags = (
        ref_area is not None
        and ref.above(run, "mean_log_progress")
        and float(area) - ref_area > 0.1 * abs(ref_area)
    )
    return ends_worse or lags


def _loss_floor(run: Run, ref: Reference, context: Context) -> bool:
    # Scale-free only: the loss flattened out far above zero (it kept more than half its
    # initial value) though the model learned; e.g. softmax fed to cross-entropy floors
    # near 1.46 for 10 classes while accuracy is intact.
    if not context["scale_free"] or _model_worse(context):
        return False
    ratio, slope = run.get("final_over_initial"), run.get("log_slope_last_half")
    plateau = run.get("plateau_frac")
    flat = (is_number(slope) and abs(slope) < 0.05) or (is_number(plateau) and plateau > 0.2)
    return is_number(ratio) and 0.4 < ratio <= 0.9 and flat


def _oscillates(run: Run, ref: Reference, context: Context) -> bool:
    center = ref.center("tv_norm")
    return (
        not context["scale_free"]
        and ref.above(run, "tv_norm")
        and center is not None
        and run["tv_norm"] >= 1.5 * center
    )


def _loss_spike(run: Run, ref: Reference, context: Context) -> bool:
    # Spikes are counted against the run's own running median: scale-free already.
    return ref.above(run, "spike_count") and run["spike_count"] >= 2


def _overfits(run: Run, ref: Reference, context: Context) -> bool:
    rise, gap = run.get("val_loss_rise"), run.get("train_val_gap")
    if not (is_number(rise) and is_number(gap)):
        return False
    if context["scale_free"]:
        ratio = run.get("final_over_initial")
        return rise >= 0.1 and gap > 0 and is_number(ratio) and ratio < 0.5
    effect = ref.above(run, "train_val_gap") or ref.above(run, "val_loss_rise")
    # Overfitting means validation worsens while training still works.
    share = _improvement_share(run, ref)
    trains = share is not None and share >= 0.5
    return effect and trains and rise >= 0.1 and gap > 0


def _too_good(run: Run, ref: Reference, context: Context) -> bool:
    if context["quality"] in ("val_metric", "val_loss") and reported_better(
        run, ref, context["quality"]
    ):
        return True  # only the script's own number measures the model, and it beats the reference's
    metric, ref_metric = run.get("val_metric_final"), ref.center("val_metric_final")
    better_metric = (
        ref_metric is not None
        and ref_metric < 1.0
        and ref.above(run, "val_metric_final")
        and metric - ref_metric > 0.5 * (1.0 - ref_metric)
    )
    if context["scale_free"]:
        return better_metric
    loss, ref_loss = run.get("val_loss_final"), ref.center("val_loss_final")
    lower_loss = (
        same_loss_scale(run, ref)
        and ref_loss is not None
        and ref_loss > 0
        and ref.below(run, "val_loss_final")
        and loss < 0.5 * ref_loss
    )
    return better_metric or lower_loss


def _init_loss_off(run: Run, ref: Reference, context: Context) -> bool:
    z, center = ref.z("initial_loss", run.get("initial_loss")), ref.center("initial_loss")
    if z is None or not center:
        return False
    return abs(z) > EFFECT_Z and abs(run["initial_loss"] / center - 1.0) > 0.2


def _fraction_rule(feature: str):
    def rule(run: Run, ref: Reference, context: Context) -> bool:
        value, center = run.get(feature), ref.center(feature)
        if not is_number(value):
            return False
        return ref.above(run, feature) and value > 0.5 and value - (center or 0.0) >= 0.25

    return rule


def _grad_in_eval(run: Run, ref: Reference, context: Context) -> bool:
    # Needs a finished run: in a run that crashed between forward and backward, the last
    # training forward never got its backward and counts as an eval forward with grad.
    # A training forward whose backward never comes (the backward was dropped) also
    # counts as an eval forward with grad; then the eval forwards balloon past the
    # reference's evaluation, and the loss labels already tell that story.
    evals, ref_evals = run.get("eval_forwards"), ref.center("eval_forwards")
    real_evals = not is_number(evals) or ref_evals is None or evals <= 1.5 * ref_evals + 1
    return real_evals and _fraction_rule("eval_grad_frac")(run, ref, context)


SYMPTOMS = (
    declare(Label("diverges", "symptom", "breaks_training",
                  "the loss ended 20% above its start, rose 3x (smoothed) or blew up 10x",
                  _diverges, needs_finished_run=False,
                  hint="the loss rises instead of falling")),
    declare(Label("no_learning", "symptom", "breaks_training",
                  "the loss barely moved: under 20% of the reference's improvement "
                  "(scale-free: under 10% below its own start)",
                  _no_learning, suppressed_by=("nan",),
                  hint="the loss stays flat")),
    declare(Label("slow_convergence", "symptom", "degrades",
                  "the loss fell, but more slowly or less far than the reference's",
                  _slow_convergence, suppressed_by=("no_learning", "diverges", "nan"),
                  hint="the loss falls more slowly than the correct loop's")),
    declare(Label("loss_floor", "symptom", "silent",
                  "the loss flattened out above 40% of its start while the model learned",
                  _loss_floor, suppressed_by=("no_learning", "diverges", "nan"),
                  hint="the loss levels off high while the model still learns")),
    declare(Label("oscillates", "symptom", "degrades",
                  "the loss jitters 1.5x more than the reference's over the last half",
                  _oscillates,
                  hint="the loss jitters more than the correct loop's")),
    declare(Label("loss_spike", "symptom", "degrades",
                  "two or more points 3x above the running median",
                  _loss_spike, needs_finished_run=False,
                  hint="the loss has sudden spikes")),
    declare(Label("overfits", "symptom", "degrades",
                  "validation loss ended 10% above its best while training still worked",
                  _overfits,
                  hint="validation loss rises while training loss keeps falling")),
    declare(Label("too_good", "symptom", "degrades",
                  "the reported validation result is better than the reference can reach",
                  _too_good,
                  hint="validation looks better than the correct loop's")),
    declare(Label("init_loss_off", "symptom", "degrades",
                  "the first loss is more than 20% away from the reference's (ln C)",
                  _init_loss_off, needs_finished_run=False,
                  hint="the first loss is far from the correct loop's")),
    declare(Label("eval_mode_training", "symptom", "degrades",
                  "more than half the training forwards ran with the model in eval()",
                  _fraction_rule("eval_mode_train_frac"), needs_finished_run=False,
                  hint="training steps run with the model in inference behaviour")),
    declare(Label("grad_in_eval", "symptom", "cost_only",
                  "more than half the evaluation forwards ran with gradients enabled",
                  _grad_in_eval,
                  hint="validation builds autograd graphs it never uses")),
)  # fmt: skip
