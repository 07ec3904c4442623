"""No verdict without a measure (#23): ``unjudged`` rows, too few seeds, labels the control
also shows, the outcome's source, on synthetic studies whose truth is known by construction
(``fixtures_runs``), and end to end on a small script that reports nothing."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fixtures_runs import LOOP, RunSpec, write_run, write_study

from experiments.catalog import build_tables, load_runs
from experiments.catalog.notes import verdict_notes
from experiments.report import render_report_html, render_study_md, render_symptoms_md
from experiments.symptoms import (
    SEVERITY_ORDER,
    UNJUDGED,
    Reference,
    RunVerdict,
    control_warnings,
    severity_median,
    verdict,
)
from mutator.operator import SEVERITIES

FLAT = ("flat", "t.py::train::drop_optimizer_step#0", ("drop_optimizer_step",))
DIVERGE = ("diverge", "t.py::main::scale_lr(factor=100.0)#0", ("scale_lr",))
CRASH = ("crash_start", "t.py::Net.forward::swap_view#0", ("swap_view",))
NAN = ("nan", "t.py::train::drop_grad_clip#0", ("drop_grad_clip",))
SLOW = ("slow", "t.py::main::scale_lr(factor=0.1)#0", ("scale_lr",))
EVAL_MODE = ("eval_mode", "t.py::train::drop_train_mode#0", ("drop_train_mode",))
LEAK_MEMORY = ("leak_memory", "t.py::train::keep_loss_graph#0", ("keep_loss_graph",))
LEAK_LABELS = ("leak_labels", "t.py::data::leak_labels#0", ("leak_labels",))
SLOW_STEPS = ("slow_steps", "t.py::train::slow_step#0", ("slow_step",))


def tables_of(root, **study):
    write_study(root, **study)
    return build_tables(load_runs(root))


def rows(tables) -> dict[str, dict]:
    return {row["identity"]: row for row in tables.symptoms.to_dict("records")}


# -- the vocabulary and one run's severity ----------------------------------------------------


def test_unjudged_sits_between_degrades_and_misleads_and_no_operator_declares_it():
    assert SEVERITY_ORDER.index("degrades") + 1 == SEVERITY_ORDER.index(UNJUDGED)
    assert SEVERITY_ORDER.index(UNJUDGED) + 1 == SEVERITY_ORDER.index("misleads")
    assert UNJUDGED not in SEVERITIES  # a measurement's level, never a bug's
    # Half the seeds degrade, half were not measured: no verdict of degrades.
    assert severity_median(["degrades", UNJUDGED, UNJUDGED])[0] == UNJUDGED
    assert severity_median(["breaks_training", "breaks_training", UNJUDGED])[0] == (
        "breaks_training"
    )


@pytest.mark.parametrize(
    ("labels", "quality", "finished", "control", "severity"),
    [
        # No measure: the curve proves a broken training, nothing less.
        (["no_learning"], None, True, (), "breaks_training"),
        (["diverges"], None, True, (), "breaks_training"),
        (["slow_convergence"], None, True, (), UNJUDGED),
        (["unjudged"], None, True, (), UNJUDGED),
        (["slower"], None, True, (), UNJUDGED),  # extra cost, but the model is unknown
        # A measure: symptoms say how you would notice, the outcome sets the level.
        (["slow_convergence"], "holdout", True, (), "silent"),
        (["slower"], "holdout", True, (), "cost_only"),
        # A reported number better than the reference can reach, with nothing to check it.
        (["too_good"], "val_metric", True, (), UNJUDGED),
        (["too_good"], "val_loss", True, (), UNJUDGED),
        (["too_good"], "holdout", True, (), "silent"),
        # Unfinished runs: their status is their outcome.
        (["crash:ValueError"], None, False, (), "crash"),
        (["nan", "diverges@partial"], None, False, (), "breaks_training"),
        # Too few reference seeds: only a status speaks.
        (["too_few_seeds"], None, True, (), UNJUDGED),
        # What the control also shows sets nothing; where it alone would have: unjudged.
        (["worse_model"], "holdout", True, ("worse_model",), UNJUDGED),
        (["worse_model", "model_at_chance"], "holdout", True, ("worse_model",), "breaks_training"),
        (["init_loss_off"], "holdout", True, ("init_loss_off",), "silent"),
    ],
)
def test_a_runs_severity_counts_only_what_was_measured(
    labels, quality, finished, control, severity
):
    assert RunVerdict(labels, quality, finished, frozenset(control)).severity == severity


# -- no measure --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unmeasured(tmp_path_factory):
    """A script that reports no validation number and names no held-out evaluation."""
    mutants = [FLAT, DIVERGE, CRASH, NAN, SLOW, EVAL_MODE, LEAK_MEMORY]
    return tables_of(tmp_path_factory.mktemp("unmeasured"), mutants=mutants, reported=())


def test_without_a_measure_the_curve_settles_breaks_training_and_nothing_less(unmeasured):
    found = rows(unmeasured)
    measured = {identity: row["measured"] for identity, row in found.items()}
    assert measured[FLAT[1]] == "breaks_training"
    assert measured[DIVERGE[1]] == "breaks_training"
    assert measured[CRASH[1]] == "crash"
    assert measured[NAN[1]] == "breaks_training"
    for _, identity, _ in (SLOW, EVAL_MODE, LEAK_MEMORY):
        assert measured[identity] == UNJUDGED, identity
    assert "silent" not in {measured[i] for i, row in found.items() if row["role"] == "mutant"}
    # They keep their curve symptoms (how you would notice) and say why there is no verdict.
    assert "slow_convergence 5/5" in found[SLOW[1]]["symptoms"]
    assert "eval_mode_training 5/5" in found[EVAL_MODE[1]]["symptoms"]
    assert "memory_growth 5/5" in found[LEAK_MEMORY[1]]["outcome"]
    reason = found[SLOW[1]]["unjudged_reason"]
    assert reason.startswith("no quality measure")
    assert "loop.holdout=module:function" in reason and "loop.metrics" in reason
    assert found[SLOW[1]]["outcome"] == "not measured"
    assert found[FLAT[1]]["outcome"] != "as reference"  # nothing measured the model there
    assert found[SLOW[1]]["outcome_source"].startswith("nothing")


def test_unjudged_rows_are_left_out_of_the_agreement_and_counted_with_the_way_to_measure(
    unmeasured,
):
    symptoms = unmeasured.symptoms
    unjudged = symptoms[symptoms["measured"] == UNJUDGED]
    assert len(unjudged) == 3
    assert unjudged["agrees"].isna().all()
    assert (unjudged["why"] == unjudged["unjudged_reason"]).all()
    notes = verdict_notes(symptoms)
    assert f"{LOOP} (cpu): outcome measured by nothing" in notes[0]
    counted = [note for note in notes if "3 mutants unjudged, no quality measure" in note]
    assert len(counted) == 1 and "loop.metrics" in counted[0] and "loop.holdout" in counted[0]
    # The textbook section lists claims the numbers contradicted; an unjudged row tested none.
    # Here every judged row agrees, so there is no such section at all.
    assert "Where the textbook claim does not hold" not in render_study_md(unmeasured)


def test_each_run_row_names_where_its_outcome_came_from(unmeasured, tmp_path):
    assert set(unmeasured.runs["outcome_source"]) == {"none"}
    captured = tables_of(tmp_path, mutants=[SLOW], source="tensorboard")
    assert set(captured.runs["outcome_source"]) == {"tensorboard"}
    row = rows(captured)[SLOW[1]]
    assert row["outcome_source"] == (
        "the script's own val metric (tensorboard; the mutant could change it)"
    )


# -- a reported val loss is a measure ----------------------------------------------------------


def test_a_reported_val_loss_alone_measures_the_model(tmp_path):
    tables = tables_of(tmp_path, mutants=[FLAT, SLOW, LEAK_LABELS], reported=("val_loss",))
    found = rows(tables)
    assert found[SLOW[1]]["measured"] == "degrades"
    assert "worse_model 5/5" in found[SLOW[1]]["outcome"]
    assert found[FLAT[1]]["measured"] == "breaks_training"
    assert "model_at_chance 5/5" in found[FLAT[1]]["outcome"]
    # A val loss far below anything the reference reaches, and nothing checks it (a model
    # that copies its inputs): not silent.
    assert found[LEAK_LABELS[1]]["measured"] == UNJUDGED
    assert "better than the reference can reach" in found[LEAK_LABELS[1]]["unjudged_reason"]
    assert found[SLOW[1]]["outcome_source"].startswith("the script's own val loss (report")


def test_a_reported_number_that_beats_the_reference_is_not_trusted():
    """Targets equal to the inputs: the model learns to copy, and the val loss the script
    computes through the same broken batches falls below the correct loop's (measured on
    the nanoGPT-style trainer at 240 iterations: 1.42 against 1.76)."""
    ref = Reference(
        {
            "val_loss_final": np.array([1.75, 1.76, 1.74, 1.77, 1.76]),
            "initial_loss": np.array([1.66, 1.67, 1.66, 1.65, 1.67]),
        },
        0.0,
        5,
        (0, 1, 2, 3, 4),
    )
    copies = {"status": "ok", "val_loss_final": 1.42, "initial_loss": 1.47}
    found = verdict(copies, ref)
    assert found.quality == "val_loss" and "too_good" in found.labels
    assert found.severity == UNJUDGED
    # Within the reference's spread: as good, as far as the script's number can tell.
    assert verdict({**copies, "val_loss_final": 1.70}, ref).severity == "silent"
    # Worse: a verdict the number can give.
    assert verdict({**copies, "val_loss_final": 2.2}, ref).severity == "degrades"
    # Lower, but on another loss scale (another loss function): not a better model.
    other_scale = {**copies, "initial_loss": 0.4}
    assert "too_good" not in verdict(other_scale, ref).labels


def test_a_loss_function_mutant_is_not_measured_by_its_own_loss(tmp_path):
    write_study(tmp_path, mutants=[], reported=("val_loss",))
    for seed in (0, 1, 2, 3, 4):
        spec = RunSpec(
            "slow",
            seed,
            identity="t.py::train::swap_loss#0",
            operators=("swap_loss",),
            categories=("loss",),
            reported=("val_loss",),
        )
        write_run(tmp_path, spec)
    row = rows(build_tables(load_runs(tmp_path)))["t.py::train::swap_loss#0"]
    assert row["measured"] == UNJUDGED
    assert row["unjudged_reason"].startswith("no quality measure")


# -- too few seeds -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    return tables_of(
        tmp_path_factory.mktemp("two_seeds"),
        mutants=[FLAT, CRASH, NAN, SLOW],
        seeds=(0, 1),
        noop_seeds=(100, 101),
    )


def test_with_two_seeds_rows_say_too_few_seeds_and_only_status_speaks(two_seeds):
    found = rows(two_seeds)
    assert found[CRASH[1]]["measured"] == "crash"
    assert found[NAN[1]]["measured"] == "breaks_training"
    for identity in (FLAT[1], SLOW[1], "noop"):
        assert found[identity]["measured"] == UNJUDGED, identity
        assert found[identity]["outcome"] == "too few seeds"
        assert found[identity]["symptoms"] == ""
        assert found[identity]["unjudged_reason"].startswith("too few seeds: 2 finished")
    labels = dict(zip(two_seeds.runs["identity"], two_seeds.runs["labels"]))
    assert labels[SLOW[1]] == "too_few_seeds"


def test_no_false_positive_rate_from_fewer_than_three_seeds(two_seeds):
    """The regression of #23: a 2-seed control labelled degrades and a 100% rate printed."""
    control = two_seeds.control
    assert control["set_fpr"] is None and control["group_fpr"] is None
    assert control["too_few_seeds"] == [f"{LOOP} (cpu)"]
    page = render_symptoms_md(two_seeds)
    assert "no false-positive rate" in page and "fewer than 3 reference seeds" in page
    assert "100.0%" not in page


