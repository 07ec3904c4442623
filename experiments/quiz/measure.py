"""Runs under the harness and what the quiz reads from them.

``measure(loop, variants, seeds, results_dir)`` runs the correct loop and each variant
(a practice script or a single bug) on the same seeds, through the harness cache, and
judges them with the catalog's own rules (``experiments.catalog.build_tables``).

Impact, the one number that ranks bugs and classifies interactions: the share of the
correct loop's progress that a run loses, per seed, then the median over seeds.
With a validation metric: ``(ref - run) / (ref - chance)``; without one, on the loss:
``(run_final/initial - ref) / (1 - ref)``. Clipped to [0, 1]; a run that stops early
(crash, timeout, NaN) or has no number scores 1 (it lost everything).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.quiz.draw import QuizError
from experiments.sweep import Loop, SweepError, find_script

FINISHED = ("ok",)
CONFIG_LOOPS = Path(__file__).resolve().parents[2] / "configs" / "loop"


@dataclass(frozen=True)
class QuizLoop:
    """A reference loop as the quiz runs it (from ``configs/loop/NAME.yaml``)."""

    name: str
    loop: Loop
    script: Path
    n_classes: int | None
    budget: Any = field(compare=False)  # the runner's Budget


@dataclass(frozen=True)
class Variant:
    """One script to run: ``mutant`` is the harness's mutant entry (None: correct loop)."""

    source: str
    mutant: dict[str, Any] | None

    @property
    def identity(self) -> str:
        return self.mutant["identity"] if self.mutant else "none"


@dataclass
class Measurement:
    runs: pd.DataFrame  # one row per run, with signature features and labels
    symptoms: pd.DataFrame  # one row per identity (the catalog's judgement)
    curves: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]  # (identity, seed) -> loss
    n_classes: int | None

    def labels(self, identity: str) -> dict[str, float]:
        """Symptom label -> share of seeds where it fired."""
        rows = self.symptoms[self.symptoms["identity"] == identity]
        if rows.empty:
            return {}
        value = rows.iloc[0]["label_fractions"]
        if isinstance(value, str):  # the catalog stores nested fields as JSON text
            value = json.loads(value)
        return {str(k): float(v) for k, v in value.items()} if isinstance(value, dict) else {}

    def severity(self, identity: str) -> str | None:
        rows = self.symptoms[self.symptoms["identity"] == identity]
        return None if rows.empty else str(rows.iloc[0]["measured"])

    def statuses(self, identity: str) -> list[str]:
        return list(self.runs.loc[self.runs["identity"] == identity, "status"])

    def impact(self, identity: str) -> float | None:
        mine = self.runs[self.runs["identity"] == identity]
        reference = self.runs[(self.runs["identity"] == "none") & (self.runs["status"] == "ok")]
        if mine.empty or reference.empty:
            return None
        return impact(mine, reference, self.n_classes)


def impact(runs: pd.DataFrame, reference: pd.DataFrame, n_classes: int | None) -> float:
    """Median over seeds of the share of the reference's progress lost (module docstring)."""
    ref_metric = _median(reference, "val_metric_final")
    ref_ratio = _median(reference, "final_over_initial")
    shares = []
    for _, run in runs.iterrows():
        shares.append(_share_lost(run, ref_metric, ref_ratio, n_classes))
    return float(np.median(shares))


def _share_lost(
    run: pd.Series, ref_metric: float | None, ref_ratio: float | None, n_classes: int | None
) -> float:
    if run["status"] not in FINISHED:
        return 1.0
    if ref_metric is not None:
        chance = 1.0 / n_classes if n_classes else 0.0
        value = _number(run.get("val_metric_final"))
        margin = ref_metric - chance
        if value is None or margin <= 0:
            return 1.0
        return float(np.clip((ref_metric - value) / margin, 0.0, 1.0))
    value = _number(run.get("final_over_initial"))
    if value is None or ref_ratio is None or ref_ratio >= 1:
        return 1.0
    return float(np.clip((value - ref_ratio) / (1.0 - ref_ratio), 0.0, 1.0))


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


def _median(frame: pd.DataFrame, column: str) -> float | None:
    if column not in frame:
        return None
    values = [v for v in (_number(x) for x in frame[column]) if v is not None]
    return float(np.median(values)) if values else None


def available_loops() -> list[str]:
    return sorted(path.stem for path in CONFIG_LOOPS.glob("*.yaml") if path.stem != "custom")


def quiz_loop(name: str, epochs: int | None = None) -> QuizLoop:
    """The loop's config (script, epochs, classes) and deadlines from ``budget/default``."""
    from experiments.budgets import runner_budget
    from experiments.compose import compose, to_sweep

    if name not in available_loops():
        raise QuizError(f"unknown loop {name!r}; valid: {', '.join(available_loops())}")
    overrides = [f"loop={name}"] + ([f"budget.epochs={epochs}"] if epochs else [])
    cfg = compose(overrides)
    loop = to_sweep(cfg).loops[0]
    try:
        script = find_script(loop.script)
    except SweepError as error:
        raise QuizError(str(error)) from None
    budget = runner_budget(cfg.budget)
    return QuizLoop(name, loop, script, cfg.loop.n_classes, budget)


def measure(
    loop: QuizLoop,
    variants: Sequence[Variant],
    seeds: Sequence[int],
    results_dir: str | Path,
    workers: int | None = None,
) -> Measurement:
    """Run the correct loop and every variant on ``seeds`` (cached) and judge them."""
    from experiments.catalog import build_tables, load_runs
    from experiments.harness import RunSpec, run_sweep

    everything = [Variant(loop.script.read_text(encoding="utf-8"), None), *variants]
    specs = [
        RunSpec(
            script=str(loop.script),
            source=variant.source,
            argv=loop.loop.argv(seed, "cpu"),
            seed=seed,
            loop=loop.name,
            mutant=variant.mutant,
        )
        for variant in everything
        for seed in seeds
    ]
    rows = run_sweep(specs, results_dir, workers=workers or os.cpu_count() or 1, budget=loop.budget)
    keys = {row["key"] for row in rows}
    loaded = load_runs(results_dir, n_classes=loop.n_classes, keys=keys)
    tables = build_tables(loaded)
    curves = {}
    for run in loaded:
        if "loss" in run.curves:
            curves[(run.result.get("identity") or "none", int(run.result["seed"]))] = run.curves[
                "loss"
            ]
    return Measurement(tables.runs, tables.symptoms, curves, loop.n_classes)
