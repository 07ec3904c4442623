"""Interactions between bugs: the classification rule, the table, the classic five."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.quiz.cli import quiz_main
from experiments.quiz.draw import strip_comments
from experiments.quiz.interactions import (
    CLASSIC,
    CLASSIC_SCRIPT,
    COLUMNS,
    Pair,
    classic_sites,
    classify,
    interactions_frame,
    quiz_pairs,
    write_interactions,
)
from experiments.quiz.measure import Measurement
from mutations.registry import all_operators
from mutator import SourceFile


@pytest.mark.parametrize(
    "a, b, ab, labels, relation, hidden",
    [
        (0.0, 0.0, 0.02, ({"grad_in_eval"}, set(), {"grad_in_eval"}), "independent", ""),
        (0.0, 0.1, 0.4, (set(), {"oscillates"}, {"slow_convergence"}), "amplifies", ""),
        (0.4, 0.5, 0.3, ({"slow"}, {"slow"}, {"slow"}), "masks", "a"),
        # A crash hides the other bug's own symptom, even at the same impact.
        (1.0, 0.9, 1.0, ({"crash:X"}, {"no_learning"}, {"crash:X"}), "masks", "b"),
        (
            0.4,
            0.5,
            0.72,
            ({"slow_convergence"}, {"oscillates"}, {"oscillates", "slow_convergence"}),
            "adds",
            "",
        ),
        (0.4, 0.5, 0.72, ({"slow_convergence"}, {"oscillates"}, {"oscillates"}), "masks", "a"),
        (0.0, 0.6, 0.6, (set(), {"no_learning"}, {"no_learning"}), "independent", ""),
    ],
)
def test_classification_rule(a, b, ab, labels, relation, hidden) -> None:
    assert classify(a, b, ab, *labels) == (relation, hidden)


def _parse(path: Path) -> tuple[SourceFile, list]:
    parsed = SourceFile(strip_comments(path.read_text()), path.name)
    return parsed, parsed.find_sites(all_operators())


def test_classic_loop_holds_all_five_bugs_at_once() -> None:
    parsed, sites = _parse(CLASSIC_SCRIPT)
    five = classic_sites(sites)
    assert sorted(site.operator.name for site in five) == sorted(CLASSIC)
    mutant = parsed.apply(five)
    assert set(mutant.operators) == set(CLASSIC)
    assert "optimizer.zero_grad()" not in mutant.source
    assert "torch.no_grad()" not in mutant.source
    assert "MSELoss" in mutant.source and "model.train()" not in mutant.source


def test_quiz_pairs_are_distinct_co_occurring_bugs() -> None:
    parsed, sites = _parse(Path(__file__).resolve().parent.parent / "reference_loops/mlp_digits.py")
    pairs = quiz_pairs(parsed, sites, quizzes=2, bugs=3)
    keys = [(pair.first.identity, pair.second.identity) for pair in pairs]
    assert len(keys) == len(set(keys)) > 0
    assert all(pair.first.operator.name != pair.second.operator.name for pair in pairs)


def _runs(identity: str, metrics: list[float], status: str = "ok") -> list[dict]:
    return [
        {
            "identity": identity,
            "seed": seed,
            "status": status,
            "val_metric_final": value,
            "final_over_initial": 0.5,
        }
        for seed, value in enumerate(metrics)
    ]


def test_interactions_table_from_measured_runs(tmp_path: Path) -> None:
    parsed, sites = _parse(CLASSIC_SCRIPT)
    by_name = {site.operator.name: site for site in classic_sites(sites)}
    first, second = by_name["drop_zero_grad"], by_name["mse_for_classification"]
    singles = {site.identity: parsed.apply([site]) for site in (first, second)}
    both = parsed.apply(sorted([first, second], key=lambda s: s.line))
    mutants = {
        (first.identity,): singles[first.identity],
        (second.identity,): singles[second.identity],
        tuple(s.identity for s in sorted([first, second], key=lambda s: s.line)): both,
    }
    # Reference 0.9 over chance 0.1: a at 0.5 loses half, b nothing, the pair 0.1 (all).
    runs = pd.DataFrame(
        _runs("none", [0.9, 0.9])
        + _runs(first.identity, [0.5, 0.5])
        + _runs(second.identity, [0.9, 0.9])
        + _runs(both.identity, [0.1, 0.1])
    )
    symptoms = pd.DataFrame(
        {
            "identity": [first.identity, second.identity, both.identity],
            "measured": ["degrades", "silent", "breaks_training"],
            "label_fractions": ['{"oscillates": 1.0}', '{"silent": 1.0}', '{"no_learning": 1.0}'],
        }
    )
    measured = Measurement(runs, symptoms, {}, 10)
    frame = interactions_frame(
        "classic", [Pair("classic", first, second)], mutants, measured, [0, 1]
    )
    row = frame.iloc[0]
    assert (row["a"], row["b"]) == ("drop_zero_grad", "mse_for_classification")
    assert np.isclose(row["impact_a"], 0.5) and row["impact_b"] == 0 and row["impact_ab"] == 1
    assert row["relation"] == "amplifies"
    written = write_interactions(tmp_path, frame)
    assert [p.name for p in written] == ["interactions.csv", "interactions.md"]
    again = pd.read_csv(tmp_path / "catalog" / "interactions.csv")
    assert list(again.columns) == COLUMNS and again.loc[0, "relation"] == "amplifies"
    assert (
        "| classic | classic | drop_zero_grad |"
        in (tmp_path / "catalog/interactions.md").read_text()
    )


@pytest.mark.slow
def test_interactions_command_on_the_classic_five(tmp_path: Path) -> None:
    argv = [
        "interactions",
        "--results-dir",
        str(tmp_path),
        "--epochs",
        "2",
        "--seeds",
        "3",  # a label needs a spread of 3 reference seeds
        "--quizzes",
        "0",
        "--workers",
        "2",
    ]
    assert quiz_main(argv) == 0
    table = pd.read_csv(tmp_path / "catalog" / "interactions.csv")
    pairs = table[table["origin"] == "classic"]
    assert len(pairs) == 10  # every pair of the five
    assert set(pairs["relation"]) <= {"masks", "amplifies", "adds", "independent"}
    together = table[table["origin"] == "classic_all"].iloc[0]
    assert set(together["a"].split("+")) == set(CLASSIC)
    # Five bugs at once are measurably worse than the correct loop: grad_in_eval at least.
    assert "grad_in_eval" in together["labels_ab"]
