"""One strength search on one loop: each setting tried is a small adaptive sweep.

A setting runs the operator at that strength on its first site, with adaptive seeds
(``experiments.adaptive``: 3 seeds, more while undecided, up to the cap) and the
unmutated loop on the same seeds, through the harness and its cache, and is judged like
a catalog mutant. It *shows in the outcome* when its measured severity is not
``silent``, and *shows in a symptom* when any symptom label is stable (80% of its seeds):
the statistics of the catalog, so a threshold means what a catalog row means. The two
searches share the settings they both try.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from experiments.adaptive import Schedule, adaptive_sweep
from experiments.strength.axes import Axis
from experiments.strength.bisect import Search, first_showing, weakest
from experiments.symptoms import EFFECT_Z, spread_floor
from experiments.symptoms.sequential import Decision
from experiments.validity import is_valid

Rows = list[dict[str, Any]]
# A setting answers two questions, each from its own indicators of the sequential rule
# (experiments.symptoms.sequential): "shows in the outcome" from the severity levels
# (``>=degrades``, ...: the measured severity), "shows in a symptom" from the labels. A
# setting only one search asks about is sampled until that question's indicators are
# decided: each indicator's test (and its error rates) is the same, the seeds that only
# the other question's indicators would have asked for are not run.
BOTH = "both"
QUESTIONS = {
    "outcome": frozenset({"outcome"}),
    "symptom": frozenset({"symptom"}),
    BOTH: frozenset({"outcome", "symptom"}),
}
METRICS = ("holdout_metric", "val_metric_final")  # the outcome's number, as the catalog's


@dataclass(frozen=True)
class Point:
    value: Any
    spec: str
    n_seeds: int
    stopped: str
    measured: str
    outcome: str
    symptoms: str
    metric: float | None  # the mutant's median outcome metric
    shows_outcome: bool
    shows_symptom: bool


@dataclass(frozen=True)
class Band:
    """The reference's outcome metric: centre +- EFFECT_Z spreads (the catalog's threshold)."""

    metric: str
    center: float
    half_width: float


@dataclass
class Result:
    axis: Axis
    outcome: Search
    symptom: Search
    points: list[Point]
    band: Band | None


class Evaluator:
    """Runs and judges one setting at a time; remembers what it has judged."""

    def __init__(
        self,
        plan: Callable[[str], list],  # operator spec -> RunSpecs on every seed
        seeds: Sequence[int],
        run: Callable[[list], Rows],
        results_dir: Path,
        n_classes: dict[str, int],
        schedule: Schedule | None = None,
        say: Callable[[str], None] = lambda message: None,
    ) -> None:
        self.plan, self.seeds, self.run = plan, seeds, run
        self.results_dir, self.n_classes = Path(results_dir), n_classes
        self.schedule, self.say = schedule or Schedule(), say
        self.points: dict[str, Point] = {}
        self.asked: dict[str, frozenset[str]] = {}  # spec -> the questions it was sampled for
        self.band: Band | None = None

    def __call__(self, axis: Axis, value: Any, question: str = BOTH) -> Point:
        """The setting's point, sampled until ``question`` (``outcome``, ``symptom`` or
        both) is decided; a setting asked again for another question samples on."""
        spec = axis.spec(value)
        wanted = self.asked.get(spec, frozenset()) | QUESTIONS[question]
        if spec not in self.points or wanted != self.asked[spec]:
            self.asked[spec] = wanted
            self.points[spec] = self._evaluate(axis, value, spec, wanted)
            point = self.points[spec]
            self.say(
                f"{spec}: {point.measured} ({point.n_seeds} seeds, {point.stopped}); "
                f"symptoms: {point.symptoms or 'none'}"
            )
        return self.points[spec]

    def _evaluate(self, axis: Axis, value: Any, spec: str, questions: frozenset[str]) -> Point:
        from experiments.catalog import build_tables, load_runs, stopping_decisions

        def runs_of(rows: Rows):
            keys = {row["key"] for row in rows}
            return load_runs(self.results_dir, n_classes=self.n_classes, keys=keys)

        specs = self.plan(spec)
        rows, _ = adaptive_sweep(
            specs,
            self.seeds,
            self.run,
            lambda rows: {
                key: answered(decision, questions)
                for key, decision in stopping_decisions(runs_of(rows)).items()
            },
            self.schedule,
        )
        tables = build_tables(runs_of(rows))
        mutants = tables.symptoms[tables.symptoms["role"] == "mutant"]
        row = mutants.iloc[0].to_dict()
        if self.band is None:
            self.band = _band(tables.runs)
        metric = next(
            (row.get(f"mutant_{name}") for name in METRICS if _number(row.get(f"mutant_{name}"))),
            None,
        )
        measured = str(row.get("measured"))
        symptoms = row.get("symptoms") if isinstance(row.get("symptoms"), str) else ""
        stopped = str(row.get("stopped"))
        if not row.get("decided") and questions != QUESTIONS[BOTH]:
            (only,) = questions
            stopped += f" (the {only} is decided)"
        return Point(
            value=value,
            spec=spec,
            n_seeds=int(row.get("n_seeds") or 0),
            stopped=stopped,
            measured=measured,
            outcome=str(row.get("outcome")),
            symptoms=symptoms,
            metric=float(metric) if metric is not None else None,
            # unjudged is no verdict: it shows nothing (docs/truth.md).
            shows_outcome=measured not in ("silent", "unjudged") and is_valid(measured),
            shows_symptom=bool(symptoms),
        )


def search(axis: Axis, evaluate: Callable[[Axis, Any, str], Point], steps: int) -> Result:
    """The weakest setting that shows in the outcome, and the one that shows in a symptom."""

    def along(attribute: str) -> Search:
        question = attribute.removeprefix("shows_")

        def shows(value: Any) -> bool:
            return getattr(evaluate(axis, value, question), attribute)

        if not axis.numeric:
            return first_showing(shows, axis.values)
        return weakest(
            shows, float(axis.weak), float(axis.strong), steps, lambda v: _rounded(axis, v)
        )

    outcome, symptom = along("shows_outcome"), along("shows_symptom")
    points = getattr(evaluate, "points", {})
    band = getattr(evaluate, "band", None)
    return Result(axis, outcome, symptom, list(points.values()), band)


def answered(decision: Decision, questions: frozenset[str]) -> Decision:
    """Decided for these questions: no open indicator of theirs (and the minimum seeds)."""
    if decision.decided or "min_seeds" in decision.undecided:
        return decision
    open_ = [name for name in decision.undecided if _question_of(name) in questions]
    if open_:
        return decision
    return Decision(True, decision.reason, decision.undecided)


def _question_of(indicator: str) -> str:
    """``>=degrades 2/5`` is a severity level (the outcome); any other a label."""
    return "outcome" if indicator.startswith(">=") else "symptom"


def _rounded(axis: Axis, value: Any) -> Any:
    """The setting as its spec writes it (3 significant digits): one cache key per setting."""
    if not axis.numeric:
        return value
    return round(value) if axis.integer else float(f"{float(value):.3g}")


def _band(runs) -> Band | None:
    reference = runs[(runs["role"] == "reference") & (runs["status"] == "ok")]
    for metric in METRICS:
        if metric not in reference:
            continue
        values = np.asarray(
            [v for v in reference[metric] if _number(v)],
            dtype=float,
        )
        if values.size:
            center = float(np.mean(values))
            sd = float(np.std(values, ddof=1)) if values.size >= 2 else 0.0
            spread = max(sd, spread_floor(metric, center))
            return Band(metric, center, EFFECT_Z * spread)
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and np.isfinite(value)
