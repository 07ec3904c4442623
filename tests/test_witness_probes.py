"""The witness probes (experiments/harness/probes.py) on small training loops in-process,
through the installable API ``trainwreck test``'s child will use (harness/observe.py)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from experiments.harness import observe
from experiments.witness import CONFIRMED, UNCONFIRMED, decide, operator_parts


def _data(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g)


def _model(dropout: float = 0.2) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 3))


def train(
    *,
    zero_grad=True,
    train_mode=True,
    no_grad_eval=True,
    retain=False,
    keep_total=False,
    lr=0.1,
    dropout=0.2,
    labels=None,
    clip=None,
    steps=6,
    restore_alias=False,
    evals=1,
    last_eval=1.0,
    halve=False,
    trace=None,
):
    """A tiny classifier trained in batches of 16 with one evaluation at the end; each
    keyword is one bug. Returns the witness facts."""
    observed = observe.install(trace)
    try:
        x, y = _data()
        y = y if labels is None else labels(y)
        model = _model(dropout)
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        best = copy.deepcopy(model.state_dict()) if not restore_alias else model.state_dict()
        total = 0.0
        model.train() if train_mode else model.eval()
        for step in range(steps):
            batch = slice(16 * (step % 4), 16 * (step % 4 + 1))
            if zero_grad:
                optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
            total = total + loss if keep_total else total + loss.item()
            (loss / 2 if halve else loss).backward(retain_graph=retain)
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip)
            optimizer.step()
            scheduler.step()
        model.eval()
        for number in range(evals):
            scale = last_eval if number == evals - 1 else 1.0
            if no_grad_eval:
                with torch.no_grad():
                    model(x * scale)
            else:
                model(x * scale)
        model.load_state_dict(best)
        return observed.facts()
    finally:
        observed.remove()


def verdict(name, mutant, reference, status="ok", params=None):
    parts = operator_parts([name], [params or {}])
    return decide(
        parts,
        {"status": status, "device": "cpu", "seed": 0, "witness": mutant},
        {"status": "ok", "witness": reference},
    )


@pytest.fixture(scope="module")
def reference():
    return train()


def test_a_clean_loop_shows_none_of_the_bug_events(reference):
    from experiments.harness.probes import EVENTS

    assert {name: reference[name] for name in EVENTS if reference[name][0]} == {}
    assert reference["dropout_p"] == [0.2]
    assert reference["steps"] == 6 and reference["first_batch"] == 16
    assert reference["train_samples"] == 96 and reference["mode_modules"] == 1
    assert reference["optimizer"][0]["class"] == "SGD" and reference["optimizer"][0]["lr"] == 0.1
    assert reference["lr"] == [[1, 0.1], [3, 0.05], [5, 0.025]]  # the lr each step used
    assert reference["loss_call"]["name"] == "cross_entropy"
    assert reference["targets"]["n"] == 6 and reference["eval_outputs"]["n"] == 1


def test_the_same_loop_twice_records_the_same_facts(reference):
    assert train() == reference


def test_stale_gradients(reference):
    facts = train(zero_grad=False)
    assert facts["stale_grad"] == [5, 1]
    assert verdict("drop_zero_grad", facts, reference).state == CONFIRMED


def test_training_in_eval_mode_needs_a_module_whose_mode_matters(reference):
    facts = train(train_mode=False)
    assert facts["train_mode_off"][0] == 6
    assert verdict("eval_mode_before_training", facts, reference).state == CONFIRMED
    plain_reference = train(dropout=0.0)
    plain = train(dropout=0.0, train_mode=False)
    assert plain["mode_modules"] == 0 and plain["train_mode_off"][0] == 0
    found = verdict("eval_mode_before_training", plain, plain_reference)
    assert found.state == UNCONFIRMED and "no module whose behaviour" in found.text


def test_an_evaluation_with_a_graph(reference):
    facts = train(no_grad_eval=False)
    assert facts["eval_graph"][0] == 1
    assert verdict("drop_no_grad", facts, reference).state == CONFIRMED


def test_graphs_that_outlive_their_step(reference):
    kept = train(keep_total=True)
    assert kept["graph_kept"][0] == 5
    assert verdict("accumulate_loss_graph", kept, reference).state == CONFIRMED
    retained = train(retain=True)
    # ``loss`` is rebound only after the next forward (the last one the evaluation's): the
    # retained graph is alive then, and gone by the next backward.
    assert retained["retained_graph"][0] == 6 and retained["graph_kept"][0] == 0
    assert verdict("retain_graph_left_in", retained, reference).state == CONFIRMED


def test_a_scaled_learning_rate_and_other_targets(reference):
    scaled = train(lr=10.0)
    found = verdict("scale_lr", scaled, reference)
    assert found.state == CONFIRMED and "x100" in found.text
    noisy = train(labels=lambda y: (y + 1) % 3)
    assert noisy["targets"]["at"][0][1] != reference["targets"]["at"][0][1]
    assert verdict("label_noise", noisy, reference).state == CONFIRMED
    assert verdict("label_noise", reference, reference).state == UNCONFIRMED


def test_clipping_that_cuts_and_a_best_state_that_aliases_the_weights(reference):
    clipped = train(clip=1e-3)
    assert clipped["clip_calls"] == 6 and clipped["clip_active"] == 6
    assert clipped["clip_max"] == 1e-3 and clipped["clip_before_backward"][0] == 0
    assert verdict("drop_grad_clipping", reference, clipped).state == CONFIRMED
    loose = train(clip=1e6)
    assert loose["clip_active"] == 0
    found = verdict("drop_grad_clipping", reference, loose)
    assert found.state == UNCONFIRMED and "never cut a gradient" in found.text
    alias = train(restore_alias=True)
    assert alias["self_loads"][0] == 1 and reference["self_loads"][0] == 0
    assert verdict("best_state_without_copy", alias, reference).state == CONFIRMED


def test_the_probes_stream_their_facts_into_the_trace(tmp_path):
    trace = tmp_path / "trace.jsonl"
    train(zero_grad=False, trace=trace)
    records = [line for line in trace.read_text().splitlines() if '"witness"' in line]
    assert records and '"stale_grad": [' in records[-1]


def test_removing_the_probes_restores_torch():
    before = (nn.functional.dropout, torch.nn.utils.clip_grad_norm_, nn.Module.load_state_dict)
    observe.install().remove()
    after = (nn.functional.dropout, torch.nn.utils.clip_grad_norm_, nn.Module.load_state_dict)
    assert before == after


def test_an_evaluation_no_sample_kept_still_shows_in_the_checksum():
    reference = train(evals=10)
    other = train(evals=10, last_eval=2.0)  # the 10th evaluation: index 9, not sampled
    assert [i for i, _ in other["eval_inputs"]["at"]] == list(range(8))
    assert other["eval_inputs"]["at"] == reference["eval_inputs"]["at"]
    assert other["eval_inputs"]["chain"] != reference["eval_inputs"]["chain"]
    found = verdict("skip_val_normalization", other, reference)
    assert found.state == CONFIRMED and "between samples" in found.text


def test_a_clip_rescaling_gradients_in_place_does_not_clear_them(reference):
    clipped = train(clip=1e-3)
    assert clipped["stale_grad"][0] == 0  # zero_grad() every step
    stale = train(clip=1e-3, zero_grad=False)
    assert stale["stale_grad"][0] == 5
    assert verdict("drop_zero_grad", stale, clipped).state == CONFIRMED


def test_a_running_total_keeps_the_graph_of_a_scaled_loss(reference):
    halved = train(halve=True)
    kept = train(halve=True, keep_total=True)
    assert halved["graph_kept"][0] == 0 and kept["graph_kept"][0] == 5
    assert verdict("accumulate_loss_graph", kept, halved).state == CONFIRMED
