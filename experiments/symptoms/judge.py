"""Judging: every mutant run against its reference, then each mutant over its seeds."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from experiments.symptoms.curve import SYMPTOMS
from experiments.symptoms.outcome import COSTS, LIES, OUTCOMES, quality_source
from experiments.symptoms.reference import (
    EFFECT_Z,
    JUDGED_FEATURES,
    Reference,
    cliffs_delta,
    cohens_d,
    is_number,
    rank_tests,
)
from experiments.symptoms.vocabulary import (
    PARTIAL,
    SEVERITY_ORDER,
    axis_of,
    base_name,
    label_of,
    rank,
    severity_of,
)

STABLE_FRACTION = 0.8
NOOP = "noop"
REFERENCE = "none"
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
# Exceptions that make a run invalid rather than a crash of the mutant.
NOT_CRASHES = ("SyntaxError", "IndentationError", "TabError", "SystemExit", "ModuleNotFoundError")
EARLY_STOP_STATUSES = ("crash", "timeout", "oom", "killed", "nan")
SOURCE_TITLES = {
    "holdout": "held-out evaluation",
    "val_metric": "the script's own val metric (the mutant could change it)",
    None: "the training curve (no quality measure)",
}


def scale_changes(category: str | None) -> bool:
    """A mutant of the loss function or its reduction: its loss is on another scale."""
    return "loss" in str(category or "").split("+")


@dataclass(frozen=True)
class RunVerdict:
    labels: list[str]
    quality: str | None  # which number measured the model (None: none did)
    finished: bool

    @property
    def severity(self) -> str:
        """The worst level any of this run's labels sets."""
        curve_is_outcome = self.finished and self.quality is None
        levels = [severity_of(label, curve_is_outcome=curve_is_outcome) for label in self.labels]
        return min(levels, key=rank) if levels else "silent"


def judge_run(run: Mapping[str, Any], ref: Reference, *, scale_free: bool = False) -> list[str]:
    """The labels of one mutant run (one seed) against the reference distribution."""
    return verdict(run, ref, scale_free=scale_free).labels


def verdict(run: Mapping[str, Any], ref: Reference, *, scale_free: bool = False) -> RunVerdict:
    status = run.get("status")
    if status == "invalid":
        return RunVerdict([crash_before_training(run, ref) or "invalid"], None, False)
    labels = status_labels(run)
    # A curve cut short covers a different stretch of training than the reference's, so
    # "final", "last half" and validation features of it are not comparable: only labels
    # that do not need a finished run are judged, and they are marked as partial.
    stopped = status in EARLY_STOP_STATUSES or is_number(run.get("first_nan_step"))
    quality = None if stopped else quality_source(run, ref)
    context: dict[str, Any] = {
        "scale_free": scale_free,
        "quality": quality,
        "outcome": labels,
        "symptoms": [],
    }
    for group in (OUTCOMES, COSTS, SYMPTOMS, LIES):
        for label in group:
            if stopped and label.needs_finished_run:
                continue
            if label.check is not None and label.check(run, ref, context):
                labels.append(label.name)
        labels = _unsuppressed(labels)
        context["outcome"] = [label for label in labels if axis_of(label) == "outcome"]
        context["symptoms"] = [label for label in labels if axis_of(label) == "symptom"]
    if stopped:
        labels = [_mark_partial(label) for label in labels]
    return RunVerdict(labels or ["silent"], quality, not stopped)


def _unsuppressed(labels: list[str]) -> list[str]:
    present = {base_name(label) for label in labels}
    kept = []
    for label in labels:
        declared = label_of(label)
        if declared is None or not present & set(declared.suppressed_by):
            kept.append(label)
    return kept


def _mark_partial(label: str) -> str:
    """Status labels are the run's end; everything else was read from a partial trace."""
    if base_name(label) in ("crash", "oom", "timeout", "nan") or label == "invalid":
        return label
    return label + PARTIAL


