"""Planning a sweep and linting, against generated training scripts of growing size.

Usage: python benchmarks/bench_scale.py [--lines 2500 10000] [--skip-plan] [--skip-lint]

Each script repeats one block (a model, a data loader, a training and an evaluation
function, ~50 lines) with fresh names until it has the asked number of lines, so every
operator finds sites in every block. Planning is ``experiments.sweep.build`` with every
operator and variant (what ``trainwreck catalog`` plans); linting is ``trainwreck lint``'s
detector on the script. Both should grow linearly with the script: compare the
seconds per 1000 lines across sizes. Peak memory is the process's (ru_maxrss).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEADER = """import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

"""
BLOCK = """

class Net{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


def loader{i}(batch_size=32):
    x = torch.randn(256, 64)
    y = torch.randint(0, 10, (256,))
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=True)


def train{i}(model, epochs=1, lr=0.01):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for x, y in loader{i}():
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    return loss.item()


def evaluate{i}(model):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader{i}(batch_size=64):
            correct += (model(x).argmax(dim=1) == y).sum().item()
    return correct / 256
"""
FOOTER = """

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    model = Net0()
    train0(model, args.epochs)
    print(evaluate0(model))
"""


def generate(lines: int) -> str:
    parts, count, index = [HEADER], HEADER.count("\n") + FOOTER.count("\n"), 0
    while count < lines:
        block = BLOCK.format(i=index)
        parts.append(block)
        count += block.count("\n")
        index += 1
    parts.append(FOOTER)
    return "".join(parts)


def plan(path: Path) -> tuple[float, int]:
    from experiments import sweep as sweeps

    loop = sweeps.Loop(script=str(path), cwd=str(path.parent))
    started = time.perf_counter()
    specs = sweeps.build(sweeps.Sweep(loops=[loop], operators=[sweeps.VARIANTS]))
    return time.perf_counter() - started, len(specs)


def lint(path: Path) -> tuple[float, int]:
    from experiments.bench.api import ScriptInput
    from experiments.bench.lint import TrainwreckLint

    script = ScriptInput(path.read_text(encoding="utf-8"), path.name)
    started = time.perf_counter()
    findings = TrainwreckLint().check_source(script)
    return time.perf_counter() - started, len(findings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[2500, 10000])
    parser.add_argument("--skip-plan", action="store_true")
    parser.add_argument("--skip-lint", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for lines in args.lines:
            path = Path(folder) / f"scale_{lines}.py"
            path.write_text(generate(lines), encoding="utf-8")
            actual = path.read_text(encoding="utf-8").count("\n")
            if not args.skip_plan:
                seconds, runs = plan(path)
                print(
                    f"plan  {actual:6d} lines: {seconds:7.2f} s ({1000 * seconds / actual:.3f} s "
                    f"per 1000 lines), {runs} runs, peak RSS "
                    f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB",
                    flush=True,
                )
            if not args.skip_lint:
                seconds, findings = lint(path)
                print(
                    f"lint  {actual:6d} lines: {seconds:7.2f} s ({1000 * seconds / actual:.3f} s "
                    f"per 1000 lines), {findings} findings",
                    flush=True,
                )


if __name__ == "__main__":
    main()
