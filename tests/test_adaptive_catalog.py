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