def crash_before_training(run: Mapping[str, Any], ref: Reference) -> str | None:
    """``crash:<Type>`` for an ``invalid`` run that is really the mutant crashing.

    The harness calls a run ``invalid`` when it raised before any training step. When
    the unmutated loop trains fine on the same arguments (the reference has ok runs),
    an ordinary exception there (a shape or dtype error at the first forward or loss) is
    the mutant's crash; a syntax error or an argument-parsing exit is not.
    """
    exc_type = run.get("exc_type")
    if not isinstance(exc_type, str) or not exc_type or exc_type in NOT_CRASHES:
        return None
    return f"crash:{exc_type}" if ref.n_runs > 0 else None


def status_labels(run: Mapping[str, Any]) -> list[str]:
    status, exc_type = run.get("status"), run.get("exc_type")
    if status == "crash":
        return [f"crash:{exc_type or 'Unknown'}"]
    if status == "oom":
        return ["oom"]
    if status == "killed":
        return ["crash:Killed"]
    if status == "timeout":
        return ["timeout"]
    return []


# -- roles, grouping, per-mutant summaries ---------------------------------------------------


def assign_roles(runs: pd.DataFrame) -> pd.Series:
    """``reference``, ``noop`` or ``mutant`` for every run.

    An explicit control (identity or operator ``noop``) is ``noop``. Otherwise unmutated
    runs on seeds that no mutant of the same (loop, device) used become the noop control,
    as long as at least two unmutated seeds remain shared with the mutants as reference.
    """
    roles = pd.Series("mutant", index=runs.index, dtype=object)
    explicit_noop = (runs["identity"] == NOOP) | runs["operator"].eq(NOOP)
    roles[explicit_noop] = NOOP
    unmutated = (runs["identity"] == REFERENCE) & ~explicit_noop
    roles[unmutated] = "reference"
    for _, group in runs.groupby(["loop", "device"], sort=False):
        if explicit_noop[group.index].any():
            continue
        mutant_seeds = set(group.loc[roles[group.index] == "mutant", "seed"])
        plain = group[unmutated[group.index]]
        if not mutant_seeds:
            continue
        spare = plain.index[~plain["seed"].isin(mutant_seeds)]
        if len(spare) >= 2 and len(plain) - len(spare) >= 2:
            roles[spare] = NOOP
    return roles


@dataclass
class Judgement:
    run_labels: pd.Series  # per run: list of labels (empty for reference runs)
    run_severity: pd.Series  # per run: the severity its labels set (None for reference runs)
    symptoms: pd.DataFrame  # one row per (loop, device, mutant)


class _RunTable:
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


def judge(runs: pd.DataFrame) -> Judgement:
    """Label every mutant and noop run and summarise each mutant over its seeds.

    ``runs`` needs ``loop, device, identity, operator, variant, category, seed, status,
    exc_type, role`` and the signature features.
    """
    table = _RunTable(runs)
    verdicts: list[RunVerdict | None] = [None] * len(runs)
    groups: dict[tuple[str, str], list[int]] = {}
    for position, record in enumerate(table.records):
        groups.setdefault((record["loop"], record["device"]), []).append(position)
    rows: list[dict[str, Any]] = []
    for positions in (groups[key] for key in sorted(groups)):
        reference = [p for p in positions if table.records[p]["role"] == "reference"]
        all_reference = table.reference(reference)
        mutants: dict[str, list[int]] = {}
        for p in positions:
            if table.records[p]["role"] != "reference":
                mutants.setdefault(table.records[p]["identity"], []).append(p)
        for members in (mutants[identity] for identity in sorted(mutants)):
            seeds = {table.records[p]["seed"] for p in members}
            same = [p for p in reference if table.records[p]["seed"] in seeds]
            ok_same = len(table.ok(same))
            use_same = table.records[members[0]]["role"] != NOOP and ok_same >= 2
            ref_positions = same if use_same else reference
            ref = table.reference(same) if use_same else all_reference
            scale_free = scale_changes(table.records[members[0]].get("category"))
            judged = [verdict(table.records[p], ref, scale_free=scale_free) for p in members]
            for p, run_verdict in zip(members, judged):
                verdicts[p] = run_verdict
            rows.append(_summary(table, members, judged, ref, ref_positions, scale_free))
    symptoms = pd.DataFrame(rows, columns=symptom_columns())
    return Judgement(
        pd.Series([v.labels if v else [] for v in verdicts], index=runs.index, dtype=object),
        pd.Series([v.severity if v else None for v in verdicts], index=runs.index, dtype=object),
        symptoms,
    )


