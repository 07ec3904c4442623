"""A reported number computed through the mutated code cannot vouch for the mutant (#23):
where the only measure is a number the script reports and the mutant's changed lines ran
while the script evaluated (``reach_eval_hits``), ``silent`` is not a verdict; a worse
number, a broken curve and a status still are. With a held-out evaluation nothing moves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fixtures_runs import LOOP, REFERENCE_SEEDS, RunSpec, write_run, write_study

from experiments.catalog import build_tables, load_runs
from experiments.catalog.notes import verdict_notes
from experiments.symptoms import UNJUDGED, Reference, RunVerdict, verdict

# Mutants of a script that reports its val loss: lines that run in training only, lines that
# also run in its evaluation (the copy mutant: targets equal to the inputs), and a worse one.
TRAINING_ONLY = ("healthy", "t.py::train::scale_lr(factor=1.01)#0", ("scale_lr",), 0)
IN_EVALUATION = ("healthy", "t.py::get_batch::unshifted_lm_targets#0", ("unshifted_lm_targets",), 6)
WORSE_IN_EVALUATION = ("slow", "t.py::get_batch::drop_normalization#0", ("drop_normalization",), 6)
FLAT_IN_EVALUATION = ("flat", "t.py::main::drop_optimizer_step#0", ("drop_optimizer_step",), 2)


@pytest.mark.parametrize(
    ("labels", "quality", "finished", "severity"),
    [
        (["silent"], "val_loss", True, UNJUDGED),  # "as good", said by the mutated code
        (["unjudged"], "val_metric", True, UNJUDGED),
        (["slower"], "val_loss", True, UNJUDGED),  # cost_only says the model is fine
        (["val_loss_lies_high"], "val_metric", True, UNJUDGED),  # so does misleads
        (["too_good"], "val_loss", True, UNJUDGED),
        (["worse_model"], "val_loss", True, "degrades"),  # a worse number is an effect
        (["model_at_chance"], "val_metric", True, "breaks_training"),
        (["no_learning"], "val_loss", True, "breaks_training"),
        (["crash:ValueError"], None, False, "crash"),
    ],
)
def test_a_number_computed_through_the_mutant_sets_no_silent(labels, quality, finished, severity):
    found = RunVerdict(labels, quality, finished, through_mutant=True)
    assert found.severity == severity
    # Without the flag the same labels give their own level: the rule is what changed it.
    if severity == UNJUDGED and labels[0] not in ("unjudged", "too_good"):
        assert RunVerdict(labels, quality, finished).severity != UNJUDGED


def _reference(**features: list[float]) -> Reference:
    return Reference({k: np.array(v) for k, v in features.items()}, 0.0, 5, (0, 1, 2, 3, 4))


REF = _reference(
    val_loss_final=[2.20, 2.22, 2.25, 2.21, 2.23],
    initial_loss=[3.30, 3.31, 3.29, 3.30, 3.32],
    holdout_metric=[0.61, 0.62, 0.60, 0.61, 0.62],
    holdout_loss=[2.2, 2.2, 2.2, 2.2, 2.2],
)
# The nanoGPT-style trainer at 60 iterations: the copy mutant's val loss, 14% lower, sits
# within the spread floor (z = -2.8), so nothing but this rule keeps it from `silent`.
COPIES = {"status": "ok", "val_loss_final": 2.16, "initial_loss": 3.3, "reach_eval_hits": 4}


def test_a_run_whose_changed_lines_ran_while_evaluating_is_unjudged():
    found = verdict(COPIES, REF)
    assert found.quality == "val_loss" and found.through_mutant
    assert found.labels == [UNJUDGED] and found.severity == UNJUDGED
    for hits in (0, None, float("nan")):  # ran in training only, or not known
        honest = verdict({**COPIES, "reach_eval_hits": hits}, REF)
        assert not honest.through_mutant and honest.severity == "silent"
    # A worse reported number is still an effect the mutant had.
    assert verdict({**COPIES, "val_loss_final": 3.0}, REF).severity == "degrades"


def test_a_held_out_evaluation_is_measured_where_the_mutant_cannot_reach():
    measured = {**COPIES, "holdout_metric": 0.61, "holdout_loss": 2.2}
    found = verdict(measured, REF)
    assert found.quality == "holdout" and not found.through_mutant
    assert found.severity == "silent"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A script that prints its val loss (no held-out evaluation), with the mutants above."""
    root = tmp_path_factory.mktemp("self_measure")
    write_study(root, mutants=[], reported=("val_loss",), source="stdout")
    for behaviour, identity, operators, eval_hits in (
        TRAINING_ONLY,
        IN_EVALUATION,
        WORSE_IN_EVALUATION,
        FLAT_IN_EVALUATION,
    ):
        for seed in REFERENCE_SEEDS:
            spec = RunSpec(
                behaviour,
                seed,
                identity=identity,
                operators=operators,
                categories=("data",),
                reported=("val_loss",),
                source="stdout",
                extra_result={"reached": True, "reach_hits": 40, "reach_eval_hits": eval_hits},
            )
            write_run(root, spec)
    tables = build_tables(load_runs(root))
    return {row["identity"]: row for row in tables.symptoms.to_dict("records")}, tables


