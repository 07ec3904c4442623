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
  could not run (text).
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

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from experiments.trace import decode_float

Feature = float | int | str | None

SPIKE_FACTOR = 3.0
SPIKE_WINDOW = 20
PLATEAU_TOLERANCE = 0.01
VAL_METRIC_KEYS = ("val_metric", "val_acc", "val_accuracy")

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


Kinds = Mapping[str, list[dict[str, Any]]]
LossCurve = tuple[np.ndarray, np.ndarray, str]  # (steps, losses, source)


def signature(
    records: list[dict[str, Any]], result: Mapping[str, Any], *, n_classes: int | None
) -> dict[str, Feature]:
    """All features of one run (see the module docstring); missing ones are ``None``."""
    return signature_of(split_by_kind(records), result, n_classes=n_classes)


def split_by_kind(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by ``kind`` in one pass (every feature reads one or two kinds)."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        kinds.setdefault(record.get("kind"), []).append(record)
    return kinds


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
    n_classes = n_classes or _reported_int(reports, "n_classes")
    _, losses, source = loss if loss is not None else loss_curve_of(kinds)
    features.update(_loss_features(losses, n_classes))
    features["train_time_s"] = _span(kinds.get(source, []))
    features.update(_validation_features(reports, features["final_loss"], n_classes))
    features.update(_holdout_features(kinds.get("holdout", []), features))
    features.update(_step_features(kinds.get("step", [])))
    features.update(_counter_features(kinds, result))
    features.update(_cost_features(kinds, source))
    if features["time_per_step"] is None and features["wall_s"] and features["optimizer_steps"]:
        # Without per-step timing, wall time per step is the next best (includes start-up).
        features["time_per_step"] = float(features["wall_s"]) / int(features["optimizer_steps"])
    return features


def loss_curve(records: Iterable[dict[str, Any]]) -> LossCurve:
    """(steps, losses, source) of the run's training loss; source names where it came from.

    ``backward`` losses are preferred; a script that never calls ``backward()`` still
    shows its ``loss_fn`` outputs, and failing that the per-epoch ``train_loss`` it reported.
    """
    return loss_curve_of(split_by_kind(records))


def loss_curve_of(kinds: Kinds) -> LossCurve:
    for source, value_key, index_key in (
        ("backward", "loss", "i"),
        ("loss_fn", "loss", "i"),
        ("report", "train_loss", "epoch"),
    ):
        points = [r for r in kinds.get(source, ()) if value_key in r]
        if points:
            steps = floats([r.get(index_key, k) for k, r in enumerate(points)])
            return steps, floats([r[value_key] for r in points]), source
    return np.empty(0), np.empty(0), "none"


def floats(values: list[Any]) -> np.ndarray:
    """Trace values as a float array: numbers, "nan"/"inf" strings; None and junk as NaN."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return np.asarray([_as_float(value) for value in values], dtype=float)


def smoothing_window(n: int) -> int:
    return max(1, min(50, n // 20))


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing median over ``window`` points, same length as the input.

    A median, not a mean, so that a few spikes neither lift the "peak" nor pass for slow
    learning; the first points are padded with the first value (the loss before any update).
    """
    if window <= 1 or values.size == 0:
        return values.astype(float)
    padded = np.concatenate([np.full(window - 1, values[0], dtype=float), values.astype(float)])
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, window), axis=1)


