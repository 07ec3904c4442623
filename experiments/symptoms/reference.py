"""The reference distribution a mutant run is judged against, and effect sizes.

For every feature the reference (the unmutated loop's ``ok`` runs) gives a centre (mean)
and a spread: the sample standard deviation floored at ``max(abs_floor, rel_floor x
|centre|)`` from ``SPREAD_FLOORS``, so five identical reference runs do not turn a
rounding difference into an infinite effect. A run's effect on a feature is
``z = (value - centre) / spread``, meaningful when ``|z| > EFFECT_Z``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import mannwhitneyu

EFFECT_Z = 3.0
MIN_SEEDS_FOR_TEST = 3
# A spread from two runs has one degree of freedom: two seeds that happen to agree make
# any third look like an effect (a 2-seed control measured d = -4.9 on an unmutated
# script). Labels judged against the spread need this many finished reference runs.
MIN_SPREAD_SEEDS = 3

# (absolute floor, floor relative to |reference centre|) of a feature's reference spread.
SPREAD_FLOORS: dict[str, tuple[float, float]] = {
    "initial_loss": (1e-6, 0.02),
    "final_over_initial": (0.02, 0.05),
    "max_over_initial": (0.05, 0.05),
    "peak_over_initial": (0.1, 0.1),
    "mean_log_progress": (0.05, 0.05),
    "log_slope_last_half": (0.01, 0.1),
    "tv_norm": (1e-4, 0.1),
    "spike_count": (0.5, 0.1),
    "train_val_gap": (0.02, 0.1),
    "val_loss_rise": (0.02, 0.1),
    "val_loss_final": (1e-4, 0.05),
    "val_metric_final": (0.005, 0.01),
    "val_metric_vs_chance": (0.005, 0.01),
    "holdout_metric": (0.005, 0.01),
    "holdout_loss": (1e-4, 0.05),
    "val_metric_gap": (0.005, 0.0),
    "val_loss_gap": (0.01, 0.05),
    "grad_norm_median": (1e-6, 0.1),
    "update_ratio_median": (1e-7, 0.1),
    "optimizer_steps": (0.5, 0.01),
    "eval_mode_train_frac": (0.05, 0.0),
    "eval_grad_frac": (0.05, 0.0),
    "eval_forwards": (0.5, 0.05),
    "mem_growth_mb_per_step": (0.01, 0.1),
    "time_per_step": (1e-4, 0.1),
    "train_time_s": (0.05, 0.1),
    "cpu_time_s": (0.05, 0.1),
    "step_cost_s": (0.01, 0.1),
}
JUDGED_FEATURES = tuple(SPREAD_FLOORS)


@dataclass(frozen=True)
class Reference:
    """The reference distribution of every judged feature in one (loop, device) group."""

    values: Mapping[str, np.ndarray]
    nan_rate: float
    n_runs: int
    seeds: tuple[int, ...]
    _stats: dict[str, tuple[float | None, float]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def has_spread(self) -> bool:
        """Enough finished reference runs to judge an effect against their spread."""
        return self.n_runs >= MIN_SPREAD_SEEDS

    def center(self, feature: str) -> float | None:
        return self._center_and_spread(feature)[0]

    def spread(self, feature: str) -> float:
        return self._center_and_spread(feature)[1]

    def _center_and_spread(self, feature: str) -> tuple[float | None, float]:
        if feature not in self._stats:
            values = self.values.get(feature, np.empty(0))
            center = float(np.mean(values)) if values.size else None
            sd = float(np.std(values, ddof=1)) if values.size >= 2 else 0.0
            self._stats[feature] = (center, max(sd, spread_floor(feature, center)))
        return self._stats[feature]

    def z(self, feature: str, value: Any) -> float | None:
        center = self.center(feature)
        if center is None or not is_number(value):
            return None
        return (float(value) - center) / self.spread(feature)

    def above(self, run: Mapping[str, Any], feature: str) -> bool:
        z = self.z(feature, run.get(feature))
        return z is not None and z > EFFECT_Z

    def below(self, run: Mapping[str, Any], feature: str) -> bool:
        z = self.z(feature, run.get(feature))
        return z is not None and z < -EFFECT_Z

    def within(self, run: Mapping[str, Any], feature: str) -> bool:
        """Measured on both sides and no meaningful effect."""
        z = self.z(feature, run.get(feature))
        return z is not None and abs(z) <= EFFECT_Z


def spread_floor(feature: str, center: float | None) -> float:
    absolute, relative = SPREAD_FLOORS.get(feature, (1e-9, 0.05))
    return max(absolute, relative * abs(center or 0.0))


def is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and math.isfinite(float(value))


# -- effect sizes over seeds (reported, not used for labels) ---------------------------------


def cohens_d(mutant: np.ndarray, reference: np.ndarray, feature: str) -> float | None:
    """Standardised mean difference with a pooled SD floored by ``SPREAD_FLOORS``."""
    if mutant.size == 0 or reference.size == 0:
        return None
    pooled_var = 0.0
    dof = mutant.size + reference.size - 2
    if dof > 0:
        pooled_var = (
            (mutant.size - 1) * _var(mutant) + (reference.size - 1) * _var(reference)
        ) / dof
    center = float(np.mean(reference))
    sd = max(math.sqrt(pooled_var), spread_floor(feature, center))
    return float((np.mean(mutant) - center) / sd)


def cliffs_delta(mutant: np.ndarray, reference: np.ndarray) -> float | None:
    """P(mutant > reference) - P(mutant < reference) over all pairs, in [-1, 1]."""
    if mutant.size == 0 or reference.size == 0:
        return None
    diff = mutant[:, None] - reference[None, :]
    return float((np.sum(diff > 0) - np.sum(diff < 0)) / diff.size)


def rank_test(mutant: np.ndarray, reference: np.ndarray) -> float | None:
    """Two-sided Mann-Whitney U p-value, or None with too few seeds to mean anything."""
    return rank_tests({"": (mutant, reference)})[""]


def rank_tests(samples: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float | None]:
    """``rank_test`` for many features at once.

    Features with the same sample sizes go to scipy in one vectorised call: one call per
    feature costs ~0.6 ms in scipy's wrapper alone, minutes over a full catalog.
    """
    p_values: dict[str, float | None] = dict.fromkeys(samples)
    # Grouped by shape and by the method scipy's "auto" would pick for that pair (exact
    # for a small sample without ties), so each p equals what a single call returns.
    batches: dict[tuple[int, int, str], list[str]] = {}
    for name, (mutant, reference) in samples.items():
        if mutant.size < MIN_SEEDS_FOR_TEST or reference.size < MIN_SEEDS_FOR_TEST:
            continue
        pooled = np.concatenate([mutant, reference])
        if np.ptp(pooled) == 0:
            p_values[name] = 1.0  # nothing to rank: scipy would divide by zero
            continue
        ties = np.unique(pooled).size < pooled.size
        small = min(mutant.size, reference.size) <= 8
        method = "exact" if small and not ties else "asymptotic"
        batches.setdefault((mutant.size, reference.size, method), []).append(name)
    for (_, _, method), names in batches.items():
        mutants = np.stack([samples[name][0] for name in names])
        references = np.stack([samples[name][1] for name in names])
        result = mannwhitneyu(mutants, references, alternative="two-sided", axis=1, method=method)
        for name, p in zip(names, np.atleast_1d(result.pvalue)):
            p_values[name] = float(p)
    return p_values


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float] | None:
    """95% Wilson score interval of a proportion (sound at 0 of 20, unlike the normal one)."""
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _var(values: np.ndarray) -> float:
    return float(np.var(values, ddof=1)) if values.size >= 2 else 0.0
