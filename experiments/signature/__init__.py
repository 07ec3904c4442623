"""The signature of one run: numeric features of its trace and result row.

``signature(records, result, n_classes=...)`` turns a (possibly partial) trace into a flat
dict of numbers. Every feature is ``None`` when the trace cannot support it (a crash at
step 0 has no loss curve), never a made-up default, so the symptom judge can tell "not
measured" from "zero".

The loss curve comes from ``backward`` records (the loss every ``backward()`` saw); a run
that never calls ``backward()`` falls back to ``loss_fn`` records and then to the
``train_loss`` of ``report`` records (one point per epoch). Minibatch losses are noisy, so
"final", "best" and "peak" use a trailing median over ``smoothing_window(n)`` points
(about 5% of the curve) instead of single values. The first loss is kept raw on purpose: it is measured
before any update, which is what its comparison with ln C is about.

One module per source of features: ``curve`` (the loss curve's shape), ``validation``
(reported and held-out quality), ``steps`` (telemetry per step, counters, cost); ``values``
turns trace values into numbers for all of them. A new source of features (captured
metrics) gets a module of its own, called from ``signature_of``.

Feature reference (units in brackets):

- ``n_losses``: points on the loss curve; ``initial_loss``; ``init_loss_ratio``:
  initial / ln C (1.0 for a calibrated classifier at init; needs ``n_classes``).
- ``final_loss`` (median of the last window), ``final_over_initial``, ``best_loss``
  (smoothed minimum), ``max_over_initial`` (smoothed maximum / initial: a sustained rise),
  ``peak_over_initial`` (raw maximum / initial: a blow-up, however short).
- ``mean_log_progress``: mean over the run of log(smoothed loss / initial); the area under
  the normalised log curve, lower is faster learning.
- ``log_slope_last_half``: least-squares slope of log(loss) over the last half [per 100
  steps]; negative while still learning.
- ``plateau_frac``: fraction of the run after the smoothed curve first came within 1% of
  its best (0: still improving at the end; ~1: stuck from the start).
- ``sign_change_rate``: fraction of sign changes of the differenced raw curve (iid noise
  gives ~2/3, a zig-zag ~1); ``tv_norm``: total variation of log(loss) over the last half,
  per step (the typical relative jump between consecutive losses).
- ``spike_count``: points above ``SPIKE_FACTOR`` x the running median of the previous
  ``SPIKE_WINDOW`` points and above it by at least 10% of the initial loss.
- ``first_nan_step``: index of the first non-finite loss; ``diverged``: 1 when the loss went
  non-finite, ended above twice its start, or peaked above 10x its start (a raw flag for
  display; the ``diverges`` symptom is judged against the reference).
- ``val_loss_final``, ``val_loss_best``, ``val_loss_rise`` (final / best - 1),
  ``train_val_gap`` (val loss - train loss of the last report that has a val loss),
  ``val_metric_final``, ``val_metric_best``, ``val_metric_vs_chance`` (final - 1/C;
  ``val_metric`` is taken to be accuracy-like, higher is better; a report may carry
  ``chance`` to override 1/C).
- ``holdout_metric``, ``holdout_loss``, ``holdout_chance``: the loop's held-out evaluation
  of the trained model (``holdout`` record, written by the harness after the script ended;
  see ``experiments/harness/holdout.py``), ``None`` when the loop has none or the run did not
  finish; ``val_metric_gap`` / ``val_loss_gap``: what the script reported minus the held-out
  value (about 0 for an honest evaluation on the same split); ``optimizer``: class name of
  the optimizer that trained the model; ``holdout_error``: why the held-out evaluation
  could not run (text); ``outcome_source``: where the run's outcome numbers came from,
  ``holdout``, the origin of its reported validation numbers (``report`` for a
  ``report(...)`` call, ``tensorboard``, ``wandb``, ``lightning``, ``logging``, ``stdout``,
  ``pattern`` for captured ones) or ``none`` (text).
- ``grad_norm_median``, ``grad_norm_max``, ``grad_norm_trend`` (slope of log10 grad norm
  [per 100 steps]), ``update_ratio_median`` (healthy ~1e-3).
- ``optimizer_steps``, ``backward_calls``.
- ``eval_mode_train_frac``: training forwards run in ``eval()`` / all training forwards;
  ``eval_forwards`` and ``eval_forwards_grad`` (counts) and ``eval_grad_frac`` (share of
  eval forwards that ran with grad enabled).
- ``mem_growth_mb_per_step``: slope of resident memory (CUDA memory when measured) over
  the steps after the first 10% [MB per step]; ``peak_rss_mb``.
- ``time_per_step``: median seconds between optimizer steps; ``train_time_s``: seconds from
  the first to the last training loss (the training itself, without start-up); ``wall_s``.
- ``cpu_time_s``: CPU seconds (user+sys) of the run's own process from the script's start to
  its end, without the held-out evaluation (end record ``cpu_s``; ``None`` for runs recorded
  before the harness wrote it); ``step_cost_s``: the median interval between training losses
  x their number, ``train_time_s`` without the intervals the load (or an evaluation) stalled.
  Both measure the run's cost where wall time measures the machine's load too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from experiments.signature.curve import (
    LossCurve,
    loss_curve,
    loss_curve_of,
    loss_features,
    rolling_median,
    smoothing_window,
)
from experiments.signature.steps import cost_features, counter_features, step_features
from experiments.signature.validation import (
    holdout_features,
    outcome_source,
    reported_int,
    validation_features,
)
from experiments.signature.values import Feature, Kinds, floats, span, split_by_kind

__all__ = [
    "FEATURES",
    "Feature",
    "LossCurve",
    "floats",
    "loss_curve",
    "loss_curve_of",
    "rolling_median",
    "signature",
    "signature_of",
    "smoothing_window",
    "split_by_kind",
]

FEATURES = (
    "n_losses",
    "initial_loss",
    "init_loss_ratio",
    "final_loss",
    "final_over_initial",
    "best_loss",
    "max_over_initial",
    "peak_over_initial",
    "mean_log_progress",
    "log_slope_last_half",
    "plateau_frac",
    "sign_change_rate",
    "tv_norm",
    "spike_count",
    "first_nan_step",
    "diverged",
    "val_loss_final",
    "val_loss_best",
    "val_loss_rise",
    "train_val_gap",
    "val_metric_final",
    "val_metric_best",
    "val_metric_vs_chance",
    "holdout_metric",
    "holdout_loss",
    "holdout_chance",
    "val_metric_gap",
    "val_loss_gap",
    "optimizer",
    "holdout_error",
    "outcome_source",
    "grad_norm_median",
    "grad_norm_max",
    "grad_norm_trend",
    "update_ratio_median",
    "optimizer_steps",
    "backward_calls",
    "eval_mode_train_frac",
    "eval_forwards",
    "eval_forwards_grad",
    "eval_grad_frac",
    "mem_growth_mb_per_step",
    "peak_rss_mb",
    "time_per_step",
    "train_time_s",
    "wall_s",
    "cpu_time_s",
    "step_cost_s",
)


def signature(
    records: list[dict[str, Any]], result: Mapping[str, Any], *, n_classes: int | None
) -> dict[str, Feature]:
    """All features of one run (see the module docstring); missing ones are ``None``."""
    return signature_of(split_by_kind(records), result, n_classes=n_classes)


def signature_of(
    kinds: Kinds,
    result: Mapping[str, Any],
    *,
    n_classes: int | None,
    loss: LossCurve | None = None,
) -> dict[str, Feature]:
    """``signature`` on records already split by kind (``loss``: a precomputed curve)."""
    features: dict[str, Feature] = dict.fromkeys(FEATURES)
    reports = kinds.get("report", [])
    n_classes = n_classes or reported_int(reports, "n_classes")
    _, losses, source = loss if loss is not None else loss_curve_of(kinds)
    features.update(loss_features(losses, n_classes))
    features["train_time_s"] = span(kinds.get(source, []))
    features.update(validation_features(reports, features["final_loss"], n_classes))
    features.update(holdout_features(kinds.get("holdout", []), features))
    features["outcome_source"] = outcome_source(reports, features)
    features.update(step_features(kinds.get("step", [])))
    features.update(counter_features(kinds, result))
    features.update(cost_features(kinds, source))
    if features["time_per_step"] is None and features["wall_s"] and features["optimizer_steps"]:
        # Without per-step timing, wall time per step is the next best (includes start-up).
        features["time_per_step"] = float(features["wall_s"]) / int(features["optimizer_steps"])
    return features
