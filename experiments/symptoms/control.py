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
import random
from collections import Counter
from typing import Any

import pandas as pd

from experiments.symptoms.reference import wilson_interval
from experiments.symptoms.roles import NOOP
from experiments.symptoms.seeds import severity_median

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
    """False-positive rates of the control, per seed-set and per run, with 95% intervals."""
    noop = symptoms[symptoms["role"] == NOOP] if len(symptoms) else symptoms
    is_noop = runs["role"] == NOOP
    labelled_runs = [
        labels for labels in run_labels[is_noop] if labels not in (["silent"], ["invalid"])
    ]
    fired = Counter(label for labels in labelled_runs for label in labels)
    set_results: list[bool] = []
    per_loop: dict[str, dict[str, Any]] = {}
    for (loop, device), group in runs[is_noop].groupby(["loop", "device"], sort=True):
        mutant_seeds = runs.loc[
            (runs["loop"] == loop) & (runs["device"] == device) & (runs["role"] == "mutant"),
            ["identity", "seed"],
        ]
        per_mutant = mutant_seeds.groupby("identity")["seed"].nunique()
        size = int(per_mutant.median()) if len(per_mutant) else len(group)
        pool = [p for p in group.index if run_labels[p] != ["invalid"]]
        results = [
            severity_median([run_severity[p] for p in chosen])[0] != "silent"
            for chosen in seed_sets(pool, size)
        ]
        set_results += results
        per_loop[f"{loop} ({device})"] = {
            "pool": len(pool),
            "set_size": size,
            "sets": len(results),
            "sets_not_silent": sum(results),
        }
    n_runs = int(is_noop.sum())
    n_sets, n_fp = len(set_results), sum(set_results)
    return {
        "noop_groups": len(noop),
        "noop_groups_not_silent": int((noop["measured"] != "silent").sum()) if len(noop) else 0,
        "group_fpr": _share(int((noop["measured"] != "silent").sum()), len(noop))
        if len(noop)
        else None,
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


def _share(part: int, whole: int) -> float | None:
    return float(part) / whole if whole else None
