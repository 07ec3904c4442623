"""The telemetry hooks in this process: training/eval forwards (forwards.py) and the
trace writer's template path (writer.py), against what the prehook design counted."""

from __future__ import annotations

import gc
import json
import math
import weakref
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from experiments.harness.hooks import BACKWARD, STEP, Telemetry
from experiments.harness.writer import Layout, TraceWriter


@pytest.fixture
def telemetry(tmp_path: Path):
    writer = TraceWriter(tmp_path / "trace.jsonl")
    hooks = Telemetry(writer)
    hooks.install()
    try:
        yield hooks
    finally:
        hooks.remove()
        writer.close()


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


def _forwards(telemetry: Telemetry) -> dict[str, int]:
    telemetry.forwards.settle()
    counters = telemetry.counters()
    return {key: counters[key] for key in counters if "forwards" in key}


def _counts(train: int, train_eval: int = 0, evals: int = 0, evals_grad: int = 0):
    return {
        "train_forwards": train,
        "train_forwards_eval_mode": train_eval,
        "eval_forwards": evals,
        "eval_forwards_grad": evals_grad,
    }


def test_training_and_eval_forwards(telemetry: Telemetry) -> None:
    model, x = _model(), torch.randn(5, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), torch.zeros(5, 1)).backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        model(x)
    model(x)  # an eval forward that builds a graph for nothing
    optimizer.step()
    model(x).sum().backward()  # a training forward in eval mode
    assert _forwards(telemetry) == _counts(4, train_eval=1, evals=2, evals_grad=1)
    assert telemetry.forwards._pending == []


def test_step_before_backward_counts_as_both(telemetry: Telemetry) -> None:
    """Settled as an eval with grad at the step, then reached by the backward: the old
    prehook counted it in both, and the signature's features were computed so."""
    model, x = _model(), torch.randn(5, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(x).sum()
    optimizer.step()
    loss.backward()
    assert _forwards(telemetry) == _counts(1, evals=1, evals_grad=1)


def test_a_deep_graph_and_two_top_level_modules(telemetry: Telemetry) -> None:
    encoder, decoder = _model(), nn.Linear(1, 1)
    hidden = encoder(torch.randn(5, 4))
    out = decoder(hidden)
    for _ in range(300):  # far from the loss: the walk must still find both outputs
        out = out * 1.0001
    out.sum().backward()
    assert _forwards(telemetry) == _counts(2)


def test_a_module_returning_its_input_shares_the_node(telemetry: Telemetry) -> None:
    model, identity = _model(), nn.Identity()
    out = identity(model(torch.randn(5, 4)))
    out.sum().backward()
    assert _forwards(telemetry) == _counts(2)


def test_autograd_grad_counts_only_outputs_on_the_path(telemetry: Telemetry) -> None:
    model = _model()
    z = torch.randn(3, requires_grad=True)
    out = model(torch.randn(5, 4))
    (grad,) = torch.autograd.grad(out.sum() + (z * 2).sum(), z)  # never runs model's nodes
    assert torch.equal(grad, torch.full((3,), 2.0))
    assert _forwards(telemetry)["train_forwards"] == 0
    out = model(torch.randn(5, 4))
    torch.autograd.grad(out.sum(), list(model.parameters()))
    assert _forwards(telemetry) == _counts(1, evals=1, evals_grad=1)


def test_backward_with_inputs_is_not_taken_on_reach_alone(telemetry: Telemetry) -> None:
    model = _model()
    z = torch.randn(3, requires_grad=True)
    out = model(torch.randn(5, 4))
    (out.sum() + (z * 2).sum()).backward(inputs=[z])
    assert _forwards(telemetry) == _counts(0, evals=1, evals_grad=1)


def test_forward_recomputed_inside_a_backward(telemetry: Telemetry) -> None:
    model, inner = _model(), nn.Linear(1, 1)
    x = torch.randn(5, 4)
    out = checkpoint(lambda h: inner(h), model(x), use_reentrant=True)
    out.sum().backward()
    counts = _forwards(telemetry)
    # model and the checkpointed inner forward (run again inside the backward) trained;
    # the first, no-grad run of inner is an eval forward.
    assert counts["train_forwards"] == 2
    assert counts["eval_forwards_grad"] == 0


def test_no_optimizer_keeps_the_waiting_list_short(telemetry: Telemetry) -> None:
    model, x = _model(), torch.randn(5, 4)
    for _ in range(50):  # a hand-written update: no optimizer step ever settles
        model(x).sum().backward()
        model(x)  # and a wasted eval graph each time
        with torch.no_grad():
            for parameter in model.parameters():
                parameter -= 0.01 * parameter.grad
                parameter.grad = None
    assert len(telemetry.forwards._pending) == 50  # only the never-reached evals wait
    assert _forwards(telemetry) == _counts(50, evals=50, evals_grad=50)


def test_an_eval_graph_is_not_kept_alive(telemetry: Telemetry) -> None:
    """Only the output node's sequence number waits, not the node: the graph (and the
    activations it saved) goes when the script drops the output, as without hooks."""
    saved: list[weakref.ref] = []

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = nn.Linear(4, 8), nn.Linear(8, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            hidden = torch.relu(self.first(x))  # saved by the graph for the backward
            saved.append(weakref.ref(hidden))
            return self.second(hidden)

    out = Net()(torch.randn(5, 4))
    assert saved[0]() is not None
    del out
    gc.collect()
    assert saved[0]() is None
    assert len(telemetry.forwards._pending) == 1  # still waiting to be settled


# -- writer ------------------------------------------------------------------------------


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_template_lines_equal_json_records(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(path, t0=0.0)
    writer.add(STEP, 1, 0.25, 1e-3, 12.5, None, 0.000123456789)
    writer.record("report", epoch=1, val_loss=0.5, note="a, b")
    writer.add(BACKWARD, 0, 1.0 / 3.0, 7)
    writer.add(Layout("custom", "i", "flag", "name"), 3, True, "x, y")  # the slow path
    writer.close()
    records = _lines(path)
    assert [r["kind"] for r in records] == ["step", "report", "backward", "custom"]
    for record in records:
        assert record.pop("t") >= 0
    assert records[0] == {
        "kind": "step",
        "i": 1,
        "grad_norm": 0.25,
        "update_ratio": 1e-3,
        "rss_mb": 12.5,
        "cuda_mb": None,
        "step_time": 0.000123456789,
    }
    assert records[2] == {"kind": "backward", "i": 0, "loss": 1.0 / 3.0, "step": 7}
    assert records[3] == {"kind": "custom", "i": 3, "flag": True, "name": "x, y"}
    for line in path.read_text().splitlines():  # byte for byte what json.dumps writes
        assert line == json.dumps(json.loads(line))


def test_non_finite_losses_are_strings_and_remembered(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(path)
    writer.add(BACKWARD, 0, 0.5, 0)
    writer.add(BACKWARD, 1, math.inf, 0)
    writer.add(BACKWARD, 2, math.nan, 1)
    writer.close()
    losses = [r["loss"] for r in _lines(path)]
    assert losses == [0.5, "inf", "nan"]
    assert writer.first_nonfinite == ("backward", 1)


def test_tensor_values_are_read_at_the_flush(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(path)
    writer.add(BACKWARD, 0, torch.tensor(2.5), 0)
    writer.has_tensors = True
    writer.record("report", val_loss=torch.tensor(1.5))
    writer.close()
    records = _lines(path)
    assert records[0]["loss"] == 2.5
    assert records[1]["val_loss"] == 1.5
