"""The runs of a catalog as plain records plus one float array per judged feature."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.symptoms.reference import JUDGED_FEATURES, Reference, is_number

# Features whose mutant and reference medians the symptom table shows side by side.
SUMMARY_FEATURES = (
    "initial_loss",
    "final_over_initial",
    "max_over_initial",
    "log_slope_last_half",
    "val_loss_final",
    "val_metric_final",
    "holdout_loss",
    "holdout_metric",
    "train_time_s",
)


class RunTable:
    """The runs as plain records plus one float array per feature: judging ~2000 runs
    touches each run a few dozen times, which pandas indexing would make take minutes."""

    def __init__(self, runs: pd.DataFrame) -> None:
        self.records = runs.to_dict("records")
        self.arrays = {
            feature: pd.to_numeric(runs[feature], errors="coerce").to_numpy(dtype=float)
            if feature in runs
            else np.full(len(runs), np.nan)
            for feature in {*JUDGED_FEATURES, *SUMMARY_FEATURES}
        }

    def ok(self, positions: list[int]) -> list[int]:
        return [p for p in positions if self.records[p]["status"] == "ok"]

    def values(self, feature: str, positions: list[int], *, ok_only: bool = False) -> np.ndarray:
        if ok_only:
            positions = self.ok(positions)
        array = self.arrays[feature][positions]
        return array[np.isfinite(array)]

    def reference(self, positions: list[int]) -> Reference:
        went_nan = [
            is_number(self.records[p].get("first_nan_step")) or self.records[p]["status"] == "nan"
            for p in positions
        ]
        ok = self.ok(positions)
        values = {feature: self.values(feature, ok) for feature in JUDGED_FEATURES}
        seeds = tuple(sorted(int(self.records[p]["seed"]) for p in ok))
        return Reference(values, float(np.mean(went_nan)) if went_nan else 0.0, len(ok), seeds)
