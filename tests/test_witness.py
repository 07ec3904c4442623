"""Witness declarations (mutator/witness.py) and the decision (experiments/witness.py)."""

from __future__ import annotations

import pytest

from experiments.witness import (
    CONFIRMED,
    NOT_RECORDED,
    STILLBORN,
    UNCONFIRMED,
    UNKNOWN,
    decide,
    decide_runs,
    operator_parts,
)
from mutations.registry import operator_classes
from mutator.witness import COMPARISONS, FACTS, Witness, parse


def test_every_operator_declares_a_witness():
    missing = [name for name, cls in operator_classes().items() if cls.witness is None]
    assert missing == [], f"operators without a witness: {missing}"
    for name, cls in operator_classes().items():
        witness = cls.witness
        assert isinstance(witness, Witness), name
        assert witness.comparison in COMPARISONS
        assert all(fact in FACTS for fact in witness.facts), name
        assert len(witness.says) <= 80, f"{name}: say it in a few words"


def test_expected_crash_operators_declare_their_crashes():
    for name, cls in operator_classes().items():
        if cls.expected == "crash":
            assert cls.witness.crashes, f"{name} expects a crash but declares none"


def test_only_value_bugs_use_the_differential():
    differential = sorted(
        name for name, cls in operator_classes().items() if cls.witness.differential
    )
    # Mechanisms that are only other numbers: each says so in its sentence.
    for name in differential:
        assert operator_classes()[name].witness.says.startswith("different numbers"), name
    assert "drop_zero_grad" not in differential and "drop_train_mode" not in differential
    # Of the operators written for real faults (issue 32), only two change nothing but
    # numbers: a class-weight factor dropped, a loss weight applied twice.
    real_faults = {
        "train_mode_outside_loop", "stale_fake_in_generator_loss", "wrong_network_in_loss",
        "drop_detach_in_loss", "hoist_loop_reset", "to_device_not_assigned",
        "softmax_overwrites_logits", "drop_loss_reduction", "clamp_bound_flipped",
        "normalize_by_wrong_stat", "optimizer_misses_params", "swap_loss_targets",
        "metric_into_train_accumulator", "clip_per_micro_step", "drop_class_weight_term",
        "interpolation_weight_per_element", "last_item_instead_of_list", "dropout_on_logits",
        "loss_weight_applied_twice", "flatten_all_dims_before_loss", "linspace_includes_endpoint",
    }  # fmt: skip
    assert real_faults <= set(operator_classes())
    assert real_faults & set(differential) == {
        "drop_class_weight_term",
        "loss_weight_applied_twice",
    }


@pytest.mark.parametrize(
    ("declared", "crashes", "problem"),
    [
        (("sometimes stale_grad", "x"), (), "comparison"),
        (("more no_such_fact", "x"), (), "not in the probes"),
        (("fewer targets", "x"), (), "does not apply"),
        (("crash", "x"), (), "needs the declared crashes"),
        (("more stale_grad", ""), (), "two strings"),
        ("more stale_grad", (), "witness must be"),
        (("more stale_grad", "x"), ("[unclosed",), "unterminated"),
    ],
)
def test_a_malformed_declaration_says_what_is_wrong(declared, crashes, problem):
    with pytest.raises(Exception, match=problem):
        parse(declared, crashes)


def test_a_declaration_reads_as_a_witness():
    witness = parse(("factor optimizer.lr", "scaled"), (r"same device",), {"factor": 1})
    assert witness.spec == "factor optimizer.lr" and witness.factor == "factor"
    assert witness.declares("RuntimeError: Expected all tensors to be on the same device")
    assert not witness.declares("NameError: name 'x' is not defined")