def symptom_columns() -> list[str]:
    return [
        "loop",
        "device",
        "identity",
        "operator",
        "variant",
        "site",
        "category",
        "context",
        "role",
        "n_seeds",
        "n_finished",
        "n_reference",
        "seeds",
        "reference_seeds",
        "measured",
        "measured_share",
        "outcome",
        "outcome_source",
        "symptoms",
        "unstable",
        "scale_free",
        "label_fractions",
        "comparison",
        "top_effects",
        *(f"d_{feature}" for feature in JUDGED_FEATURES),
        *(f"p_{feature}" for feature in JUDGED_FEATURES),
        *(f"cliff_{feature}" for feature in JUDGED_FEATURES),
        *(f"mutant_{feature}" for feature in SUMMARY_FEATURES),
        *(f"ref_{feature}" for feature in SUMMARY_FEATURES),
    ]


def _summary(
    table: _RunTable,
    members: list[int],
    judged_runs: list[RunVerdict],
    ref: Reference,
    ref_positions: list[int],
    scale_free: bool,
) -> dict[str, Any]:
    first = table.records[members[0]]
    judged = [v for v in judged_runs if v.labels != ["invalid"]]
    fractions = label_fractions([v.labels for v in judged])
    measured, share = measured_severity(judged)
    sources = Counter(v.quality for v in judged if v.finished)
    source = sources.most_common(1)[0][0] if sources else None
    outcome = {k: v for k, v in fractions.items() if axis_of(k) == "outcome"}
    curve = {k: v for k, v in fractions.items() if axis_of(k) != "outcome" and k != "silent"}
    finished = [p for p, v in zip(members, judged_runs) if v.finished]
    row: dict[str, Any] = {
        "loop": first["loop"],
        "device": first["device"],
        "identity": first["identity"],
        "operator": first["operator"],
        "variant": first.get("variant") or first["operator"],
        "site": first.get("site") or "",
        "category": first.get("category") or "",
        "context": first.get("context") or "",
        "role": first["role"],
        "n_seeds": len(judged),
        "n_finished": len(finished),
        "n_reference": ref.n_runs,
        "seeds": json.dumps(sorted(int(table.records[p]["seed"]) for p in members)),
        "reference_seeds": json.dumps(list(ref.seeds)),
        "measured": measured if judged else "invalid",
        "measured_share": share,
        "outcome": format_labels(outcome, len(judged), stable=True) or "as reference",
        "outcome_source": SOURCE_TITLES[source] if finished else "none (no run finished)",
        "symptoms": format_labels(curve, len(judged), stable=True),
        "unstable": format_labels(fractions, len(judged), stable=False),
        "scale_free": scale_free,
        "label_fractions": json.dumps(fractions, sort_keys=True),
    }
    # Effect sizes compare finished runs only: a crash at step 3 has no "final" anything.
    effects = {}
    samples = {
        feature: (
            table.values(feature, finished),
            table.values(feature, ref_positions, ok_only=True),
        )
        for feature in JUDGED_FEATURES
    }
    if _seed_insensitive(table, ref_positions):
        # Every reference seed gave the same curve: there is no spread to divide by, so the
        # mutant is compared by exact differences from the one reference value.
        row["comparison"] = "exact (reference ignores the seed)"
        row["top_effects"] = _exact_differences(samples)
        for feature in JUDGED_FEATURES:
            row[f"d_{feature}"] = row[f"p_{feature}"] = row[f"cliff_{feature}"] = None
        _summaries(row, table, finished, ref_positions)
        return row
    row["comparison"] = "effect size over seeds"
    p_values = rank_tests(samples)
    for feature, (mutant_values, ref_values) in samples.items():
        d = cohens_d(mutant_values, ref_values, feature)
        row[f"d_{feature}"] = d
        row[f"p_{feature}"] = p_values[feature]
        row[f"cliff_{feature}"] = cliffs_delta(mutant_values, ref_values)
        if d is not None:
            effects[feature] = d
    _summaries(row, table, finished, ref_positions)
    row["top_effects"] = _top_effects(effects, row)
    return row


