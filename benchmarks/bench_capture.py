"""What capturing a script's own numbers costs (experiments/capture), next to a step.

    python benchmarks/bench_capture.py [--repeats 30] [--lines 20000]

Per call, CPU time (``process_time``) of blocks of calls, the minimum over ``--repeats``
alternating blocks without and with the capture installed (a collector writing to a
trace in a temporary folder): ``SummaryWriter.add_scalar`` of a training loss (read and
dropped) and of a validation loss (kept: a ``metric`` record), ``wandb.log`` of a dict
in ``disabled`` mode, ``logging.info`` of a training line (to a NullHandler). Printed
lines cost nothing while the script runs: they are read from ``stdout.txt`` once it
ends, timed here per line over ``--lines`` lines of a GPT trainer's output. The fixed
cost of one run (install, then ``finish`` on an empty output) and the import time of each
library (a fresh interpreter that already imported torch, minimum of 3) come last: why
the patches wait for the script's own import. The reference is bench_hooks' step of
``regression_diabetes``' model.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from bench_hooks import pieces as step_pieces  # noqa: E402

from experiments import capture  # noqa: E402
from experiments.capture.lines import LineReader  # noqa: E402
from experiments.harness.writer import TraceWriter  # noqa: E402

BLOCK = 200
LIBRARIES = ("torch.utils.tensorboard", "tensorboardX", "wandb", "lightning")
GPT_LINES = (
    "iter {i}: loss 1.9123, time 30.52ms, mfu 5.01%",
    "iter {i}: loss 1.8871, time 30.11ms, mfu 5.02%",
    "step {i}: train loss 1.9100, val loss 2.0100",
)


def per_call(call: Callable[[int], object]) -> Callable[[], float]:
    def timer() -> float:
        start = time.process_time()
        for i in range(BLOCK):
            call(i)
        return (time.process_time() - start) / BLOCK

    return timer


def calls(folder: str) -> dict[str, Callable[[], float]]:
    timers: dict[str, Callable[[], float]] = {}
    logger = logging.getLogger("bench")
    logger.propagate = False
    logger.addHandler(logging.NullHandler())
    logger.setLevel(logging.INFO)
    timers["logging.info (training line)"] = per_call(
        lambda i: logger.info("iter %d: loss %.4f, time %.2fms", i, 1.9, 30.5)
    )
    if importlib.util.find_spec("tensorboard") is not None:
        from torch.utils.tensorboard import SummaryWriter

        board = SummaryWriter(os.path.join(folder, "tb"))
        loss = torch.tensor(1.9)
        timers["add_scalar (training loss)"] = per_call(
            lambda i: board.add_scalar("Loss/train", loss, i)
        )
        timers["add_scalar (validation loss, kept)"] = per_call(
            lambda i: board.add_scalar("Loss/val", loss, i)
        )
    if importlib.util.find_spec("wandb") is not None:
        os.environ["WANDB_MODE"] = "disabled"
        os.environ["WANDB_SILENT"] = "true"
        import wandb

        run = wandb.init(project="bench")
        timers["wandb.log (train + val dict, disabled mode)"] = per_call(
            lambda i: run.log({"train/loss": 1.9, "val/loss": 2.0, "epoch": i})
        )
    return timers


def line_cost(count: int) -> float:
    """CPU seconds per printed line read at the end of a run."""
    text = "\n".join(GPT_LINES[i % 3].format(i=i) for i in range(count))
    start = time.process_time()
    events = list(LineReader("stdout").read_text(text))
    spent = time.process_time() - start
    assert len(events) == count // 3
    return spent / count


def run_cost(folder: str, repeats: int) -> float:
    """CPU seconds of start + finish of one run's capture with an empty output."""
    best = float("inf")
    for k in range(repeats):
        run_dir = Path(folder) / f"run{k}"
        run_dir.mkdir()
        writer = TraceWriter(run_dir / "trace.jsonl")
        start = time.process_time()
        collector = capture.start(writer)
        collector.finish(run_dir)
        capture.stop(collector)
        best = min(best, time.process_time() - start)
        writer.close()
    return best


def import_seconds(module: str) -> float | None:
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return None
    code = (
        "import time, torch; t = time.perf_counter(); import " + module + "; "
        "print(time.perf_counter() - t)"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(3)
    ]
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--lines", type=int, default=20000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    step = step_pieces()["whole step"]
    step_s = min(step() for _ in range(args.repeats))
    with tempfile.TemporaryDirectory() as folder:
        timers = calls(folder)
        plain: dict[str, list[float]] = {name: [] for name in timers}
        captured: dict[str, list[float]] = {name: [] for name in timers}
        writer = TraceWriter(Path(folder) / "trace.jsonl")
        for _ in range(args.repeats):
            for name, timer in timers.items():
                plain[name].append(timer())
            collector = capture.start(writer)
            for name, timer in timers.items():
                captured[name].append(timer())
            capture.stop(collector)  # the wrappers stay, passing straight through
        writer.close()
        fixed = run_cost(folder, args.repeats)
    print(f"Reference: one step of regression_diabetes' model, {step_s * 1e6:.0f} us CPU.\n")
    print("| call | without capture | with capture | capture | of a 1 ms step |")
    print("| --- | --- | --- | --- | --- |")
    for name in timers:
        bare, with_capture = min(plain[name]), min(captured[name])
        extra = with_capture - bare
        print(
            f"| {name} | {bare * 1e6:.1f} us | {with_capture * 1e6:.1f} us | "
            f"{extra * 1e6:+.1f} us | {extra / 1e-3:.2%} |"
        )
    per_line = line_cost(args.lines)
    print(
        f"| a printed line, read once the run ends | 0 | {per_line * 1e6:.1f} us | "
        f"{per_line * 1e6:+.1f} us | {per_line / 1e-3:.2%} |"
    )
    print(
        f"\nFixed cost per run (install, then finish on an empty output): {fixed * 1e3:.2f} ms CPU."
    )
    print("\n| library | import time after torch |\n| --- | --- |")
    for module in LIBRARIES:
        seconds = import_seconds(module)
        print(f"| {module} | {'not installed' if seconds is None else f'{seconds:.2f} s'} |")
    print(
        f"\nCPU time, minimum over {args.repeats} alternating blocks of {BLOCK} calls "
        f"(`python benchmarks/bench_capture.py --repeats {args.repeats} --lines {args.lines}`)."
    )


if __name__ == "__main__":
    main()