# -- the control -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def noisy_control(tmp_path_factory):
    """The unmutated loop on spare seeds shows ``slower`` (a loaded machine, say)."""
    return tables_of(
        tmp_path_factory.mktemp("noisy_control"),
        mutants=[FLAT, SLOW_STEPS],
        control="slow_steps",
    )


def test_a_label_the_control_shows_is_not_evidence(noisy_control):
    found = rows(noisy_control)
    row = found[SLOW_STEPS[1]]
    assert "slower 5/5 (also in control)" in row["outcome"]
    assert row["measured"] == UNJUDGED
    assert "also shows on the unmutated control" in row["unjudged_reason"]
    assert found[FLAT[1]]["measured"] == "breaks_training"  # its own evidence stands


def test_the_control_row_is_never_above_silent_but_its_rate_is_still_measured(noisy_control):
    noop = rows(noisy_control)["noop"]
    assert noop["measured"] == "silent"
    assert json.loads(noop["label_fractions"]).get("slower") == 1.0
    # The judge's calibration is what the control's own runs would have been called.
    assert noisy_control.control["set_fpr"] == 1.0
    assert noisy_control.control["group_fpr"] == 1.0


def test_a_loop_whose_control_is_not_silent_starts_its_section_with_a_warning(noisy_control):
    warning = control_warnings(noisy_control.symptoms)[(LOOP, "cpu")]
    assert "not silent" in warning and "slower 5/5" in warning
    section = render_symptoms_md(noisy_control).split(f"## `{LOOP}` (cpu)")[1]
    assert section.lstrip().startswith(f"**{warning}**")
    assert warning in render_study_md(noisy_control)
    assert "noop control (the unmutated loop on spare seeds) is not silent" in (
        render_report_html(noisy_control)
    )
    assert any(warning in note for note in verdict_notes(noisy_control.symptoms))


