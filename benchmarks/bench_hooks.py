"""What each telemetry hook costs per call, next to what a bare training step costs.

    python benchmarks/bench_hooks.py [--repeats 40]

One step of ``regression_diabetes``' model (MLP 10 -> 32 -> 1 with dropout, ``MSELoss``,
SGD with momentum, batch 32), timed piece by piece in this process without and with the
hooks installed: the forward (four module calls, one of them top-level), the loss module,
``backward()``, ``optimizer.step()`` (every 20th step sampled, as in a run) and the whole
step with ``zero_grad`` and ``loss.item()``. CPU time (``process_time``) of blocks of 60
calls, the minimum over ``--repeats`` alternating blocks: on a machine shared with other
work the minimum is the cost with the least interference. The writer's share is inside
the calls that queue records (a flush every 256 records, amortised).

Then a reach probe per hit (``experiments/harness/reach.py``): a statement run in a loop
with its probe and without, the difference per execution: the counter alone (the probe
before issue 23's evaluation counter), and the whole probe with autograd on (training),
off outside a module forward (counted as evaluation) and off inside one (not counted).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from experiments.harness.hooks import Telemetry  # noqa: E402
from experiments.harness.writer import TraceWriter  # noqa: E402

BLOCK = 60


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(10, 32)
        self.dropout = nn.Dropout(0.1)
        self.out = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(torch.relu(self.hidden(x))))


def pieces() -> dict[str, Callable[[], float]]:
    """Timers of one block each, in CPU seconds per call."""
    torch.manual_seed(0)
    model, criterion = Regressor(), nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, weight_decay=1e-3)
    x, y = torch.randn(32, 10), torch.randn(32, 1)

    def forward() -> float:
        start = time.process_time()
        for _ in range(BLOCK):
            model(x)
        return (time.process_time() - start) / BLOCK

    def loss() -> float:
        prediction = model(x).detach()
        start = time.process_time()
        for _ in range(BLOCK):
            criterion(prediction, y)
        return (time.process_time() - start) / BLOCK

    def backward() -> float:
        total = 0.0
        for _ in range(BLOCK):
            value = criterion(model(x), y)
            start = time.process_time()
            value.backward()
            total += time.process_time() - start
        return total / BLOCK

    def step() -> float:
        criterion(model(x), y).backward()
        start = time.process_time()
        for _ in range(BLOCK):
            optimizer.step()
        return (time.process_time() - start) / BLOCK

    def whole() -> float:
        start = time.process_time()
        for _ in range(BLOCK):
            optimizer.zero_grad()
            value = criterion(model(x), y)
            value.backward()
            optimizer.step()
            value.item()
        return (time.process_time() - start) / BLOCK

    # The forward last: its outputs, never backpropagated, would wait into the next piece.
    return {
        "whole step": whole,
        "optimizer.step()": step,
        "backward()": backward,
        "loss module (MSELoss)": loss,
        "forward (4 module calls, 1 top-level)": forward,
    }


PROBE_BLOCK = 20000
PROBE_SOURCE = "def run(n):\n    for _ in range(n):\n        x = 1\n"
COUNTER_ONLY = (
    "def run(n):\n    for _ in range(n):\n        __trainwreck_reach__[0] += 1\n        x = 1\n"
)


def probe_hits(repeats: int) -> list[str]:
    """Nanoseconds per probe hit over the unprobed statement, minimum over ``repeats``."""
    from experiments.harness import reach
    from experiments.harness.forwards import Forwards

    def timer(source: str, probed: bool = False) -> Callable[[], float]:
        if probed:
            code, _ = reach.compile_probed(source, "probe.py", [{"start": 3, "end": 3}])
        else:
            code = compile(source, "probe.py", "exec")
        namespace: dict = {}
        exec(code, namespace)
        run = namespace["run"]

        def timed() -> float:
            start = time.process_time()
            run(PROBE_BLOCK)
            return (time.process_time() - start) / PROBE_BLOCK

        return timed

    _counters, evaluating = reach.install(1)
    forwards = Forwards()
    evaluating.forwards = forwards
    plain, counter, probe = timer(PROBE_SOURCE), timer(COUNTER_ONLY), timer(PROBE_SOURCE, True)

    def inside_forward() -> float:
        forwards._depth = 1
        try:
            return probe()
        finally:
            forwards._depth = 0

    def without_grad(measure: Callable[[], float]) -> Callable[[], float]:
        def timed() -> float:
            with torch.no_grad():
                return measure()

        return timed

    cases = {
        "counter alone (the probe before the evaluation counter)": counter,
        "probe, autograd on (training)": probe,
        "probe, autograd off outside a forward (counted as evaluation)": without_grad(probe),
        "probe, autograd off inside a forward (checked, not counted)": without_grad(inside_forward),
    }
    base = min(plain() for _ in range(repeats))
    lines = ["| probe hit | per hit |", "| --- | --- |"]
    for name, measure in cases.items():
        lines.append(f"| {name} | {(min(measure() for _ in range(repeats)) - base) * 1e9:.0f} ns |")
    hits = evaluating.counts[0]
    assert hits > 0, "the evaluation counter never counted"
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    timers = pieces()
    plain: dict[str, list[float]] = {name: [] for name in timers}
    hooked: dict[str, list[float]] = {name: [] for name in timers}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.repeats):
            for name, timer in timers.items():
                plain[name].append(timer())
            writer = TraceWriter(Path(folder) / "trace.jsonl")
            telemetry = Telemetry(writer)
            telemetry.install()
            try:
                for name, timer in timers.items():
                    telemetry.forwards.settle()  # each piece starts with nothing waiting
                    hooked[name].append(timer())
            finally:
                telemetry.finish()
                telemetry.remove()
                writer.close()
    print("| piece of one step | bare | with hooks | hooks |")
    print("| --- | --- | --- | --- |")
    for name in timers:
        bare, with_hooks = min(plain[name]), min(hooked[name])
        print(
            f"| {name} | {bare * 1e6:.1f} us | {with_hooks * 1e6:.1f} us | "
            f"{(with_hooks - bare) * 1e6:+.1f} us ({with_hooks / bare - 1:+.0%}) |"
        )
    print(
        f"\nCPU time, minimum over {args.repeats} alternating blocks of {BLOCK} calls "
        f"(`python benchmarks/bench_hooks.py --repeats {args.repeats}`)."
    )
    print("\n" + "\n".join(probe_hits(args.repeats)))
    print(
        f"\nCPU time per execution of a probed statement less the plain statement's, minimum "
        f"over {args.repeats} blocks of {PROBE_BLOCK}."
    )


if __name__ == "__main__":
    main()
