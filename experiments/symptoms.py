"""Symptoms: each mutant judged against the unmutated loop over the same seeds.

How a label fires (these are the rules the code applies, in words)
-------------------------------------------------------------------
Runs are grouped by (loop, device). Inside a group the *reference* is the unmutated
loop (identity ``none``) on the seeds the mutant ran with; if fewer than two of those
exist, all reference seeds of the group are used. Only reference runs that ended ``ok``
count. For every feature of the signature (``experiments/signature.py``) the reference
gives a centre (mean) and a spread: the sample standard deviation, floored at
``max(abs_floor, rel_floor x |centre|)`` from ``SPREAD_FLOORS``, so five identical
reference runs do not turn a rounding difference into an infinite effect. The *effect*
of one mutant run on a feature is ``z = (value - centre) / spread``; it is meaningful
when ``|z| > EFFECT_Z`` (3) in the direction the label needs.

Each run (one seed) of the mutant is judged on its own; a label fires for that seed when
BOTH its effect condition and its sanity condition hold:

- ``crash:<ExceptionType>``: status ``crash`` (``oom`` gives ``crash:OutOfMemoryError``
  unless the harness named the type, ``killed`` gives ``crash:Killed``).
- ``timeout``: status ``timeout``.
- ``nan``: the loss went non-finite (or status ``nan``), and at most 20% of reference runs did.
- ``diverges``: final/initial loss z > 3 and the run ended 20% above its initial loss; or
  the smoothed maximum / initial z > 3 and above 3 (a sustained rise); or the raw maximum
  / initial z > 3 and above 10 (a blow-up, even one the run recovers from).
- ``no_learning``: final/initial z > 3, the run recovered less than 20% of the
  reference's improvement (1 - final/initial), where the reference improves by >= 5%,
  and it did not end 20% above its start (that is ``diverges``). Not given with ``nan``.
- ``slow_convergence``: not ``no_learning``/``diverges``/``nan``, and either final/initial
  z > 3 with less than 90% of the reference improvement, or the area under the log curve
  (``mean_log_progress``) z > 3 and above the reference by more than 10% of its magnitude.
- ``oscillates``: jitter of the last half (``tv_norm``) z > 3 and at least 1.5x the reference's.
- ``loss_spike``: spike count z > 3 and at least 2 spikes.
- ``overfits``: validation loss ended >= 10% above its best and the train/val gap is positive,
  with the gap or that rise z > 3, while training itself worked (at least half the
  reference's improvement).
- ``chance_val``: final validation metric z < -3 and the run kept less than 10% of the
  reference's margin over chance (needs ``n_classes`` or a reported ``chance``).
- ``too_good``: validation metric z > 3 and it closed more than half of the reference's
  remaining gap to 1.0; or validation loss z < -3 and below half the reference's while the
  initial loss is within 20% of the reference's (the same loss scale).
- ``init_loss_off``: initial loss |z| > 3 and more than 20% away from the reference's.
- ``memory_growth``: memory slope z > 3 and the run grew >= 16 MB more than the reference would.
- ``slower``: training time (first to last training loss) z > 3 and >= 1.5x the reference's.
- ``eval_mode_training``: fraction of training forwards in ``eval()`` z > 3, above 0.5,
  and at least 0.25 above the reference's.
- ``grad_in_eval``: fraction of eval forwards with grad enabled z > 3, above 0.5 and at
  least 0.25 above the reference's, while the number of eval forwards stays within 1.5x the
  reference's (more means training forwards lost their backward and count as eval ones).
- ``silent``: none of the above in that seed.

A run cut short (crash, timeout, oom, killed, or a non-finite loss) gets its status label
plus only the labels that do not need a finished run (``nan``, ``diverges``, ``loss_spike``,
``init_loss_off``, ``memory_growth``, ``eval_mode_training``, ``grad_in_eval``).
The harness calls a run ``invalid`` when it stopped before any training step. If it raised
an ordinary exception there (not a syntax error or an argument-parsing exit) while the
reference trains on the same arguments, that is the mutant crashing at its first forward
or loss: it gets ``crash:<ExceptionType>``. Other ``invalid`` runs are not measurements:
they get the label ``invalid`` and do not count in the fractions.

Over seeds: each label's *fraction* is the share of judged seeds in which it fired; a label
below 80% is reported as unstable. Each seed's severity is the worst of its labels
(``LABEL_SEVERITY``); the mutant's *measured severity* is the worst level reached or
exceeded in at least half of its seeds (a median that rounds toward the worse level).

Mutant-level effect sizes (reported, not used for labels): Cohen's d with a pooled SD
floored as above, Cliff's delta, and a two-sided Mann-Whitney U p-value when both sides
have at least ``MIN_SEEDS_FOR_TEST`` finite values (with 5 seeds against 5 the smallest
possible p is 0.008).

Control: the unmutated loop on seeds no mutant used is judged exactly like a mutant under
the name ``noop``; its non-silent share is the false-positive rate (goal <= 5%).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import mannwhitneyu

EFFECT_Z = 3.0
STABLE_FRACTION = 0.8
MIN_SEEDS_FOR_TEST = 3
SEVERITY_ORDER = ("crash", "breaks_training", "degrades", "cost_only", "silent")
NOOP = "noop"
REFERENCE = "none"

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
    "grad_norm_median": (1e-6, 0.1),
    "update_ratio_median": (1e-7, 0.1),
    "optimizer_steps": (0.5, 0.01),
    "eval_mode_train_frac": (0.05, 0.0),
    "eval_grad_frac": (0.05, 0.0),
    "eval_forwards": (0.5, 0.05),
    "mem_growth_mb_per_step": (0.01, 0.1),
    "time_per_step": (1e-4, 0.1),
    "train_time_s": (0.05, 0.1),
}
JUDGED_FEATURES = tuple(SPREAD_FLOORS)
# Features whose mutant and reference medians the symptom table shows side by side.
SUMMARY_FEATURES = (
    "initial_loss",
    "final_over_initial",
    "max_over_initial",
    "log_slope_last_half",
    "val_metric_final",
    "train_time_s",
)

LABEL_SEVERITY: dict[str, str] = {
    "timeout": "crash",
    "nan": "breaks_training",
    "diverges": "breaks_training",
    "no_learning": "breaks_training",
    "chance_val": "breaks_training",
    "slow_convergence": "degrades",
    "oscillates": "degrades",
    "loss_spike": "degrades",
    "overfits": "degrades",
    "too_good": "degrades",
    "init_loss_off": "degrades",
    "eval_mode_training": "degrades",
    "memory_growth": "cost_only",
    "slower": "cost_only",
    "grad_in_eval": "cost_only",
    "silent": "silent",
}
# Exceptions that make a run invalid rather than a crash of the mutant.
NOT_CRASHES = ("SyntaxError", "IndentationError", "TabError", "SystemExit", "ModuleNotFoundError")
EARLY_STOP_STATUSES = ("crash", "timeout", "oom", "killed", "nan")
LABELS_WITHOUT_FINISHED_RUN = (
    "nan",
    "diverges",
    "loss_spike",
    "init_loss_off",
    "memory_growth",
    "eval_mode_training",
    "grad_in_eval",
)


def severity_of(label: str) -> str:
    if label.startswith("crash:"):
        return "crash"
    return LABEL_SEVERITY.get(label, "degrades")


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
        if center is None or not _is_number(value):
            return None
        return (float(value) - center) / self.spread(feature)


def spread_floor(feature: str, center: float | None) -> float:
    absolute, relative = SPREAD_FLOORS.get(feature, (1e-9, 0.05))
    return max(absolute, relative * abs(center or 0.0))


# -- per-seed rules ------------------------------------------------------------------------

Rule = Callable[[Mapping[str, Any], Reference], bool]


def _above(run: Mapping[str, Any], ref: Reference, feature: str) -> bool:
    z = ref.z(feature, run.get(feature))
    return z is not None and z > EFFECT_Z


def _below(run: Mapping[str, Any], ref: Reference, feature: str) -> bool:
    z = ref.z(feature, run.get(feature))
    return z is not None and z < -EFFECT_Z


def _improvement_share(run: Mapping[str, Any], ref: Reference) -> float | None:
    """The mutant's improvement (1 - final/initial) as a share of the reference's."""
    ratio, ref_ratio = run.get("final_over_initial"), ref.center("final_over_initial")
    if not _is_number(ratio) or ref_ratio is None or 1.0 - ref_ratio < 0.05:
        return None
    return (1.0 - float(ratio)) / (1.0 - ref_ratio)


def _nan(run, ref):
    went_nan = _is_number(run.get("first_nan_step")) or run.get("status") == "nan"
    return went_nan and ref.nan_rate <= 0.2


def _diverges(run, ref):
    ended_above = _above(run, ref, "final_over_initial") and run["final_over_initial"] > 1.2
    rose = _above(run, ref, "max_over_initial") and run["max_over_initial"] > 3.0
    blew_up = _above(run, ref, "peak_over_initial") and run["peak_over_initial"] > 10.0
    return ended_above or rose or blew_up


def _no_learning(run, ref):
    share = _improvement_share(run, ref)
    if share is None or not _above(run, ref, "final_over_initial"):
        return False
    # A run that ended well above its start is diverging, not merely failing to learn.
    return share < 0.2 and run["final_over_initial"] <= 1.2


def _slow_convergence(run, ref):
    share = _improvement_share(run, ref)
    ends_worse = share is not None and _above(run, ref, "final_over_initial") and share < 0.9
    area, ref_area = run.get("mean_log_progress"), ref.center("mean_log_progress")
    lags = (
        ref_area is not None
        and _above(run, ref, "mean_log_progress")
        and float(area) - ref_area > 0.1 * abs(ref_area)
    )
    return ends_worse or lags


def _oscillates(run, ref):
    center = ref.center("tv_norm")
    return _above(run, ref, "tv_norm") and center is not None and run["tv_norm"] >= 1.5 * center


def _loss_spike(run, ref):
    return _above(run, ref, "spike_count") and run["spike_count"] >= 2


def _overfits(run, ref):
    rise, gap = run.get("val_loss_rise"), run.get("train_val_gap")
    if not (_is_number(rise) and _is_number(gap)):
        return False
    effect = _above(run, ref, "train_val_gap") or _above(run, ref, "val_loss_rise")
    # Overfitting means validation worsens while training still works; a run whose training
    # loss went bad too is diverging or not learning, not overfitting.
    share = _improvement_share(run, ref)
    trains = share is not None and share >= 0.5
    return effect and trains and rise >= 0.1 and gap > 0


def _chance_val(run, ref):
    margin, ref_margin = run.get("val_metric_vs_chance"), ref.center("val_metric_vs_chance")
    if not _is_number(margin) or ref_margin is None or ref_margin <= 0.05:
        return False
    return _below(run, ref, "val_metric_final") and margin < 0.1 * ref_margin


def _too_good(run, ref):
    metric, ref_metric = run.get("val_metric_final"), ref.center("val_metric_final")
    better_metric = (
        ref_metric is not None
        and ref_metric < 1.0
        and _above(run, ref, "val_metric_final")
        and metric - ref_metric > 0.5 * (1.0 - ref_metric)
    )
    loss, ref_loss = run.get("val_loss_final"), ref.center("val_loss_final")
    # A lower loss only means better predictions on the same loss scale (a mutant that
    # swaps the criterion, e.g. MSE for cross-entropy, changes the scale, not the model).
    init, ref_init = run.get("initial_loss"), ref.center("initial_loss")
    same_scale = _is_number(init) and bool(ref_init) and abs(init / ref_init - 1.0) <= 0.2
    lower_loss = (
        same_scale
        and ref_loss is not None
        and ref_loss > 0
        and _below(run, ref, "val_loss_final")
        and loss < 0.5 * ref_loss
    )
    return better_metric or lower_loss


def _init_loss_off(run, ref):
    z, center = ref.z("initial_loss", run.get("initial_loss")), ref.center("initial_loss")
    if z is None or not center:
        return False
    return abs(z) > EFFECT_Z and abs(run["initial_loss"] / center - 1.0) > 0.2


def _memory_growth(run, ref):
    slope, center = run.get("mem_growth_mb_per_step"), ref.center("mem_growth_mb_per_step")
    steps = run.get("optimizer_steps") or 0
    if not _is_number(slope) or center is None:
        return False
    return _above(run, ref, "mem_growth_mb_per_step") and (slope - center) * steps >= 16.0


def _slower(run, ref):
    center = ref.center("train_time_s")
    return (
        _above(run, ref, "train_time_s")
        and center is not None
        and run["train_time_s"] >= 1.5 * center
    )


def _fraction_rule(feature: str) -> Rule:
    def rule(run, ref):
        value, center = run.get(feature), ref.center(feature)
        if not _is_number(value):
            return False
        return _above(run, ref, feature) and value > 0.5 and value - (center or 0.0) >= 0.25

    return rule


def _grad_in_eval(run, ref):
    # A training forward whose backward never comes (the backward was dropped) also
    # counts as an eval forward with grad; then the eval forwards balloon past the
    # reference's evaluation, and the loss labels already tell that story.
    evals, ref_evals = run.get("eval_forwards"), ref.center("eval_forwards")
    real_evals = not _is_number(evals) or ref_evals is None or evals <= 1.5 * ref_evals + 1
    return real_evals and _fraction_rule("eval_grad_frac")(run, ref)


RULES: dict[str, Rule] = {
    "nan": _nan,
    "diverges": _diverges,
    "no_learning": _no_learning,
    "slow_convergence": _slow_convergence,
    "oscillates": _oscillates,
    "loss_spike": _loss_spike,
    "overfits": _overfits,
    "chance_val": _chance_val,
    "too_good": _too_good,
    "init_loss_off": _init_loss_off,
    "memory_growth": _memory_growth,
    "slower": _slower,
    "eval_mode_training": _fraction_rule("eval_mode_train_frac"),
    "grad_in_eval": _grad_in_eval,
}
# A more specific label makes these redundant in the same seed.
SUPPRESSED_BY = {
    "no_learning": ("nan",),
    "slow_convergence": ("no_learning", "diverges", "nan"),
}


def judge_run(run: Mapping[str, Any], ref: Reference) -> list[str]:
    """The labels of one mutant run (one seed) against the reference distribution."""
    status = run.get("status")
    if status == "invalid":
        return [crash_before_training(run, ref) or "invalid"]
    labels = _status_labels(run)
    # A curve cut short (by a crash or a non-finite loss) covers a different stretch of
    # training than the reference's, so "final", "last half" and validation features of it
    # are not comparable; only labels that do not need a finished run are judged.
    stopped_early = status in EARLY_STOP_STATUSES or _is_number(run.get("first_nan_step"))
    for label, rule in RULES.items():
        if stopped_early and label not in LABELS_WITHOUT_FINISHED_RUN:
            continue
        if rule(run, ref):
            labels.append(label)
    labels = [
        label
        for label in labels
        if not any(other in labels for other in SUPPRESSED_BY.get(label, ()))
    ]
    return labels or ["silent"]


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


def _status_labels(run: Mapping[str, Any]) -> list[str]:
    status, exc_type = run.get("status"), run.get("exc_type")
    if status == "crash":
        return [f"crash:{exc_type or 'Unknown'}"]
    if status == "oom":
        return [f"crash:{exc_type or 'OutOfMemoryError'}"]
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

    def values(self, feature: str, positions: list[int], *, ok_only: bool = False) -> np.ndarray:
        if ok_only:
            positions = [p for p in positions if self.records[p]["status"] == "ok"]
        array = self.arrays[feature][positions]
        return array[np.isfinite(array)]

    def reference(self, positions: list[int]) -> Reference:
        went_nan = [
            _is_number(self.records[p].get("first_nan_step")) or self.records[p]["status"] == "nan"
            for p in positions
        ]
        ok = [p for p in positions if self.records[p]["status"] == "ok"]
        values = {feature: self.values(feature, ok) for feature in JUDGED_FEATURES}
        seeds = tuple(sorted(int(self.records[p]["seed"]) for p in ok))
        return Reference(values, float(np.mean(went_nan)) if went_nan else 0.0, len(ok), seeds)


def judge(runs: pd.DataFrame) -> Judgement:
    """Label every mutant and noop run and summarise each mutant over its seeds.

    ``runs`` needs ``loop, device, identity, operator, variant, category, seed, status,
    exc_type, role`` and the signature features.
    """
    table = _RunTable(runs)
    run_labels: list[list[str]] = [[] for _ in range(len(runs))]
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
            ok_same = sum(table.records[p]["status"] == "ok" for p in same)
            use_same = table.records[members[0]]["role"] != NOOP and ok_same >= 2
            ref_positions = same if use_same else reference
            ref = table.reference(same) if use_same else all_reference
            labels = [judge_run(table.records[p], ref) for p in members]
            for p, run_label in zip(members, labels):
                run_labels[p] = run_label
            rows.append(_summary(table, members, labels, ref, ref_positions))
    symptoms = pd.DataFrame(rows, columns=symptom_columns())
    return Judgement(pd.Series(run_labels, index=runs.index, dtype=object), symptoms)


def symptom_columns() -> list[str]:
    return [
        "loop",
        "device",
        "identity",
        "operator",
        "variant",
        "site",
        "category",
        "role",
        "n_seeds",
        "n_reference",
        "seeds",
        "reference_seeds",
        "measured",
        "measured_share",
        "symptoms",
        "unstable",
        "label_fractions",
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
    labels: list[list[str]],
    ref: Reference,
    ref_positions: list[int],
) -> dict[str, Any]:
    first = table.records[members[0]]
    judged = [run_labels for run_labels in labels if run_labels != ["invalid"]]
    fractions = label_fractions(judged)
    measured, share = measured_severity(judged)
    row: dict[str, Any] = {
        "loop": first["loop"],
        "device": first["device"],
        "identity": first["identity"],
        "operator": first["operator"],
        "variant": first.get("variant") or first["operator"],
        "site": first.get("site") or "",
        "category": first.get("category") or "",
        "role": first["role"],
        "n_seeds": len(judged),
        "n_reference": ref.n_runs,
        "seeds": json.dumps(sorted(int(table.records[p]["seed"]) for p in members)),
        "reference_seeds": json.dumps(list(ref.seeds)),
        "measured": measured if judged else "invalid",
        "measured_share": share,
        "symptoms": format_labels(fractions, len(judged), stable=True),
        "unstable": format_labels(fractions, len(judged), stable=False),
        "label_fractions": json.dumps(fractions, sort_keys=True),
    }
    effects = {}
    samples = {
        feature: (
            table.values(feature, members),
            table.values(feature, ref_positions, ok_only=True),
        )
        for feature in JUDGED_FEATURES
    }
    p_values = rank_tests(samples)
    for feature, (mutant_values, ref_values) in samples.items():
        d = cohens_d(mutant_values, ref_values, feature)
        row[f"d_{feature}"] = d
        row[f"p_{feature}"] = p_values[feature]
        row[f"cliff_{feature}"] = cliffs_delta(mutant_values, ref_values)
        if d is not None:
            effects[feature] = d
    for feature in SUMMARY_FEATURES:
        mutant_values = table.values(feature, members)
        ref_values = table.values(feature, ref_positions, ok_only=True)
        row[f"mutant_{feature}"] = float(np.median(mutant_values)) if mutant_values.size else None
        row[f"ref_{feature}"] = float(np.median(ref_values)) if ref_values.size else None
    row["top_effects"] = _top_effects(effects, row)
    return row


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


def measured_severity(labels_per_seed: list[list[str]]) -> tuple[str, float]:
    """The worst severity reached or exceeded in at least half the seeds, and that share."""
    if not labels_per_seed:
        return "silent", 0.0
    ranks = [
        min(SEVERITY_ORDER.index(severity_of(label)) for label in labels)
        for labels in labels_per_seed
    ]
    for level, severity in enumerate(SEVERITY_ORDER):
        share = sum(rank <= level for rank in ranks) / len(ranks)
        if share >= 0.5:
            return severity, share
    return "silent", 1.0


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


def noop_false_positives(
    symptoms: pd.DataFrame, run_labels: pd.Series, roles: pd.Series
) -> dict[str, Any]:
    """How often the unmutated control came out non-silent: per judged mutant and per run."""
    noop = symptoms[symptoms["role"] == NOOP]
    noop_runs = [labels for labels, role in zip(run_labels, roles) if role == NOOP]
    labelled_runs = [labels for labels in noop_runs if labels not in (["silent"], ["invalid"])]
    fired = Counter(label for labels in labelled_runs for label in labels)
    return {
        "noop_groups": len(noop),
        "noop_groups_not_silent": int((noop["measured"] != "silent").sum()),
        "group_fpr": _share((noop["measured"] != "silent").sum(), len(noop)),
        "noop_runs": len(noop_runs),
        "noop_runs_labelled": len(labelled_runs),
        "run_fpr": _share(len(labelled_runs), len(noop_runs)),
        "labels_fired": dict(fired.most_common()),
    }


# -- helpers -------------------------------------------------------------------------------


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


def _var(values: np.ndarray) -> float:
    return float(np.var(values, ddof=1)) if values.size >= 2 else 0.0


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and math.isfinite(float(value))


def _share(part: int, whole: int) -> float | None:
    return float(part) / whole if whole else None