def _summaries(
    row: dict[str, Any], table: _RunTable, finished: list[int], ref_positions: list[int]
) -> None:
    for feature in SUMMARY_FEATURES:
        mutant_values = table.values(feature, finished)
        ref_values = table.values(feature, ref_positions, ok_only=True)
        row[f"mutant_{feature}"] = float(np.median(mutant_values)) if mutant_values.size else None
        row[f"ref_{feature}"] = float(np.median(ref_values)) if ref_values.size else None


def _seed_insensitive(table: _RunTable, ref_positions: list[int]) -> bool:
    """Did the reference gate find identical curves on every seed of this reference?"""
    flags = [table.records[p].get("seed_insensitive") for p in table.ok(ref_positions)]
    return bool(flags) and all(flag is True for flag in flags)


# Measured from the machine, not from the computation: never equal across runs, so an
# exact comparison would always call them moved (the cost labels judge them with a spread).
_MACHINE_DEPENDENT = frozenset(
    {"mem_growth_mb_per_step", "time_per_step", "train_time_s", "cpu_time_s", "step_cost_s"}
)


def _exact_differences(samples: Mapping[str, tuple[np.ndarray, np.ndarray]], count: int = 3) -> str:
    """``val_loss_final 0.412 -> 0.977`` for the features the mutant moved at all."""
    moved = []
    for feature, (mutant_values, ref_values) in samples.items():
        if feature in _MACHINE_DEPENDENT:
            continue  # time and memory differ between two runs of the same code
        mutant_values = mutant_values[np.isfinite(mutant_values)]
        ref_values = ref_values[np.isfinite(ref_values)]
        if not mutant_values.size or not ref_values.size:
            continue
        before, after = float(np.median(ref_values)), float(np.median(mutant_values))
        if after != before:
            scale = max(abs(before), 1e-12)
            moved.append((abs(after - before) / scale, f"{feature} {before:.4g} -> {after:.4g}"))
    return "; ".join(text for _, text in sorted(moved, reverse=True)[:count])


def label_fractions(labels_per_seed: list[list[str]]) -> dict[str, float]:
    """Share of seeds in which each label fired, most frequent first."""
    if not labels_per_seed:
        return {}
    counts = Counter(label for labels in labels_per_seed for label in set(labels))
    total = len(labels_per_seed)
    return {label: count / total for label, count in counts.most_common()}


def format_labels(fractions: Mapping[str, float], n_seeds: int, *, stable: bool) -> str:
    """``no_learning 5/5, chance_val 5/5`` (stable) or the labels under 80% (unstable)."""
    chosen = [
        (label, share) for label, share in fractions.items() if (share >= STABLE_FRACTION) == stable
    ]
    return ", ".join(f"{label} {round(share * n_seeds)}/{n_seeds}" for label, share in chosen)


def measured_severity(runs: list[RunVerdict] | list[list[str]]) -> tuple[str, float]:
    """The worst severity reached or exceeded in at least half the seeds, and that share.

    Takes run verdicts, or bare label lists (judged as finished runs with a quality
    measure: only outcome labels count)."""
    verdicts = [v if isinstance(v, RunVerdict) else RunVerdict(v, "given", True) for v in runs]
    return severity_median([v.severity for v in verdicts])


def severity_median(severities: list[str]) -> tuple[str, float]:
    """``measured_severity`` of runs whose severities are already known."""
    if not severities:
        return "silent", 0.0
    ranks = [rank(severity) for severity in severities]
    for level, severity in enumerate(SEVERITY_ORDER):
        share = sum(r <= level for r in ranks) / len(ranks)
        if share >= 0.5:
            return severity, share
    return "silent", 1.0


def _top_effects(effects: Mapping[str, float], row: Mapping[str, Any], count: int = 3) -> str:
    strong = sorted(
        ((feature, d) for feature, d in effects.items() if abs(d) > EFFECT_Z),
        key=lambda item: -abs(item[1]),
    )[:count]
    parts = []
    for feature, d in strong:
        p = row.get(f"p_{feature}")
        parts.append(f"{feature} d={d:+.1f}" + (f" p={p:.3f}" if p is not None else ""))
    return "; ".join(parts)