def test_a_noop_control_at_three_seeds_reads_silent_whatever_it_shows(tmp_path):
    tables = tables_of(
        tmp_path, mutants=[FLAT], seeds=(0, 1, 2), noop_seeds=(100, 101, 102), control="spiky"
    )
    noop = rows(tables)["noop"]
    assert noop["measured"] == "silent"
    assert "loss_spike 3/3 (also in control)" in noop["symptoms"]


# -- end to end: a script that reports nothing -------------------------------------------------


OPERATORS = "drop_zero_grad,scale_lr,scale_lr:factor=0.1,scale_lr:factor=0.01"


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [3, 2])
def test_a_script_with_no_measure_gets_unjudged_rows_never_silent(
    tmp_path, monkeypatch, capsys, seeds
):
    from test_own_script import _catalog, _project

    _project(tmp_path, "no_measure", monkeypatch)
    results = tmp_path / "results"
    code, err = _catalog(capsys, results, "loop.seed_arg=--seed", operators=OPERATORS, seeds=seeds)
    assert code == 0, err
    symptoms = pd.read_csv(results / "catalog" / "symptoms.csv")
    mutants = symptoms[symptoms["role"] == "mutant"]
    assert len(mutants) == 4
    assert "silent" not in set(mutants["measured"])
    assert "outcome measured by nothing" in err
    assert 'loop.metrics="REGEX"' in err  # the hint names the pattern too
    noop = symptoms[symptoms["role"] == "noop"].iloc[0]
    if seeds == 3:
        assert noop["measured"] == "silent"
        assert UNJUDGED in set(mutants["measured"])  # lr / 10, / 100: the curve cannot tell
        assert "mutants unjudged, no quality measure" in err and "loop.holdout" in err
    else:
        assert set(symptoms["measured"]) == {UNJUDGED}
        assert set(symptoms["outcome"]) == {"too few seeds"}
        assert "no false-positive rate" in err and "false-positive rate 100%" not in err
