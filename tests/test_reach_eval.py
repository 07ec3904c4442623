"""Reach probes that count hits during evaluation (``reach.EvalHits``): a changed line that
runs with autograd off outside any module forward went into a number the script reports;
one inside a forward, or in the training step, did not."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.harness import reach
from experiments.harness.hooks import Telemetry
from experiments.harness.writer import TraceWriter

# A tiny loop: a model whose forward scales its output, a data function that training
# and evaluation share, a @torch.no_grad() evaluation and a training step; each line
# ending in "# <name>" is one a mutant changes below ("* 1.0" -> "* 2.0").
SCRIPT = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 1)

    def forward(self, x):
        return self.lin(x) * 1.0  # forward


def batch(n):
    return torch.ones(n, 2) * 1.0  # data


@torch.no_grad()
def evaluate(model):
    model.eval()
    x = batch(4) * 1.0  # eval
    score = model(x).mean().item()
    model.train()
    return score


def evaluate_inference(model):
    with torch.inference_mode():
        return model(batch(4)).mean().item() * 1.0  # inference


def evaluate_with_grad(model):
    model.eval()
    return model(batch(4)).mean().item() * 1.0  # eval_with_grad


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(batch(4)).pow(2).mean() * 1.0  # train
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.0)  # manual_update
print(evaluate(model), evaluate_inference(model), evaluate_with_grad(model))
"""


def _mutant(name: str) -> str:
    lines = SCRIPT.splitlines(keepends=True)
    changed = [
        line.replace("1.0", "2.0") if line.rstrip().endswith(f"# {name}") else line
        for line in lines
    ]
    assert changed != lines
    return "".join(changed)


def _run(tmp_path: Path, mutated: str, *, watched: bool = True) -> dict:
    """The mutant run in this process under the telemetry, as the harness runs it."""
    where = reach.regions(SCRIPT, mutated)
    counters, evaluating = reach.install(len(where))
    code, probed = reach.compile_probed(mutated, "t.py", where)
    assert probed == set(range(len(where)))
    writer = TraceWriter(tmp_path / "trace.jsonl")
    telemetry = Telemetry(writer)
    telemetry.install()
    if watched:
        evaluating.forwards = telemetry.forwards
    try:
        exec(code, {"__name__": "__main__"})
    finally:
        evaluating.forwards = None
        telemetry.remove()
        writer.close()
    eval_counts = list(evaluating.counts) if watched else None
    return {**reach.summary(counters), **reach.eval_summary(counters, eval_counts)}


@pytest.mark.parametrize(
    ("name", "hits", "eval_hits"),
    [
        ("eval", 1, 1),  # a line of a @torch.no_grad() evaluation function
        ("inference", 1, 1),  # under torch.inference_mode()
        ("data", 6, 2),  # shared: 3 training batches; 2 evaluations without autograd, 1 with
        ("forward", 6, 0),  # inside the model's forward, also when evaluating
        ("train", 3, 0),  # the training step (autograd on)
        ("eval_with_grad", 1, 0),  # model.eval() without no_grad: not seen (docs/truth.md)
        ("manual_update", 6, 6),  # a no_grad update outside a forward counts (the safe side)
    ],
)
def test_eval_hits_count_changed_lines_run_while_evaluating(tmp_path, name, hits, eval_hits):
    assert _run(tmp_path, _mutant(name)) == {
        "reached": True,
        "reach_hits": hits,
        "reach_eval_hits": eval_hits,
    }


def test_eval_hits_are_unknown_without_the_telemetry(tmp_path):
    """Without the telemetry no forward can be told apart: unknown, not zero."""
    found = _run(tmp_path, _mutant("eval"), watched=False)
    assert found == {"reached": True, "reach_hits": 1, "reach_eval_hits": None}


def test_eval_summary_counts_probed_regions_only():
    assert reach.eval_summary([3, None], [2, 5]) == {"reach_eval_hits": 2}
    assert reach.eval_summary([None], [4]) == {"reach_eval_hits": None}
    assert reach.eval_summary([3], None) == {"reach_eval_hits": None}
    assert reach.eval_summary(None, None) == {"reach_eval_hits": None}


def test_counting_reach_alone_needs_no_torch():
    """``trainwreck test`` asks only whether the lines ran: its processes import no torch
    for the probes' autograd check."""
    import subprocess
    import sys

    program = (
        "import sys\n"
        "from experiments.harness import reach\n"
        "counters = reach.install_counters(1)\n"
        "code, _ = reach.compile_probed('x = 1\\n', 't.py', [{'start': 1, 'end': 1}])\n"
        "exec(code, {})\n"
        "print(counters, 'torch' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=root, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["[1]", "False"]