def test_the_catalog_says_why_and_keeps_the_verdicts_a_worse_number_gives(study):
    found, tables = study
    assert found[TRAINING_ONLY[1]]["measured"] == "silent"  # an honest measure of it
    copies = found[IN_EVALUATION[1]]
    assert copies["measured"] == UNJUDGED
    assert copies["unjudged_reason"] == (
        "the reported number is computed through the mutated code (changed lines ran during "
        "evaluation); a held-out evaluation would measure it: loop.holdout=module:function"
    )
    assert copies["outcome"] == "as reference by a number the mutated code computed"
    assert copies["outcome_source"].startswith("the script's own val loss (stdout")
    assert copies["agrees"] is None  # unjudged: left out of the agreement
    assert found[WORSE_IN_EVALUATION[1]]["measured"] == "degrades"
    assert found[FLAT_IN_EVALUATION[1]]["measured"] == "breaks_training"
    runs = tables.runs.set_index(["identity", "seed"])
    assert runs.loc[(IN_EVALUATION[1], 0), "reach_eval_hits"] == 6
    assert runs.loc[(IN_EVALUATION[1], 0), "labels"] == UNJUDGED
    notes = verdict_notes(tables.symptoms)
    assert any(
        note.startswith(f"{LOOP} (cpu): 1 mutants unjudged, the script's own number is computed")
        and "loop.holdout=module:function" in note
        for note in notes
    ), notes


# -- end to end: the nanoGPT-style trainer, which prints its val loss ---------------------------


TESTS = Path(__file__).parent
# (the script's files, its arguments, a mutant whose changed lines run in training only)
GPT_STYLES = {
    # At 60 iterations the copy mutant's printed val loss is 14% below the reference's,
    # z = -2.8 within the spread floor: it read `silent` before this rule.
    "nanogpt": (
        [TESTS / "styles" / "nanogpt_trainer.py"],
        ['loop.argv="--max_iters=60 --eval_iters=2"', "loop.flag_style=equals"],
        "drop_grad_clipping",
    ),
    # A trainer class that prints "loss after N iterations: train_loss X; eval_loss Y".
    "names_gpt": (
        sorted((TESTS / "projects" / "names_gpt").glob("*.py")),
        [],
        "adam_eps_too_small",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("style", sorted(GPT_STYLES))
def test_a_gpt_trainer_whose_mutant_copies_its_inputs_is_not_silent(
    tmp_path, monkeypatch, capsys, style
):
    import runpy
    import shutil
    import tempfile

    import pandas as pd
    from test_own_script import _catalog

    files, args, training_only = GPT_STYLES[style]
    folder = tmp_path / style
    folder.mkdir()
    for path in files:
        shutil.copy(path, folder / ("train.py" if path.parent.name == "styles" else path.name))
    monkeypatch.chdir(folder)
    if (folder / "make_data.py").exists():
        runpy.run_path(str(folder / "make_data.py"), run_name="__main__")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    results = tmp_path / "results"
    code, err = _catalog(
        capsys,
        results,
        *args,
        "loop.seed_arg=--seed",
        operators=f"unshifted_lm_targets,{training_only}",
        seeds=3,
    )
    assert code == 0, err
    assert "outcome measured by the script's own val loss (stdout" in err
    assert "computed through the mutated code" in err
    symptoms = pd.read_csv(results / "catalog" / "symptoms.csv").set_index("variant")
    copies, honest = symptoms.loc["unshifted_lm_targets"], symptoms.loc[training_only]
    assert copies["measured"] == UNJUDGED, copies.to_dict()
    assert "computed through the mutated code" in copies["unjudged_reason"]
    assert copies["mutant_val_loss_final"] < copies["ref_val_loss_final"]  # it looks better
    # Its changed lines run in training only: an honest measure, its verdict as before.
    assert honest["measured"] == "silent", honest.to_dict()
    runs = pd.read_csv(results / "catalog" / "runs.csv")
    hits = runs.groupby("operator")["reach_eval_hits"].agg(["min", "max"])
    assert hits.loc["unshifted_lm_targets", "min"] > 0
    assert hits.loc[training_only, "max"] == 0
