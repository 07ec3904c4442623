"""Features of the model's quality: what the script reported (``report`` records: val
loss and metric, train/val gap, against chance) and the harness's held-out evaluation
(``holdout`` record), with the gap between the two (a script that reports wrongly), and
where the run's outcome numbers came from (``outcome_source``).

A ``report`` record comes from the script's ``report(...)`` call or is captured from what
the script already logs; a captured one names its origin in ``source`` (``tensorboard``,
``wandb``, ``lightning``, ``logging``, ``stdout``, ``pattern``), a call has none
(``report``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from experiments.signature.values import Feature, as_float

VAL_METRIC_KEYS = ("val_metric", "val_acc", "val_accuracy")


def validation_features(
    reports: list[dict[str, Any]], final_train_loss: Feature, n_classes: int | None
) -> dict[str, Feature]:
    out: dict[str, Feature] = {}
    val_losses = [as_float(r["val_loss"]) for r in reports if r.get("val_loss") is not None]
    val_losses = [v for v in val_losses if math.isfinite(v)]
    if val_losses:
        out["val_loss_final"] = val_losses[-1]
        out["val_loss_best"] = min(val_losses)
        if out["val_loss_best"] > 0:
            out["val_loss_rise"] = val_losses[-1] / min(val_losses) - 1.0
        last = next(r for r in reversed(reports) if r.get("val_loss") is not None)
        train = as_float(last["train_loss"]) if last.get("train_loss") is not None else None
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


def holdout_features(
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
        value = as_float(record[key]) if record.get(key) is not None else math.nan
        out[f"holdout_{key}"] = value if math.isfinite(value) else None
    for reported, truth, gap in (
        ("val_metric_final", "holdout_metric", "val_metric_gap"),
        ("val_loss_final", "holdout_loss", "val_loss_gap"),
    ):
        mine, true = features.get(reported), out.get(truth)
        if isinstance(mine, int | float) and isinstance(true, int | float):
            out[gap] = float(mine) - float(true)
    return out


def outcome_source(reports: list[dict[str, Any]], features: Mapping[str, Feature]) -> str:
    """``holdout`` when the held-out evaluation measured the model, else the origin of the
    reported val metric, else of the val loss (the order ``symptoms.outcome`` measures by:
    ``report``, ``stdout``, ...; capture takes one series per field), else ``none``."""
    if isinstance(features.get("holdout_metric"), int | float):
        return "holdout"
    for has_field in (
        lambda report: _val_metric(report) is not None,
        lambda report: report.get("val_loss") is not None,
    ):
        for report in reversed(reports):
            if has_field(report):
                source = report.get("source")
                return source if isinstance(source, str) and source else "report"
    return "none"


def _val_metric(report: Mapping[str, Any]) -> float | None:
    for key in VAL_METRIC_KEYS:
        if report.get(key) is not None:
            return as_float(report[key])
    return None


def _reported_float(reports: list[dict[str, Any]], key: str) -> float | None:
    for report in reports:
        if report.get(key) is not None:
            value = as_float(report[key])
            if math.isfinite(value):
                return value
    return None


def reported_int(reports: list[dict[str, Any]], key: str) -> int | None:
    value = _reported_float(reports, key)
    return int(value) if value is not None else None
