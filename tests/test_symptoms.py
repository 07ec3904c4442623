"""Symptom labels and severities on synthetic studies whose truth is known by construction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fixtures_runs import NOOP_SEEDS, REFERENCE_SEEDS, RunSpec, write_run, write_study
from scipy.stats import mannwhitneyu

from experiments.catalog import build_tables, load_runs
from experiments.signature import signature
from experiments.symptoms import (
    LABELS,
    Reference,
    RunVerdict,
    axis_of,
    cliffs_delta,
    cohens_d,
    disagreement,
    format_labels,
    judge_run,
    label_fractions,
    measured_severity,
    rank_test,
    rank_tests,
    seed_sets,
    spread_floor,
    verdict,
    wilson_interval,
)

# behaviour -> (identity, the label it must get in every seed, measured severity). Severity
# comes from the outcome only (here the val metric the synthetic script reports): a
# mechanism that leaves the model as good (eval-mode training, grad in eval) is a symptom of
# a silent bug. A leak that flatters the val metric makes the only measure a number too good
# to trust, and no held-out evaluation checks it: unjudged, not silent (docs/truth.md).
KNOWN = {
    "flat": ("t.py::train::drop_optimizer_step#0", "no_learning", "breaks_training"),
    "diverge": ("t.py::main::scale_lr(factor=100.0)#0", "diverges", "breaks_training"),
    "crash_start": ("t.py::Net.forward::swap_view#0", "crash:RuntimeError", "crash"),
    "nan": ("t.py::train::drop_grad_clip#0", "nan", "breaks_training"),
    "slow": ("t.py::main::scale_lr(factor=0.1)#0", "slow_convergence", "degrades"),
    "spiky": ("t.py::train::spiky#0", "loss_spike", "degrades"),
    "eval_mode": ("t.py::train::drop_train_mode#0", "eval_mode_training", "silent"),
    "grad_in_eval": ("t.py::evaluate::drop_no_grad#0", "grad_in_eval", "silent"),
    "leak_memory": ("t.py::train::keep_loss_graph#0", "memory_growth", "cost_only"),
    "slow_steps": ("t.py::train::slow_step#0", "slower", "cost_only"),
    "leak_labels": ("t.py::data::leak_labels#0", "too_good", "unjudged"),
}

# What a run's labels read when no label fired and nothing measured its model (these unit
# runs carry no held-out or reported number): no verdict, not "silent".
NOTHING_FIRED = ["unjudged"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    mutants = [
        (behaviour, identity, (identity.split("::")[2].split("(")[0].split("#")[0],))
        for behaviour, (identity, _, _) in KNOWN.items()
    ]
    write_study(root, mutants=mutants)
    tables = build_tables(load_runs(root))
    return tables


def row_of(tables, identity):
    rows = tables.symptoms[tables.symptoms["identity"] == identity]
    assert len(rows) == 1, identity
    return rows.iloc[0]


@pytest.mark.parametrize("behaviour", list(KNOWN))
def test_known_bug_gets_its_label_in_every_seed(study, behaviour):
    identity, label, severity = KNOWN[behaviour]
    row = row_of(study, identity)
    fractions = json.loads(row["label_fractions"])
    assert fractions.get(label) == 1.0, fractions
    assert row["measured"] == severity
    column = "outcome" if axis_of(label) == "outcome" else "symptoms"
    assert label in row[column]


def test_no_learning_also_sits_at_chance(study):
    fractions = json.loads(row_of(study, KNOWN["flat"][0])["label_fractions"])
    assert fractions.get("model_at_chance") == 1.0
    assert "diverges" not in fractions


def test_noop_control_is_silent_with_zero_false_positives(study):
    noop = study.symptoms[study.symptoms["role"] == "noop"]
    assert len(noop) == 1
    assert noop.iloc[0]["measured"] == "silent"
    assert json.loads(noop.iloc[0]["label_fractions"]) == {"silent": 1.0}
    assert study.control["group_fpr"] == 0.0
    assert study.control["run_fpr"] == 0.0
    assert study.control["noop_runs"] == len(NOOP_SEEDS)


def test_noop_is_judged_against_the_reference_seeds_only(study):
    noop = study.symptoms[study.symptoms["role"] == "noop"].iloc[0]
    assert json.loads(noop["reference_seeds"]) == list(REFERENCE_SEEDS)
    assert json.loads(noop["seeds"]) == list(NOOP_SEEDS)


def test_false_positive_rate_over_loops_and_seed_sets(tmp_path):
    """Twelve loop groups, each a fresh reference and a disjoint noop seed set."""
    for index in range(12):
        base = 10 * index
        write_study(
            tmp_path,
            mutants=[("flat", "t.py::train::drop_optimizer_step#0", ("drop_optimizer_step",))],
            seeds=tuple(range(base, base + 5)),
            noop_seeds=tuple(range(500 + base, 505 + base)),
            loop=f"loop{index:02d}",
            steps=200,
        )
    tables = build_tables(load_runs(tmp_path))
    assert tables.control["noop_groups"] == 12
    assert tables.control["group_fpr"] <= 0.05
    assert tables.control["run_fpr"] <= 0.05, tables.control["labels_fired"]
    # One seed-set per loop (a pool of 5 for mutants of 5 seeds), with its interval.
    assert tables.control["noop_sets"] == 12
    low, high = tables.control["set_fpr_ci"]
    assert low <= tables.control["set_fpr"] <= high and high < 0.3
    mutants = tables.symptoms[tables.symptoms["role"] == "mutant"]
    assert (mutants["measured"] == "breaks_training").all()


def test_label_that_holds_in_some_seeds_is_unstable(tmp_path):
    for seed in REFERENCE_SEEDS:
        write_run(tmp_path, RunSpec("healthy", seed))
        behaviour = "crash_start" if seed < 2 else "healthy"
        write_run(
            tmp_path, RunSpec(behaviour, seed, identity="t.py::f::flaky#0", operators=("flaky",))
        )
    row = build_tables(load_runs(tmp_path)).symptoms.iloc[0]
    assert json.loads(row["label_fractions"])["crash:RuntimeError"] == pytest.approx(0.4)
    assert "crash:RuntimeError 2/5" in row["unstable"]
    assert "crash" not in row["symptoms"]
    assert row["measured"] == "silent"


def test_expected_severity_sits_beside_measured_even_when_they_disagree(study):
    symptoms = study.symptoms
    assert {"expected", "measured", "agrees"} <= set(symptoms.columns)
    known = symptoms[symptoms["expected"].notna()]
    assert (known["agrees"] == (known["expected"] == known["measured"])).all()


def test_unregistered_operator_is_judged_without_metadata(study):
    row = row_of(study, KNOWN["spiky"][0])
    assert row["operator"] == "spiky"
    assert pd.isna(row["expected"]) and pd.isna(row["agrees"])


# -- the statistics, directly ------------------------------------------------------------


def test_identical_reference_runs_do_not_give_infinite_effects():
    reference = np.full(5, 0.1)
    d = cohens_d(np.full(5, 0.1001), reference, "final_over_initial")
    assert np.isfinite(d) and abs(d) < 0.1
    ref = Reference({"final_over_initial": reference}, 0.0, 5, (0, 1, 2, 3, 4))
    assert ref.spread("final_over_initial") == spread_floor("final_over_initial", 0.1) > 0


def test_rank_test_needs_enough_seeds_and_separates_clear_differences():
    assert rank_test(np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])) is None
    p = rank_test(np.arange(5.0), np.arange(10.0, 15.0))
    assert p is not None and p < 0.01
    assert rank_test(np.ones(4), np.ones(4)) == 1.0


def test_batched_rank_tests_equal_single_scipy_calls():
    rng = np.random.default_rng(7)
    samples = {f"shift{i}": (rng.normal(size=5) + 0.4 * i, rng.normal(size=5)) for i in range(5)}
    samples["ties"] = (np.array([1.0, 1, 2, 2, 3]), np.array([1.0, 2, 2, 3, 3]))
    samples["sizes"] = (rng.normal(size=4), rng.normal(size=12))
    samples["too_few"] = (np.array([1.0, 2.0]), np.array([1.0, 2.0, 3.0]))
    got = rank_tests(samples)
    assert got["too_few"] is None
    for name, (mutant, reference) in samples.items():
        if name != "too_few":
            expected = mannwhitneyu(mutant, reference, alternative="two-sided").pvalue
            assert got[name] == pytest.approx(expected, rel=1e-9), name


def test_cliffs_delta_bounds():
    assert cliffs_delta(np.array([5.0, 6.0]), np.array([1.0, 2.0])) == 1.0
    assert cliffs_delta(np.array([1.0]), np.array([5.0])) == -1.0
    assert cliffs_delta(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0


def test_measured_severity_is_a_median_that_rounds_to_the_worse_level():
    seeds = [["crash:X"], ["crash:X"], ["model_at_chance"], ["model_at_chance"], ["silent"]]
    assert measured_severity(seeds) == ("breaks_training", 0.8)
    assert measured_severity([["silent"]] * 3 + [["crash:X"]] * 2) == ("silent", 1.0)
    assert measured_severity([["slower"], ["slower"], ["silent"]])[0] == "cost_only"
    assert measured_severity([["timeout"], ["timeout"], ["silent"]])[0] == "timeout"


def test_symptoms_set_the_severity_only_without_a_quality_measure():
    no_learning = [["no_learning"]] * 3
    assert measured_severity(no_learning)[0] == "silent"  # a quality measure said fine
    blind = [RunVerdict(["no_learning"], None, True)] * 3
    assert measured_severity(blind)[0] == "breaks_training"  # the curve is all there is
    partial = [RunVerdict(["timeout", "no_learning@partial"], None, False)] * 3
    assert measured_severity(partial)[0] == "timeout"


def test_label_fractions_and_formatting():
    fractions = label_fractions([["nan", "diverges"], ["nan"], ["silent"], ["nan"], ["nan"]])
    assert fractions == {"nan": 0.8, "diverges": 0.2, "silent": 0.2}
    assert format_labels(fractions, 5, stable=True) == "nan 4/5"
    assert format_labels(fractions, 5, stable=False) == "diverges 1/5, silent 1/5"


def test_status_labels_and_invalid_runs():
    ref = Reference({}, 0.0, 0, ())
    assert judge_run({"status": "crash", "exc_type": "ValueError"}, ref) == ["crash:ValueError"]
    assert judge_run({"status": "oom"}, ref) == ["oom"]
    assert judge_run({"status": "timeout"}, ref) == ["timeout"]
    assert judge_run({"status": "invalid"}, ref) == ["invalid"]
    # A reference with no finished run has no spread: a finished run cannot be judged.
    assert judge_run({"status": "ok"}, ref) == ["too_few_seeds"]


def test_exception_before_training_is_a_crash_when_the_reference_trains():
    trains = Reference({}, 0.0, 5, (0, 1, 2, 3, 4))
    never_ran = Reference({}, 0.0, 0, ())
    dtype_error = {"status": "invalid", "exc_type": "RuntimeError"}
    assert judge_run(dtype_error, trains) == ["crash:RuntimeError"]
    assert judge_run(dtype_error, never_ran) == ["invalid"]
    assert judge_run({"status": "invalid", "exc_type": "SyntaxError"}, trains) == ["invalid"]
    assert judge_run({"status": "invalid", "exc_type": "SystemExit"}, trains) == ["invalid"]
    assert judge_run({"status": "invalid", "exc_type": None}, trains) == ["invalid"]


def reference_of(**features: list[float]) -> Reference:
    values = {name: np.asarray(v, dtype=float) for name, v in features.items()}
    return Reference(values, 0.0, 5, (0, 1, 2, 3, 4))


def test_grad_in_eval_needs_real_eval_forwards():
    ref = reference_of(eval_grad_frac=[0.0] * 5, eval_forwards=[40.0] * 5)
    assert judge_run({"status": "ok", "eval_grad_frac": 1.0, "eval_forwards": 40}, ref) == [
        "grad_in_eval"
    ]
    # 460 training forwards without a backward count as eval forwards: not this bug
    lost_backward = {"status": "ok", "eval_grad_frac": 0.92, "eval_forwards": 500}
    assert judge_run(lost_backward, ref) == NOTHING_FIRED


def test_slower_ignores_load_that_cpu_time_does_not_show():
    # Wall time 3x the reference's (a loaded machine), CPU time as the reference's: no cost.
    ref = reference_of(
        cpu_time_s=[1.00, 1.02, 0.98, 1.01, 0.99], train_time_s=[1.0, 1.1, 0.9, 1.0, 1.0]
    )
    loaded = {"status": "ok", "cpu_time_s": 1.03, "train_time_s": 3.2}
    assert judge_run(loaded, ref) == NOTHING_FIRED
    heavier = {"status": "ok", "cpu_time_s": 1.8, "train_time_s": 1.9}
    assert judge_run(heavier, ref) == ["slower"]
    # Under the factor (1.5x) a consistent CPU increase is not yet a cost.
    assert judge_run({"status": "ok", "cpu_time_s": 1.3, "train_time_s": 1.3}, ref) == NOTHING_FIRED


def test_slower_falls_back_to_step_cost_then_wall_time():
    # Runs recorded before the harness wrote CPU time: the median step time x steps.
    ref = reference_of(step_cost_s=[0.50, 0.52, 0.49, 0.51, 0.50], train_time_s=[1.0] * 5)
    assert (
        judge_run({"status": "ok", "step_cost_s": 0.52, "train_time_s": 3.0}, ref) == NOTHING_FIRED
    )
    assert judge_run({"status": "ok", "step_cost_s": 0.9, "train_time_s": 1.1}, ref) == ["slower"]
    # Nothing but wall time: the wall factor (2.5x) applies.
    wall_only = reference_of(train_time_s=[1.0, 1.1, 0.9, 1.0, 1.0])
    assert judge_run({"status": "ok", "train_time_s": 2.0}, wall_only) == NOTHING_FIRED
    assert judge_run({"status": "ok", "train_time_s": 2.6}, wall_only) == ["slower"]


def test_step_cost_leaves_out_stalls_but_counts_heavier_steps():
    def trace(gaps: list[float], cpu_s: float | None = None) -> list[dict]:
        times = np.concatenate([[0.0], np.cumsum(gaps)])
        records = [{"kind": "backward", "t": float(t), "i": i, "loss": 1.0 / (i + 1)}
                   for i, t in enumerate(times)]  # fmt: skip
        return [*records, {"kind": "end", "t": float(times[-1]), "cpu_s": cpu_s}]

    steady = signature(trace([0.001] * 100, cpu_s=0.2), {}, n_classes=None)
    # A third of the steps stalled 10x by other processes: wall time nearly 4x.
    stalled = signature(trace([0.001, 0.001, 0.01] * 33 + [0.001]), {}, n_classes=None)
    heavier = signature(trace([0.002] * 100), {}, n_classes=None)
    assert steady["cpu_time_s"] == 0.2 and stalled["cpu_time_s"] is None
    assert stalled["train_time_s"] > 3 * steady["train_time_s"]
    assert stalled["step_cost_s"] == pytest.approx(steady["step_cost_s"])
    assert heavier["step_cost_s"] == pytest.approx(2 * steady["step_cost_s"])


def test_lower_val_loss_is_too_good_only_on_the_same_loss_scale():
    ref = reference_of(val_loss_final=[0.30, 0.31, 0.29, 0.30, 0.32], initial_loss=[2.3] * 5)
    leak = {"status": "ok", "val_loss_final": 0.01, "initial_loss": 2.31}
    assert judge_run(leak, ref) == ["too_good"]
    other_criterion = {"status": "ok", "val_loss_final": 0.01, "initial_loss": 0.09}
    assert "too_good" not in judge_run(other_criterion, ref)


def test_transient_blow_up_is_divergence_and_the_dead_net_does_not_learn():
    ref = reference_of(
        final_over_initial=[0.03, 0.031, 0.029, 0.033, 0.03],
        max_over_initial=[1.0] * 5,
        peak_over_initial=[1.0, 1.02, 1.0, 1.01, 1.0],
    )
    run = {"status": "ok", "final_over_initial": 0.95, "max_over_initial": 1.0}
    assert judge_run({**run, "peak_over_initial": 41.0}, ref) == ["diverges", "no_learning"]
    assert judge_run({**run, "peak_over_initial": 1.05}, ref) == ["no_learning"]
    rose_and_stayed = {"status": "ok", "final_over_initial": 3.0, "max_over_initial": 3.5}
    assert judge_run(rose_and_stayed, ref) == ["diverges"]


def test_nan_in_the_reference_too_is_not_a_mutant_symptom():
    noisy_reference = Reference({}, 0.6, 5, (0, 1, 2, 3, 4))
    assert judge_run({"status": "nan", "first_nan_step": 3}, noisy_reference) == NOTHING_FIRED


# -- the truth on real runs --------------------------------------------------------------


@pytest.mark.slow
def test_known_bugs_get_their_literature_labels_on_a_real_loop(tmp_path):
    """A small real sweep through the harness: mlp_digits (Adam) on five seeds."""
    from pathlib import Path

    from experiments.harness import RunSpec as HarnessSpec
    from experiments.harness import run_sweep
    from mutations.registry import get_operator
    from mutator import SourceFile

    script = Path(__file__).resolve().parents[1] / "reference_loops" / "mlp_digits.py"
    text = script.read_text()
    source = SourceFile(text, script.name)

    def spec(seed: int, mutant=None) -> HarnessSpec:
        fields = {"mutant": {**mutant.manifest_entry(), "diff": mutant.diff}} if mutant else {}
        code = mutant.source if mutant else text
        return HarnessSpec(
            str(script), code, ("--seed", str(seed)), seed, loop="mlp_digits", **fields
        )

    mutants = {}
    for operator in (get_operator("drop_optimizer_step"), get_operator("scale_lr", factor=100.0)):
        (site,) = source.find_sites([operator])
        mutants[operator.name] = source.apply([site])
    specs = [spec(seed) for seed in (*REFERENCE_SEEDS, *NOOP_SEEDS)]
    specs += [spec(seed, mutant) for mutant in mutants.values() for seed in REFERENCE_SEEDS]
    run_sweep(specs, tmp_path, workers=2)
    tables = build_tables(load_runs(tmp_path, n_classes={"mlp_digits": 10}))
    by_operator = {row["operator"]: row for row in tables.symptoms.to_dict("records")}

    no_step = json.loads(by_operator["drop_optimizer_step"]["label_fractions"])
    assert no_step.get("no_learning", 0) >= 0.8, no_step
    high_lr = json.loads(by_operator["scale_lr"]["label_fractions"])
    assert max(high_lr.get("diverges", 0), high_lr.get("oscillates", 0)) >= 0.8, high_lr
    assert by_operator["noop"]["measured"] == "silent", by_operator["noop"]["label_fractions"]


# -- outcome vs symptoms, lies, scale, partial traces, control ------------------------------

HEALTHY = {
    "status": "ok",
    "initial_loss": 2.30,
    "final_over_initial": 0.03,
    "max_over_initial": 1.0,
    "peak_over_initial": 1.0,
    "mean_log_progress": -2.0,
    "plateau_frac": 0.05,
    "log_slope_last_half": -0.2,
    "val_loss_final": 0.10,
    "val_metric_final": 0.97,
    "holdout_metric": 0.97,
    "holdout_loss": 0.10,
    "holdout_chance": 0.1,
    "val_metric_gap": 0.0,
    "val_loss_gap": 0.0,
}


def healthy_reference() -> Reference:
    jitter = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    values = {
        "initial_loss": 2.30 + 0.01 * jitter,
        "final_over_initial": 0.03 + 0.002 * jitter,
        "max_over_initial": 1.0 + 0.0 * jitter,
        "peak_over_initial": 1.0 + 0.0 * jitter,
        "mean_log_progress": -2.0 + 0.02 * jitter,
        "val_loss_final": 0.10 + 0.005 * jitter,
        "val_metric_final": 0.97 + 0.004 * jitter,
        "holdout_metric": 0.97 + 0.004 * jitter,
        "holdout_loss": 0.10 + 0.005 * jitter,
        "val_metric_gap": 0.0 * jitter,
        "val_loss_gap": 0.0 * jitter,
    }
    return Reference(values, 0.0, 5, (0, 1, 2, 3, 4))


def test_an_eval_only_bug_misleads_and_says_which_number_lies():
    run = dict(HEALTHY, val_loss_final=1.50, val_loss_gap=1.40)
    judged = verdict(run, healthy_reference(), scale_free=True)
    assert "val_loss_lies_high" in judged.labels
    assert judged.severity == "misleads"


def test_a_metric_reported_on_training_data_lies_high():
    run = dict(HEALTHY, val_metric_final=1.0, val_metric_gap=0.03)
    judged = verdict(run, healthy_reference())
    assert "val_metric_lies_high" in judged.labels
    assert judged.severity == "misleads"


def test_a_worse_model_is_not_a_lie():
    run = dict(HEALTHY, holdout_metric=0.80, val_metric_final=0.80, final_over_initial=0.2)
    judged = verdict(run, healthy_reference())
    assert "worse_model" in judged.labels
    assert not any("lies" in label for label in judged.labels)
    assert judged.severity == "degrades"


def test_a_rescaled_loss_is_judged_on_its_own_scale():
    # Softmax before cross-entropy: the loss floors at 0.63 of its start; accuracy intact.
    run = dict(HEALTHY, final_over_initial=0.63, mean_log_progress=-0.4, plateau_frac=0.6)
    assert "slow_convergence" in judge_run(run, healthy_reference(), scale_free=False)
    judged = verdict(run, healthy_reference(), scale_free=True)
    assert "slow_convergence" not in judged.labels
    assert "loss_floor" in judged.labels
    assert judged.severity == "silent"


def test_labels_of_a_crashed_run_are_marked_partial():
    run = {"status": "crash", "exc_type": "RuntimeError", "initial_loss": 9.0}
    judged = verdict(run, healthy_reference())
    assert judged.labels == ["crash:RuntimeError", "init_loss_off@partial"]
    assert judged.severity == "crash" and not judged.finished


def test_timeout_is_not_a_crash():
    assert verdict({"status": "timeout"}, healthy_reference()).severity == "timeout"


def test_disagreement_names_adam_for_a_rescaled_loss():
    row = {
        "measured": "silent",
        "label_fractions": json.dumps({"init_loss_off": 1.0}),
        "n_seeds": 5,
        "mutant_initial_loss": 147.0,
        "ref_initial_loss": 2.30,
        "mutant_final_over_initial": 0.031,
        "ref_final_over_initial": 0.030,
        "mutant_holdout_metric": 0.969,
        "ref_holdout_metric": 0.969,
        "optimizer": "Adam",
    }
    line = disagreement(row, "degrades")
    assert line.startswith("Adam rescales gradients") and "0.969 vs reference 0.969" in line
    assert disagreement(dict(row, optimizer="SGD"), "degrades").startswith("init_loss_off")
    assert disagreement(row, "silent") == ""
    # Another curve shape is another loss function, not a rescaled one.
    mse = dict(row, mutant_initial_loss=0.11, mutant_final_over_initial=0.06)
    assert disagreement(mse, "degrades").startswith("a different loss (initial loss x0.0478")


def test_wilson_interval_and_seed_sets():
    low, high = wilson_interval(0, 20)
    assert low == 0.0 and high == pytest.approx(0.161, abs=1e-3)
    sets = seed_sets(list(range(8)), 5)
    assert len(sets) == 20 and len(set(sets)) == 20
    assert all(len(chosen) == 5 for chosen in sets)
    assert seed_sets(list(range(5)), 5) == [tuple(range(5))]


def test_every_label_has_plain_words_for_the_docs_and_the_quiz():
    for name, label in LABELS.items():
        assert label.description and label.hint, name
        assert "(" not in label.hint, name  # the quiz never names the code


def test_docs_list_every_declared_label():
    text = (Path(__file__).parents[1] / "docs" / "truth.md").read_text(encoding="utf-8")
    for name, label in LABELS.items():
        assert f"| `{name}` | {label.axis} | {label.severity} |" in text, name


def test_a_larger_control_pool_gives_twenty_seed_sets_per_loop(tmp_path):
    write_study(
        tmp_path,
        mutants=[("flat", "t.py::train::drop_optimizer_step#0", ("drop_optimizer_step",))],
        seeds=tuple(range(5)),
        noop_seeds=tuple(range(100, 108)),
    )
    control = build_tables(load_runs(tmp_path)).control
    assert control["noop_runs"] == 8
    (per_loop,) = control["per_loop"].values()
    assert per_loop == {
        "pool": 8,
        "set_size": 5,
        "sets": 20,
        "sets_not_silent": 0,
    }
    assert control["set_fpr"] == 0.0 and control["set_fpr_ci"][1] == pytest.approx(0.161, abs=1e-3)