def _facts(**changes):
    facts = {name: [0, None] for name, (kind, _) in FACTS.items() if kind == "events"}
    facts.update(
        steps=10,
        backward_calls=10,
        train_samples=640,
        optimizer=[{"class": "Adam", "lr": 0.002, "weight_decay": 0, "eps": 1e-8}],
        optimizer_state=0,
        mode_modules=1,
        clip_active=0,
        targets={"n": 10, "at": [[0, "aa"], [1, "bb"]]},
        losses={"n": 10, "at": [[0, 2.3], [1, 2.2]]},
        eval_outputs={"n": 0, "at": []},
    )
    facts.update(changes)
    return facts


def _decide(name, run_facts, ref_facts, status="ok", params=None, **run):
    parts = operator_parts([name], [params or {}])
    mine = {"status": status, "device": "cpu", "seed": 0, "witness": run_facts, **run}
    return decide(parts, mine, {"status": "ok", "witness": ref_facts})


def test_more_fires_on_events_the_reference_does_not_have():
    verdict = _decide("drop_zero_grad", _facts(stale_grad=[9, 1]), _facts())
    assert verdict.state == CONFIRMED and "9 vs 0, first after 1 steps" in verdict.text


def test_a_mode_bug_on_a_model_without_mode_modules_is_unconfirmed_with_its_reason():
    verdict = _decide("drop_train_mode", _facts(mode_modules=0), _facts(mode_modules=0))
    assert verdict.state == UNCONFIRMED and verdict.reason == "no_effect"
    assert verdict.text.startswith("unconfirmed (no effect on this model)")
    assert "no module whose behaviour depends on train/eval mode" in verdict.text


def test_a_crash_before_the_witness_is_stillborn_and_one_after_is_marked_undeclared():
    crash = {"exc_type": "IndexError", "exc_message": "index 3 is out of bounds"}
    early = _decide("drop_zero_grad", _facts(), _facts(), status="crash", **crash)
    assert early.state == STILLBORN and "IndexError: index 3" in early.text
    late = _decide("drop_zero_grad", _facts(stale_grad=[2, 1]), _facts(), status="crash", **crash)
    assert (
        late.state == CONFIRMED
        and late.undeclared == "undeclared: IndexError: index 3 is out of bounds"
    )


def test_a_declared_crash_is_the_bug_even_before_any_witness():
    crash = {
        "exc_type": "RuntimeError",
        "exc_message": "element 0 of tensors does not require grad",
    }
    verdict = _decide("no_grad_training_step", _facts(), _facts(), status="crash", **crash)
    assert verdict.state == CONFIRMED and verdict.reason == "declared_crash"


def test_device_bugs_are_not_observable_on_the_cpu():
    verdict = _decide("drop_model_to_device", _facts(), _facts())
    assert verdict.state == UNCONFIRMED and verdict.reason == "device"
    crash = {
        "exc_type": "RuntimeError",
        "exc_message": "Expected all tensors to be on the same device",
    }
    parts = operator_parts(["drop_model_to_device"], [{}])
    on_gpu = decide(
        parts, {"status": "crash", "device": "cuda", "witness": _facts(), **crash}, None
    )
    assert on_gpu.state == CONFIRMED


def test_fewer_needs_a_run_that_ended_normally():
    fewer = _facts(steps=0)
    assert _decide("drop_optimizer_step", fewer, _facts()).state == CONFIRMED
    crash = {"exc_type": "ValueError", "exc_message": "boom"}
    assert (
        _decide("drop_optimizer_step", fewer, _facts(), status="crash", **crash).state == STILLBORN
    )
    timeout = _decide("drop_optimizer_step", fewer, _facts(), status="timeout")
    assert timeout.state == UNCONFIRMED and timeout.reason == "ended_early"


def test_a_factor_of_a_zero_setting_changes_nothing():
    zero = _facts(optimizer=[{"class": "Adam", "weight_decay": 0}])
    verdict = _decide("weight_decay_too_high", zero, zero)
    assert verdict.state == UNCONFIRMED and "so x100 changes nothing" in verdict.text
    scaled = _facts(optimizer=[{"class": "Adam", "lr": 0.2}])
    verdict = _decide("scale_lr", scaled, _facts(optimizer=[{"class": "Adam", "lr": 0.002}]))
    assert verdict.state == CONFIRMED and "x100" in verdict.text


