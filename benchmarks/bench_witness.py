"""What the witness probes cost per optimizer step (issue 28).

    python benchmarks/bench_witness.py [--repeats 7] [--loops mlp_digits,cnn_digits,...]

Each reference loop runs in this warm process with the telemetry installed, alternating
without the witness probes (``Telemetry(witness=False)``: the telemetry of harness 8) and
with them (harness 9); CPU time of the whole script (``process_time``: other processes on
the shared machine count less), median over repeats, divided by the loop's optimizer
steps. The target (DESIGN.md, issue 28): at most 5% more per step on steps of 1 ms or
more. Prints a markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_harness import LOOPS, run_in_process  # noqa: E402


def hooked(loop: str, argv: list[str], witness: bool) -> tuple[float, int]:
    from experiments.harness.hooks import Telemetry
    from experiments.harness.writer import TraceWriter

    with tempfile.TemporaryDirectory() as folder:
        writer = TraceWriter(Path(folder) / "trace.jsonl")
        telemetry = Telemetry(writer, witness=witness)
        telemetry.install()
        try:
            seconds = run_in_process(loop, argv, time.process_time)
        finally:
            telemetry.finish()
            telemetry.witness_facts()  # the end record's cost is the probes' too
            telemetry.remove()
            writer.close()
    return seconds, telemetry.steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--epochs", type=int, default=None, help="override every loop's")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # as the harness runs them
    argv = ["--seed", "0", *(["--epochs", str(args.epochs)] if args.epochs else [])]
    lines = [
        "| loop | steps | CPU per step, telemetry (harness 8) | with witness probes "
        "| probes per step | overhead |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for loop in args.loops.split(","):
        hooked(loop, argv, True)  # warm caches
        without, with_probes, steps = [], [], 1
        for _ in range(args.repeats):
            seconds, steps = hooked(loop, argv, False)
            without.append(seconds)
            seconds, steps = hooked(loop, argv, True)
            with_probes.append(seconds)
        b, w = statistics.median(without), statistics.median(with_probes)
        lines.append(
            f"| {loop} | {steps} | {b / steps * 1e6:.0f} us | {w / steps * 1e6:.0f} us | "
            f"{(w - b) / steps * 1e6:+.1f} us | {w / b - 1:+.1%} |"
        )
    lines.append(
        f"\nCPU time (process_time) of the whole script in one warm process, one thread, "
        f"medians of {args.repeats} alternating runs, divided by its optimizer steps; "
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}."
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
