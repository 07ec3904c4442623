"""The loss curve (``backward`` losses, else ``loss_fn`` outputs, else the reported
``train_loss``) and the features of its shape: initial and final loss, progress, slope,
plateau, jitter, spikes, divergence (see the package docstring for each)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from experiments.signature.values import Feature, Kinds, floats, split_by_kind

SPIKE_FACTOR = 3.0
SPIKE_WINDOW = 20
PLATEAU_TOLERANCE = 0.01
LossCurve = tuple[np.ndarray, np.ndarray, str]  # (steps, losses, source)


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


def loss_features(losses: np.ndarray, n_classes: int | None) -> dict[str, Feature]:
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
