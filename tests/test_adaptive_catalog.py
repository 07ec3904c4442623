"""``trainwreck catalog --adaptive`` end to end: seeds per mutant, why they stopped, and a
rerun that replays every round from the cache."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.cli import main

pytestmark = pytest.mark.slow


def test_adaptive_catalog_stops_clear_mutants_and_reruns_nothing(tmp_path, capsys):
    results = tmp_path / "results"
    argv = [
        "catalog",
        "--loops",
        "mlp_digits",
        "--adaptive",
        "--seeds",
        "7",
        "--operators",
        "drop_optimizer_step",
        "--workers",
        "1",
        "budget.epochs=2",
        f"results_dir={results}",
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "adaptive: 1 mutants in 1 rounds, seeds per mutant 3-3" in err
    symptoms = pd.read_csv(results / "catalog" / "symptoms.csv")
    mutant = symptoms[symptoms["role"] == "mutant"].iloc[0]
    assert mutant["n_seeds"] == 3 and mutant["stopped"] == "decided at 3 seeds"
    runs = pd.read_parquet(results / "catalog" / "runs.parquet")
    assert sorted(runs.loc[runs["role"] == "reference", "seed"]) == [0, 1, 2]
    assert "| stopped |" in (results / "catalog" / "symptoms.md").read_text()

    # A stored strength search shows up as a section of the rebuilt catalog.
    (results / "strength").mkdir()
    pd.DataFrame(
        [
            {
                "loop": "mlp_digits",
                "operator": "scale_lr",
                "direction": "up",
                "factor": value,
                "spec": f"scale_lr(factor={value})",
                "seeds": 3,
                "shows_outcome": value > 10,
                "shows_symptom": value > 3,
                "outcome_threshold": value == 31.6,
                "symptom_threshold": value == 10.0,
            }
            for value in (3.0, 10.0, 31.6, 100.0)
        ]
    ).to_csv(results / "strength" / "mlp_digits-scale_lr-up.csv", index=False)

    assert main(argv) == 0  # the rerun replays the round from the cache
    err = capsys.readouterr().err
    assert "runs (9 cached)" in err
    for name in ("symptoms.md", "study.md", "report.html"):
        assert "Minimal strength" in (results / "catalog" / name).read_text(), name
    assert "factor=31.6 (not at 10)" in (results / "catalog" / "symptoms.md").read_text()


def _catalog(results, *extra):
    return [
        "catalog",
        "--loops",
        "binary_cancer",
        "--adaptive",
        "--seeds",
        "5",
        "--operators",
        "drop_optimizer_step,drop_train_mode,shift_labels,change_batch_size,reduction_sum",
        "--workers",
        "2",
        *extra,
        "budget.epochs=5",
        f"results_dir={results}",
    ]


def _verdicts(results) -> dict[str, tuple]:
    symptoms = pd.read_csv(results / "catalog" / "symptoms.csv")
    return {
        row["identity"]: (row["n_seeds"], row["stopped"], row["measured"], row["symptoms"])
        for row in symptoms.to_dict("records")
    }


def test_adaptive_shards_reach_the_unsharded_verdicts(tmp_path, capsys):
    """Two shards split the mutants, each runs its own adaptively; the unsharded command
    then trains nothing and writes the verdicts one unsharded catalog reaches."""
    from experiments.adaptive import shard_mutants

    sharded, whole = tmp_path / "sharded", tmp_path / "whole"
    for index in (0, 1):
        assert main(_catalog(sharded, "--shard", f"{index}/2")) == 0
        err = capsys.readouterr().err
        assert f"shard {index}/2:" in err and "without --shard writes the catalog" in err
        assert not (sharded / "catalog").exists(), "a shard writes no partial catalog"
    assert main(_catalog(sharded)) == 0
    err = capsys.readouterr().err
    ran = int(err.split(" runs (")[0].rsplit("] ", 1)[1])
    assert f"{ran} runs ({ran} cached)" in err, "every run of the union came from the cache"
    assert main(_catalog(whole)) == 0
    capsys.readouterr()
    assert _verdicts(sharded) == _verdicts(whole)

    # Both shards held mutants (the split is by identity, every reference in both).
    from experiments.catalog.job import catalog_parser
    from experiments.catalog.plan import plan

    args = catalog_parser().parse_args(_catalog(tmp_path / "plan")[1:])
    specs, *_ = plan(("binary_cancer",), tuple(range(5)), (100, 101, 102), args, {})
    shards = [shard_mutants(specs, index, 2) for index in (0, 1)]
    mutants = [{s.identity for s in shard if s.mutant is not None} for shard in shards]
    assert all(mutants) and not mutants[0] & mutants[1]
    assert len(mutants[0] | mutants[1]) == len({s.identity for s in specs if s.mutant})


def test_bad_shard_is_one_line(tmp_path, capsys):
    for bad in ("2/2", "1", "a/b", "1/0"):
        assert main(_catalog(tmp_path / "r", "--shard", bad)) == 2
        err = capsys.readouterr().err
        assert "bad --shard" in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir()), "nothing written on bad input"
