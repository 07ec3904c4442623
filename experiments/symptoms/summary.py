"""The ``symptoms`` table: one row per (loop, device, mutant) from its runs' verdicts:
measured severity, outcome and symptoms with their frequency over seeds, effect sizes and
rank tests against the reference (or exact differences when the reference ignores the
seed), and the median of the headline features side by side."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from experiments.symptoms.reference import (
    EFFECT_Z,
    JUDGED_FEATURES,
    Reference,
    cliffs_delta,
    cohens_d,
    rank_tests,
)
from experiments.symptoms.roles import NOOP
from experiments.symptoms.runtable import SUMMARY_FEATURES, RunTable
from experiments.symptoms.seeds import format_labels, label_fractions, measured_severity
from experiments.symptoms.unjudged import NO_MEASURE, THROUGH_MUTANT, TOO_FEW, unjudged_reason
from experiments.symptoms.verdict import RunVerdict
from experiments.symptoms.vocabulary import MARKERS, axis_of

SOURCE_TITLES = {
    "holdout": "held-out evaluation",
    "val_metric": "the script's own val metric",
    "val_loss": "the script's own val loss",
    None: "nothing: the training curve only (no quality measure)",
}


def source_title(quality: str | None, logged_by: str | None) -> str:
    """``the script's own val loss (stdout; the mutant could change it)``."""
    if quality not in ("val_metric", "val_loss"):
        return SOURCE_TITLES[quality]
    return f"{SOURCE_TITLES[quality]} ({logged_by or 'report'}; the mutant could change it)"


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
        "unjudged_reason",
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


def mutant_row(
    table: RunTable,
    members: list[int],
    judged_runs: list[RunVerdict],
    ref: Reference,
    ref_positions: list[int],
    scale_free: bool,
    control: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The row of one mutant (or of the noop control: ``control`` is then its own labels,
    and it is ``silent`` by construction wherever a spread could judge it)."""
    first = table.records[members[0]]
    judged = [v for v in judged_runs if v.labels != ["invalid"]]
    fractions = label_fractions([v.labels for v in judged])
    measured, share = measured_severity(judged)
    if first["role"] == NOOP and judged and ref.has_spread:
        measured, share = "silent", 1.0
    sources = Counter(v.quality for v in judged if v.finished)
    source = sources.most_common(1)[0][0] if sources else None
    outcome = {k: v for k, v in fractions.items() if axis_of(k) == "outcome"}
    curve = {k: v for k, v in fractions.items() if axis_of(k) != "outcome" and k not in MARKERS}
    finished = [p for p, v in zip(members, judged_runs) if v.finished]
    logged_by = Counter(
        str(table.records[p].get("outcome_source") or "report") for p in finished
    ).most_common(1)
    reason = unjudged_reason(measured, judged, ref)
    # What the outcome column says when no outcome label fired.
    unmeasured = not any(v.quality for v in judged if v.finished)
    nothing_fired = (
        TOO_FEW
        if reason.startswith(TOO_FEW)
        else "not measured"
        if reason.startswith(NO_MEASURE) or unmeasured
        else "as reference by a number the mutated code computed"
        if THROUGH_MUTANT in reason
        else "as reference"
    )
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
        "unjudged_reason": reason,
        "outcome": format_labels(outcome, len(judged), stable=True, control=control)
        or nothing_fired,
        "outcome_source": source_title(source, logged_by[0][0] if logged_by else None)
        if finished
        else "none (no run finished)",
        "symptoms": format_labels(curve, len(judged), stable=True, control=control),
        "unstable": format_labels(fractions, len(judged), stable=False, control=control),
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
    row: dict[str, Any], table: RunTable, finished: list[int], ref_positions: list[int]
) -> None:
    for feature in SUMMARY_FEATURES:
        mutant_values = table.values(feature, finished)
        ref_values = table.values(feature, ref_positions, ok_only=True)
        row[f"mutant_{feature}"] = float(np.median(mutant_values)) if mutant_values.size else None
        row[f"ref_{feature}"] = float(np.median(ref_values)) if ref_values.size else None


def _seed_insensitive(table: RunTable, ref_positions: list[int]) -> bool:
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
