"""The witness probes on parameters (experiments/harness/probe_params.py): tensors no module
holds, updates written by hand, units a zero initialisation left identical. Each case was a
disagreement between the witness and the hand labels of the public corpus (issue 28,
docs/benchmarks.md): raw-tensor and hand-written loops as the corpus's tutorials write them."""

from __future__ import annotations

import torch
from torch import nn

from experiments.harness import observe
from experiments.witness import CONFIRMED, STILLBORN, UNCONFIRMED, decide, operator_parts


def _raw_loop(*, zero=(True, True), update=(True, True), lr=1e-3, steps=12, retain=False):
    """Two weights trained by hand, no module and no optimizer (the autograd tutorial's
    loop): ``zero[i]``/``update[i]`` clear and update weight i."""
    observed = observe.install()
    try:
        g = torch.Generator().manual_seed(0)
        x, y = torch.randn(16, 5, generator=g), torch.randn(16, 2, generator=g)
        w1 = torch.randn(5, 8, generator=g, requires_grad=True)
        w2 = torch.randn(8, 2, generator=g, requires_grad=True)
        for _ in range(steps):
            loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
            loss.backward(retain_graph=retain)
            with torch.no_grad():
                for weight, moves, clears in zip((w1, w2), update, zero):
                    if moves:
                        weight -= lr * weight.grad
                    if clears:
                        weight.grad.zero_()
        return observed.facts()
    finally:
        observed.remove()


def _module_loop(*, update=True, lr=1e-2, steps=12):
    """A module updated by hand through ``.data`` (the nn tutorial's loop)."""
    observed = observe.install()
    try:
        torch.manual_seed(0)
        x, y = torch.randn(16, 5), torch.randn(16, 2)
        model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
        for _ in range(steps):
            loss = nn.functional.mse_loss(model(x), y)
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for param in model.parameters():
                    if update:
                        param.data -= lr * param.grad
        return observed.facts()
    finally:
        observed.remove()


def _decide(name: str, mutant: dict, reference: dict, status: str = "ok", **params):
    run = {"status": status, "device": "cpu", "seed": 0, "witness": mutant}
    return decide(operator_parts([name], [params]), run, {"status": "ok", "witness": reference})


def test_stale_gradients_of_tensors_no_module_holds():
    reference = _raw_loop()
    assert reference["stale_grad"][0] == 0
    for dropped in ((False, True), (True, False)):  # either weight's grad.zero_() removed
        mutant = _raw_loop(zero=dropped)
        assert mutant["stale_grad"][0] > 0
        assert _decide("drop_zero_grad", mutant, reference).state == CONFIRMED


def test_a_hand_written_update_removed_or_rescaled():
    reference = _raw_loop()
    assert reference["manual_updates"] > 0 and reference["steps"] == 0
    assert abs(reference["manual_lr"] - 1e-3) < 1e-6  # p -= lr * grad: exactly the lr
    frozen = _raw_loop(update=(True, False))  # one weight's update removed
    assert frozen["manual_updates"] < reference["manual_updates"]
    assert _decide("drop_optimizer_step", frozen, reference).state == CONFIRMED
    scaled = _raw_loop(lr=1e-1)
    verdict = _decide("scale_lr", scaled, reference, factor=100.0)
    assert verdict.state == CONFIRMED and "x100" in verdict.text
    # The module tutorial's ``param.data -= lr * param.grad`` moves no version counter.
    assert _module_loop()["manual_updates"] > 0
    verdict = _decide("drop_optimizer_step", _module_loop(update=False), _module_loop())
    assert verdict.state == CONFIRMED


def test_a_retained_graph_alive_while_the_next_one_is_built_without_a_module():
    reference = _raw_loop()
    flat = _raw_loop(retain=True)  # `loss = ...` drops it only after the next forward
    assert reference["retained_graph"][0] == 0 and flat["retained_graph"][0] > 0
    assert _decide("retain_graph_left_in", flat, reference).state == CONFIRMED

    def step(w, x):  # the graph dies with the frame, before any new graph: equivalent
        loss = (x * w).pow(2).sum()
        loss.backward(retain_graph=True)
        with torch.no_grad():
            w -= 0.01 * w.grad
            w.grad.zero_()
        return loss.item()

    observed = observe.install()
    try:
        w = torch.ones(3, requires_grad=True)
        for _ in range(5):
            step(w, torch.randn(3))
        facts = observed.facts()
    finally:
        observed.remove()
    assert facts["retained_graph"][0] == 0


def test_an_optimizer_loop_counts_no_hand_written_update():
    observed = observe.install()
    try:
        torch.manual_seed(0)
        model = nn.Linear(5, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            optimizer.zero_grad()
            model(torch.randn(4, 5)).sum().backward()
            optimizer.step()
        facts = observed.facts()
    finally:
        observed.remove()
    assert facts["manual_updates"] == 0 and facts["manual_lr"] is None


def _zeroed(model: nn.Module, loss_fn, targets, *, zero: bool, steps: int = 4) -> dict:
    observed = observe.install()
    try:
        torch.manual_seed(0)
        x = torch.randn(32, 4)
        if zero:
            for param in model.parameters():
                nn.init.zeros_(param)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(steps):
            optimizer.zero_grad()
            loss_fn(model(x), targets).backward()
            optimizer.step()
        return observed.facts()
    finally:
        observed.remove()


def test_zero_init_is_the_bug_only_where_units_stay_tied():
    torch.manual_seed(1)
    classes = torch.randint(0, 3, (32,))

    def mlp():
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))

    reference = _zeroed(mlp(), nn.functional.cross_entropy, classes, zero=False)
    assert reference["tied_units"] == 0
    hidden = _zeroed(mlp(), nn.functional.cross_entropy, classes, zero=True)
    assert hidden["tied_units"] >= 1
    assert _decide("zero_init", hidden, reference).state == CONFIRMED
    # One layer: a single output row has no symmetry, and softmax regression's rows are
    # pulled apart by their classes' gradients.
    regression = torch.randn(32, 1)
    for model, loss_fn, targets in (
        (nn.Linear(4, 1), nn.functional.mse_loss, regression),
        (nn.Linear(4, 3), nn.functional.cross_entropy, classes),
    ):
        single = _zeroed(model, loss_fn, targets, zero=True)
        assert single["zero_params"] >= 1 and single["tied_units"] == 0
        plain = _zeroed(type(model)(4, model.out_features), loss_fn, targets, zero=False)
        assert _decide("zero_init", single, plain).state == UNCONFIRMED


def test_none_gradients_read_by_a_hand_written_update_are_the_bug_of_both_orders():
    reference = _module_loop()
    crash = {
        "status": "crash",
        "device": "cpu",
        "seed": 0,
        "exc_type": "TypeError",
        "exc_message": "unsupported operand type(s) for *: 'float' and 'NoneType'",
        "witness": reference,
    }
    for name in ("zero_grad_after_backward", "step_before_backward"):
        verdict = decide(
            operator_parts([name], [{}]), crash, {"status": "ok", "witness": reference}
        )
        assert verdict.state == CONFIRMED and verdict.reason == "declared_crash"
    # An undeclared crash before the witness stays a broken rewrite.
    other = {**crash, "exc_type": "NameError", "exc_message": "name 'opt' is not defined"}
    verdict = decide(operator_parts(["step_before_backward"], [{}]), other, {"witness": reference})
    assert verdict.state == STILLBORN