def _loss_features(losses: np.ndarray, n_classes: int | None) -> dict[str, Feature]:
    out: dict[str, Feature] = {"n_losses": int(losses.size)}
    if losses.size == 0:
        return out
    finite_mask = np.isfinite(losses)
    if not finite_mask.all():
        first_bad = int(np.argmax(~finite_mask))
        out["first_nan_step"] = first_bad
        # Everything after the first non-finite value is garbage (and usually absent).
        losses = losses[:first_bad]
    if losses.size == 0:
        out["diverged"] = 1
        return out
    initial = float(losses[0])
    window = smoothing_window(losses.size)
    smooth = rolling_median(losses, window)
    final = float(np.median(losses[-window:]))
    out["initial_loss"] = initial
    if n_classes and n_classes >= 2:
        out["init_loss_ratio"] = initial / math.log(n_classes)
    out["final_loss"] = final
    out["best_loss"] = float(np.min(smooth))
    if initial > 0:
        out["final_over_initial"] = final / initial
        out["max_over_initial"] = float(np.max(smooth)) / initial
        out["peak_over_initial"] = float(np.max(losses)) / initial
        positive = np.maximum(smooth, initial * 1e-12)
        out["mean_log_progress"] = float(np.mean(np.log(positive / initial)))
    out["log_slope_last_half"] = _log_slope(losses[losses.size // 2 :])
    out["tv_norm"] = _tv_per_step(losses[losses.size // 2 :], abs(initial))
    out["plateau_frac"] = _plateau_fraction(smooth)
    out["sign_change_rate"] = _sign_change_rate(losses)
    out["spike_count"] = _spike_count(losses, abs(initial))
    rose = initial > 0 and (final > 2 * initial or float(np.max(smooth)) > 10 * initial)
    out["diverged"] = int(out.get("first_nan_step") is not None or rose)
    return out


def _log_slope(values: np.ndarray) -> float | None:
    """Slope of log(loss) per 100 points; of loss / |mean| when the loss is not positive."""
    if values.size < 3:
        return None
    if np.all(values > 0):
        y = np.log(values)
    else:
        y = values / max(float(np.mean(np.abs(values))), 1e-12)
    x = np.arange(values.size, dtype=float)
    return float(np.polyfit(x, y, 1)[0] * 100.0)


def _plateau_fraction(smooth: np.ndarray) -> float | None:
    if smooth.size < 2:
        return None
    best = float(np.min(smooth))
    near_best = smooth <= best + PLATEAU_TOLERANCE * abs(best)
    first = int(np.argmax(near_best))
    return 1.0 - first / (smooth.size - 1)


def _sign_change_rate(values: np.ndarray) -> float | None:
    signs = np.sign(np.diff(values))
    signs = signs[signs != 0]
    if signs.size < 2:
        return None
    return float(np.mean(signs[1:] != signs[:-1]))


def _tv_per_step(values: np.ndarray, scale: float) -> float | None:
    """Mean |change| per step of log(loss): jitter relative to the loss's own level.

    Relative, so a run stuck at a high loss does not look jumpier than one that learned;
    for losses that are not all positive, the raw change over ``scale`` (|initial|).
    """
    if values.size < 2:
        return None
    if np.all(values > 0):
        return float(np.mean(np.abs(np.diff(np.log(values)))))
    return float(np.mean(np.abs(np.diff(values)))) / max(scale, 1e-12)


def _spike_count(losses: np.ndarray, scale: float) -> int:
    """Points far above the median of the (up to ``SPIKE_WINDOW``) points before them.

    The first points are judged against the shorter history they have, so a blow-up at
    the very first update (a learning rate far too high) counts too.
    """
    if losses.size < 2:
        return 0
    head = min(SPIKE_WINDOW, losses.size)
    medians = [float(np.median(losses[:i])) for i in range(1, head)]
    if losses.size > SPIKE_WINDOW:
        windows = np.lib.stride_tricks.sliding_window_view(losses[:-1], SPIKE_WINDOW)
        medians.extend(np.median(windows, axis=1))
    running_median = np.asarray(medians)
    later = losses[1:]
    is_spike = (later > SPIKE_FACTOR * np.abs(running_median)) & (
        later - running_median > 0.1 * scale
    )
    return int(np.count_nonzero(is_spike))


def _validation_features(
    reports: list[dict[str, Any]], final_train_loss: Feature, n_classes: int | None
) -> dict[str, Feature]:
    out: dict[str, Feature] = {}
    val_losses = [_as_float(r["val_loss"]) for r in reports if r.get("val_loss") is not None]
    val_losses = [v for v in val_losses if math.isfinite(v)]
    if val_losses:
        out["val_loss_final"] = val_losses[-1]
        out["val_loss_best"] = min(val_losses)
        if out["val_loss_best"] > 0:
            out["val_loss_rise"] = val_losses[-1] / min(val_losses) - 1.0
        last = next(r for r in reversed(reports) if r.get("val_loss") is not None)
        train = _as_float(last["train_loss"]) if last.get("train_loss") is not None else None
        if train is None or not math.isfinite(train):
            train = final_train_loss
        if train is not None:
            out["train_val_gap"] = val_losses[-1] - float(train)
    metrics = [_val_metric(r) for r in reports]
    metrics = [m for m in metrics if m is not None and math.isfinite(m)]
    if metrics:
        out["val_metric_final"] = metrics[-1]
        out["val_metric_best"] = max(metrics)
        chance = _reported_float(reports, "chance")
        if chance is None and n_classes and n_classes >= 2:
            chance = 1.0 / n_classes
        if chance is not None:
            out["val_metric_vs_chance"] = metrics[-1] - chance
    return out


def _holdout_features(
    records: list[dict[str, Any]], features: Mapping[str, Feature]
) -> dict[str, Feature]:
    if not records:
        return {}
    record = records[-1]
    out: dict[str, Feature] = {
        "optimizer": record.get("optimizer") if isinstance(record.get("optimizer"), str) else None,
        "holdout_error": record.get("error") if isinstance(record.get("error"), str) else None,
    }
    for key in ("metric", "loss", "chance"):
        value = _as_float(record[key]) if record.get(key) is not None else math.nan
        out[f"holdout_{key}"] = value if math.isfinite(value) else None
    for reported, truth, gap in (
        ("val_metric_final", "holdout_metric", "val_metric_gap"),
        ("val_loss_final", "holdout_loss", "val_loss_gap"),
    ):
        mine, true = features.get(reported), out.get(truth)
        if isinstance(mine, int | float) and isinstance(true, int | float):
            out[gap] = float(mine) - float(true)
    return out


def _step_features(steps: list[dict[str, Any]]) -> dict[str, Feature]:
    out: dict[str, Feature] = {}
    if not steps:
        return out
    index = floats([s.get("i", k + 1) for k, s in enumerate(steps)])
    grad = _column(steps, "grad_norm")
    grad_ok = np.isfinite(grad)
    if grad_ok.any():
        out["grad_norm_median"] = float(np.median(grad[grad_ok]))
        out["grad_norm_max"] = float(np.max(grad[grad_ok]))
        positive = grad_ok & (grad > 0)
        if positive.sum() >= 3:
            slope = np.polyfit(index[positive], np.log10(grad[positive]), 1)[0]
            out["grad_norm_trend"] = float(slope * 100.0)
    ratio = _column(steps, "update_ratio")
    if np.isfinite(ratio).any():
        out["update_ratio_median"] = float(np.median(ratio[np.isfinite(ratio)]))
    memory = _column(steps, "cuda_mb")
    if not np.isfinite(memory).any():
        memory = _column(steps, "rss_mb")
    # The first tenth is warm-up (allocator pools, lazy imports), not growth.
    tail = slice(len(steps) // 10, None)
    mem_x, mem_y = index[tail], memory[tail]
    mem_ok = np.isfinite(mem_y)
    if mem_ok.sum() >= 3 and np.ptp(mem_x[mem_ok]) > 0:
        out["mem_growth_mb_per_step"] = float(np.polyfit(mem_x[mem_ok], mem_y[mem_ok], 1)[0])
    times = _column(steps, "step_time")[1:]
    if np.isfinite(times).any():
        out["time_per_step"] = float(np.median(times[np.isfinite(times)]))
    return out


def _counter_features(kinds: Kinds, result: Mapping[str, Any]) -> dict[str, Feature]:
    counters: dict[str, Any] = {}
    # The end record, written last, holds the final counters; the result row overrides both.
    for record in [*kinds.get("forwards", ()), *kinds.get("end", ())]:
        counters.update({k: v for k, v in record.items() if isinstance(v, int | float)})
    for key in (
        "train_forwards",
        "train_forwards_eval_mode",
        "eval_forwards",
        "eval_forwards_grad",
    ):
        if result.get(key) is not None:
            counters[key] = result[key]
    out: dict[str, Feature] = {}
    steps = result.get("steps")
    if steps is None:
        steps = max((r.get("i", 0) for r in kinds.get("step", ())), default=0)
    out["optimizer_steps"] = int(steps)
    backward = result.get("backward_calls")
    out["backward_calls"] = int(
        backward if backward is not None else len(kinds.get("backward", ()))
    )
    train = counters.get("train_forwards")
    if train:
        out["eval_mode_train_frac"] = counters.get("train_forwards_eval_mode", 0) / train
    if "eval_forwards_grad" in counters:
        out["eval_forwards_grad"] = int(counters["eval_forwards_grad"])
    evals = counters.get("eval_forwards")
    if evals is not None:
        out["eval_forwards"] = int(evals)
    if evals:
        out["eval_grad_frac"] = counters.get("eval_forwards_grad", 0) / evals
    for key in ("peak_rss_mb", "wall_s"):
        if result.get(key) is not None:
            out[key] = float(result[key])
    return out


def _cost_features(kinds: Kinds, source: str) -> dict[str, Feature]:
    out: dict[str, Feature] = {}
    end = kinds.get("end") or [{}]
    cpu = end[-1].get("cpu_s")
    if isinstance(cpu, int | float) and math.isfinite(cpu):
        out["cpu_time_s"] = float(cpu)
    # Per batch, not per optimizer step: a mutant that steps once per epoch does the same
    # work per batch, and its one long step interval would read as a cost.
    times = floats([r.get("t") for r in kinds.get(source, [])])
    gaps = np.diff(times[np.isfinite(times)])
    if gaps.size >= 2:
        out["step_cost_s"] = float(np.median(gaps)) * gaps.size
    return out


def _span(records: list[dict[str, Any]]) -> float | None:
    """Seconds between the first and the last of these records (their ``t``)."""
    times = floats([r.get("t") for r in records])
    times = times[np.isfinite(times)]
    return float(times[-1] - times[0]) if times.size >= 2 else None


def _column(records: list[dict[str, Any]], key: str) -> np.ndarray:
    return floats([r.get(key) for r in records])


def _as_float(value: Any) -> float:
    """Trace floats (numbers or "nan"/"inf" strings) as float; missing or junk as NaN."""
    try:
        decoded = decode_float(value)
    except (TypeError, ValueError):
        return math.nan
    return math.nan if decoded is None else decoded


def _val_metric(report: Mapping[str, Any]) -> float | None:
    for key in VAL_METRIC_KEYS:
        if report.get(key) is not None:
            return _as_float(report[key])
    return None


def _reported_float(reports: list[dict[str, Any]], key: str) -> float | None:
    for report in reports:
        if report.get(key) is not None:
            value = _as_float(report[key])
            if math.isfinite(value):
                return value
    return None


def _reported_int(reports: list[dict[str, Any]], key: str) -> int | None:
    value = _reported_float(reports, key)
    return int(value) if value is not None else None