def test_sequences_compare_where_both_recorded():
    noisy = _facts(targets={"n": 10, "at": [[0, "aa"], [1, "cc"]]})
    assert _decide("label_noise", noisy, _facts()).state == CONFIRMED
    same = _decide("label_noise", _facts(), _facts())
    assert same.state == UNCONFIRMED and "same targets" in same.text
    short = _facts(targets={"n": 1, "at": [[0, "aa"]]})
    crash = {"exc_type": "KeyError", "exc_message": "'x'"}
    assert _decide("label_noise", short, _facts(), status="crash", **crash).state == STILLBORN


def test_without_a_reference_or_facts_there_is_no_verdict_to_stand_behind():
    parts = operator_parts(["drop_zero_grad"], [{}])
    alone = decide(parts, {"status": "ok", "seed": 4, "witness": _facts()}, None)
    assert alone.state == UNCONFIRMED and "no reference run on seed 4" in alone.text
    blind = decide(parts, {"status": "ok", "witness": None}, {"witness": _facts()})
    assert blind.state == UNCONFIRMED and blind.reason == "not_observed"
    old = decide(parts, {"status": "ok", "witness": NOT_RECORDED}, {"witness": _facts()})
    assert old.state == UNKNOWN and old.counts


def test_decide_runs_pairs_each_mutant_with_the_reference_of_its_seed_and_argv():
    base = {"loop": "l", "device": "cpu", "argv": ["--seed", "0"], "status": "ok"}
    runs = [
        {**base, "seed": 0, "identity": "none", "operators": [], "witness": _facts()},
        {
            **base,
            "seed": 1,
            "identity": "none",
            "operators": [],
            "witness": _facts(stale_grad=[5, 0]),
        },
        {
            **base,
            "seed": 1,
            "identity": "m",
            "operators": ["drop_zero_grad"],
            "params": [{}],
            "witness": _facts(stale_grad=[5, 0]),
        },
        {
            **base,
            "seed": 0,
            "identity": "m",
            "operators": ["drop_zero_grad"],
            "params": [{}],
            "witness": _facts(stale_grad=[5, 0]),
        },
        {
            **base,
            "seed": 0,
            "identity": "x",
            "operators": ["no_such_operator"],
            "witness": _facts(),
        },
    ]
    verdicts = decide_runs(runs)
    assert verdicts[0] is None and verdicts[1] is None
    assert verdicts[2].state == UNCONFIRMED  # its seed's reference had as many
    assert verdicts[3].state == CONFIRMED
    assert verdicts[4].state == UNKNOWN


def test_the_shared_stillborn_module_reads_declared_crashes():
    from experiments.stillborn import Raised, crash_declared

    shape = Raised(("RuntimeError",), "The size of tensor a (10) must match the size of b", ())
    name = Raised(("NameError",), "name 'x' is not defined", ())
    mse = operator_classes()["mse_for_classification"]
    assert crash_declared([mse], shape) and not crash_declared([mse], name)
    assert not crash_declared([operator_classes()["drop_zero_grad"]], shape)


def test_a_higher_order_mutant_shows_its_bugs_when_one_witness_fires():
    parts = operator_parts(["drop_zero_grad", "drop_train_mode"], [{}, {}])
    run = {"status": "ok", "device": "cpu", "seed": 0, "witness": _facts(stale_grad=[3, 1])}
    verdict = decide(parts, run, {"status": "ok", "witness": _facts()})
    assert verdict.state == CONFIRMED and "no zero_grad cleared" in verdict.text
    none = decide(parts, {**run, "witness": _facts()}, {"status": "ok", "witness": _facts()})
    assert none.state == UNCONFIRMED
