"""``trainwreck-diagnoser``: a learned diagnoser in the style of DeepFD.

A scikit-learn classifier on a run's signature (``experiments.signature.signature``)
predicts the bug category of the run, or "clean". Only scale-free features are used
(ratios, rates, fractions, counts of events), because the classifier is scored leaving
one loop out: absolute losses or memory sizes would identify the loop, not the bug.
The run's status (crash, nan, timeout...) is one more feature. The diagnoser sees the
whole run, so its finding's step is the run's last optimizer step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from experiments.bench.api import DetectorError, DynamicDetector, Finding, RunInput, register
from experiments.trace import STATUSES

SCALE_FREE_FEATURES = (
    "init_loss_ratio",
    "final_over_initial",
    "max_over_initial",
    "mean_log_progress",
    "log_slope_last_half",
    "plateau_frac",
    "sign_change_rate",
    "tv_norm",
    "spike_count",
    "diverged",
    "val_loss_rise",
    "val_metric_vs_chance",
    "grad_norm_trend",
    "update_ratio_median",
    "eval_mode_train_frac",
    "eval_grad_frac",
)
CLEAN_LABEL = "clean"


def run_label(run: RunInput) -> str:
    """Ground truth for training: the run's first bug category, or clean."""
    categories = run.result.get("categories") or []
    if (run.result.get("identity") or "none") == "none" or not categories:
        return CLEAN_LABEL
    return str(categories[0])


def features(run: RunInput) -> list[float]:
    """The feature vector of one run (NaN where the signature has no value)."""
    from experiments.signature import signature

    values = signature(run.records, run.result, n_classes=None)
    row = [_number(values.get(name)) for name in SCALE_FREE_FEATURES]
    log_update = values.get("update_ratio_median")
    row.append(
        math.log10(log_update)
        if isinstance(log_update, (int, float)) and log_update > 0
        else math.nan
    )
    steps = _number(values.get("optimizer_steps"))
    backwards = _number(values.get("backward_calls"))
    row.append(steps / backwards if backwards and not math.isnan(steps) else math.nan)
    status = str(run.result.get("status") or "ok")
    row.extend(1.0 if status == known else 0.0 for known in STATUSES)
    return row


def _number(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return math.nan


@register
class TrainwreckDiagnoser(DynamicDetector):
    name = "trainwreck-diagnoser"
    summary = "random forest on scale-free signature features (DeepFD style)"
    learned = True
    timeout_s = 30.0

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self._model: Any = None

    def fit(self, runs: Sequence[RunInput]) -> None:
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.impute import SimpleImputer
        from sklearn.pipeline import make_pipeline

        labels = [run_label(run) for run in runs]
        if len(set(labels)) < 2:
            raise DetectorError(f"needs at least two labels to learn, got {sorted(set(labels))}")
        # Missing features (a crash has no loss curve) become the median plus a flag column.
        model = make_pipeline(
            SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
            RandomForestClassifier(
                n_estimators=100, random_state=self.seed, class_weight="balanced"
            ),
        )
        model.fit([features(run) for run in runs], labels)
        self._model = model

    def check_run(self, run: RunInput) -> list[Finding]:
        if self._model is None:
            raise DetectorError("the diagnoser is not trained (fit it on other loops' runs)")
        probabilities = self._model.predict_proba([features(run)])[0]
        best = int(probabilities.argmax())
        label = str(self._model.classes_[best])
        if label == CLEAN_LABEL:
            return []
        step = run.result.get("steps")
        return [
            Finding(
                label,
                None,
                None,
                int(step) if isinstance(step, int) else None,
                f"predicted {label} (p={probabilities[best]:.2f})",
                "diagnoser",
            )
        ]
