"""The noop control: how often the unmutated loop is judged non-silent (false positives).

Unmutated runs on seeds no mutant used are the control pool of a loop. A *seed-set* is as
many of them as a mutant has seeds, judged like a mutant: the measured severity over the
set. Judging costs no training, so up to ``SEED_SETS`` distinct sets are drawn from the
pool (a pool of 8 seeds gives 56 sets of 5). Sets drawn from one pool share runs, so their
interval is narrower than independent sets would give; the per-run rate over the pool's
independent runs is reported beside it, with its own interval.
"""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from typing import Any

import pandas as pd

from experiments.symptoms.reference import MIN_SPREAD_SEEDS, wilson_interval
from experiments.symptoms.roles import NOOP
from experiments.symptoms.seeds import severity_median
from experiments.symptoms.vocabulary import MARKERS, UNJUDGED

SEED_SETS = 20


def seed_sets(pool: list[int], size: int, count: int = SEED_SETS) -> list[tuple[int, ...]]:
    """Up to ``count`` distinct subsets of ``size`` positions of ``pool``, drawn with a
    fixed generator (the same catalog gives the same sets)."""
    size = max(1, min(size, len(pool)))
    combos = list(itertools.combinations(pool, size))
    if len(combos) <= count:
        return combos
    return random.Random(0).sample(combos, count)


def noop_false_positives(
    symptoms: pd.DataFrame,
    run_labels: pd.Series,
    run_severity: pd.Series,
    runs: pd.DataFrame,
) -> dict[str, Any]:
    """False-positive rates of the control, per seed-set and per run, with 95% intervals.

    A false positive is a verdict above ``silent`` on the unmutated loop, from the severity
    its runs' own labels set (its row reads ``silent`` by construction, so the row cannot
    be the measure). ``unjudged`` is no verdict, so not a false positive. A loop whose
    reference has fewer than ``MIN_SPREAD_SEEDS`` finished runs gives no rate at all: its
    labels were never judged (``too_few_seeds``).
    """
    is_noop = runs["role"] == NOOP
    set_results: list[bool] = []
    group_results: list[bool] = []
    per_loop: dict[str, dict[str, Any]] = {}
    too_few: list[str] = []
    counted_runs: list[int] = []
    for (loop, device), group in runs[is_noop].groupby(["loop", "device"], sort=True):
        here = (runs["loop"] == loop) & (runs["device"] == device)
        reference_ok = int((here & (runs["role"] == "reference") & (runs["status"] == "ok")).sum())
        if reference_ok < MIN_SPREAD_SEEDS:
            too_few.append(f"{loop} ({device})")
            continue
        mutant_seeds = runs.loc[here & (runs["role"] == "mutant"), ["identity", "seed"]]
        per_mutant = mutant_seeds.groupby("identity")["seed"].nunique()
        size = int(per_mutant.median()) if len(per_mutant) else len(group)
        pool = [p for p in group.index if run_labels[p] != ["invalid"]]
        counted_runs += pool
        results = [_verdict([run_severity[p] for p in chosen]) for chosen in seed_sets(pool, size)]
        set_results += results
        group_results.append(_verdict([run_severity[p] for p in pool]))
        per_loop[f"{loop} ({device})"] = {
            "pool": len(pool),
            "set_size": size,
            "sets": len(results),
            "sets_not_silent": sum(results),
        }
    labelled_runs = [run_labels[p] for p in counted_runs if not set(run_labels[p]) <= set(MARKERS)]
    fired = Counter(label for labels in labelled_runs for label in labels)
    n_runs = len(counted_runs)
    n_sets, n_fp = len(set_results), sum(set_results)
    noop = symptoms[symptoms["role"] == NOOP] if len(symptoms) else symptoms
    return {
        "noop_groups": len(group_results),
        "noop_groups_not_silent": sum(group_results),
        "group_fpr": _share(sum(group_results), len(group_results)),
        "noop_rows": len(noop),
        "too_few_seeds": too_few,
        "noop_sets": n_sets,
        "noop_sets_not_silent": n_fp,
        "set_fpr": _share(n_fp, n_sets),
        "set_fpr_ci": wilson_interval(n_fp, n_sets),
        "noop_runs": n_runs,
        "noop_runs_labelled": len(labelled_runs),
        "run_fpr": _share(len(labelled_runs), n_runs),
        "run_fpr_ci": wilson_interval(len(labelled_runs), n_runs),
        "per_loop": per_loop,
        "labels_fired": dict(fired.most_common()),
    }


def _verdict(severities: list[str]) -> bool:
    """Would these runs, judged as one mutant, read as a verdict above ``silent``?"""
    return severity_median(severities)[0] not in ("silent", UNJUDGED)


def control_warnings(symptoms: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(loop, device) -> the warning that starts its section, where its noop control showed
    labels: those labels are not evidence on that loop."""
    if symptoms.empty or "role" not in symptoms:
        return {}
    warnings = {}
    for row in symptoms[symptoms["role"] == NOOP].to_dict("records"):
        fractions = json.loads(row.get("label_fractions") or "{}")
        n = int(row.get("n_seeds") or 0)
        shown = [
            f"{label} {round(share * n)}/{n}"
            for label, share in fractions.items()
            if label not in MARKERS
        ]
        if shown:
            warnings[(row["loop"], row["device"])] = (
                f"Warning: the noop control (the unmutated loop on spare seeds) is not silent "
                f"here: {', '.join(shown)}. These labels are not evidence of a bug on this "
                "loop; mutants' rows mark them 'also in control' and they set no severity."
            )
    return warnings


def _share(part: int, whole: int) -> float | None:
    return float(part) / whole if whole else None
