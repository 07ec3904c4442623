"""``trainwreck catalog`` and ``trainwreck report`` end to end on a small real sweep."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from experiments.catalog import CATALOG_FILES
from experiments.cli import main

pytestmark = pytest.mark.slow


def test_catalog_runs_caches_and_rebuilds(tmp_path, capsys, monkeypatch):
    # A relative results folder, as the README's command uses (children change directory).
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    argv = [
        "catalog",
        "--loops",
        "mlp_digits",
        "--seeds",
        "3",  # a label needs a spread of 3 reference seeds
        "--operators",
        "drop_optimizer_step,scale_lr",
        "budget.epochs=3",
        "results_dir=results",
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "runs (0 cached)" in err and "catalog:" in err
    assert "agrees with the declared one for" in err and "mutants mislead" in err
    catalog = results / "catalog"
    for name in (*CATALOG_FILES, "sweep.json"):
        assert (catalog / name).is_file(), name
    runs = pd.read_parquet(catalog / "runs.parquet")
    # 3 seeds x (reference + drop_optimizer_step + scale_lr) + 3 noop seeds
    assert len(runs) == 12
    assert set(runs["status"]) == {"ok"}, runs[["identity", "status", "exc_message"]]
    assert set(runs["role"]) >= {"reference", "mutant", "noop"}
    symptoms = pd.read_csv(catalog / "symptoms.csv")
    step = symptoms[symptoms["operator"] == "drop_optimizer_step"].iloc[0]
    assert "no_learning" in step["symptoms"]
    assert json.loads((catalog / "sweep.json").read_text())["keys"]

    # unchanged sweep: nothing trains again
    assert main(argv) == 0
    assert "runs (12 cached)" in capsys.readouterr().err

    # the report rebuilds from stored runs alone, keeping measured interactions
    from experiments.quiz.interactions import COLUMNS, write_interactions

    row = dict.fromkeys(COLUMNS, "")
    row.update(
        loop="mlp_digits",
        origin="quiz",
        a="drop_zero_grad",
        b="scale_lr",
        relation="masks",
        impact_a=0.4,
        impact_b=0.9,
        impact_ab=0.5,
        expected_ab=0.94,
        labels_ab="no_learning",
        seeds=2,
    )
    write_interactions(results, pd.DataFrame([row], columns=COLUMNS))
    (results / "bench").mkdir()
    (results / "bench" / "section.html").write_text('<section id="detector-benchmark"></section>')
    (catalog / "report.html").unlink()
    assert main(["report", str(results)]) == 0
    page = (catalog / "report.html").read_text()
    assert 'id="interactions"' in page and "drop_zero_grad" in page
    assert 'id="detector-benchmark"' in page
    assert "## Interactions between bugs" in (catalog / "study.md").read_text()
    assert (catalog / "interactions.csv").is_file()


def test_catalog_user_errors_are_one_line(tmp_path, capsys):
    assert main(["catalog", "--loops", "nope", f"results_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "valid: " in err and "mlp_digits" in err and err.count("\n") == 1
    assert main(["catalog", "--operators", "drop_zero_gard", f"results_dir={tmp_path}"]) == 2
    assert "did you mean drop_zero_grad" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert not any(tmp_path.iterdir()), "nothing written on bad input"


def test_summary_prints_agreement_misleads_and_the_noop_rate_with_its_interval(capsys):
    from types import SimpleNamespace

    from experiments.catalog.report_cmd import print_summary

    control = {"noop_sets": 20, "noop_sets_not_silent": 1, "set_fpr": 0.05}
    control["set_fpr_ci"] = (0.009, 0.236)
    summary = SimpleNamespace(
        control=control, agreement=(60, 80), misleads=7, n_mutants=80, n_loops=2, out_dir="x"
    )
    print_summary(summary)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "1 of 20 seed-sets not silent (false-positive rate 5%, 95% CI 1%-24%)" in text
    assert "agrees with the declared one for 60 of 80 mutants (75%); 7 mutants mislead" in text


def test_quick_profile_runs_half_budgets_and_an_override_wins(tmp_path):
    """The quick profile trains mlp_digits 10 epochs and binary_cancer 15 (half their own
    budgets: its runs fit a minute on 2 cores; docs/benchmarks.md #16 lists the verdicts
    this moves); a user's epochs override still wins."""
    from experiments.catalog.job import catalog_parser
    from experiments.catalog.plan import plan
    from experiments.catalog.profiles import PROFILES

    quick = PROFILES["quick"]

    def epochs_of(*overrides: str) -> dict[str, set[int]]:
        args = catalog_parser().parse_args(["--operators", "scale_lr", *overrides])
        specs, *_ = plan(quick.loops, quick.seeds, quick.noop_seeds, args, dict(quick.epochs))
        found: dict[str, set[int]] = {}
        for spec in specs:
            argv = list(spec.argv)
            found.setdefault(spec.loop_name, set()).add(int(argv[argv.index("--epochs") + 1]))
        return found

    assert epochs_of(f"results_dir={tmp_path}") == {"mlp_digits": {10}, "binary_cancer": {15}}
    assert epochs_of(f"results_dir={tmp_path}", "budget.epochs=4") == {
        "mlp_digits": {4},
        "binary_cancer": {4},
    }


def test_strength_loops_default_to_the_profile_and_a_bad_one_is_one_line(tmp_path, capsys):
    from experiments.catalog.profiles import PROFILES, Profile, strength_loops

    every = Profile(loops=("a", "b", "c"), seeds=(0,), noop_seeds=(100,), description="")
    assert strength_loops(every, ("a", "b"), None) == ("a", "b")
    some = Profile(
        loops=("a", "b", "c"),
        seeds=(0,),
        noop_seeds=(100,),
        description="",
        strength_loops=("b", "c"),
    )
    assert strength_loops(some, ("a", "b"), None) == ("b",)
    assert strength_loops(some, ("a", "b"), "all") == ("a", "b")
    assert strength_loops(some, ("a", "b"), "a") == ("a",)
    full = PROFILES["full"]
    assert set(full.strength_loops) <= set(full.loops)
    argv = ["catalog", "--loops", "mlp_digits", "--strength-loops", "char_lm"]
    assert main([*argv, f"results_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "'char_lm' is not a loop of this catalog" in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir()), "nothing written on bad input"
