"""Time each reference loop's default budget on one CPU thread, imports excluded.

Every loop is imported and run once for one epoch first (that pays the imports, the
dataset load and torch's lazy first-optimizer imports), then its default budget is timed
``--repeats`` times in this process. Wall time depends on what else the machine runs, so
CPU time (``time.process_time``; one thread, so it is the time the run would take alone)
is reported next to it and judged against the budget.

``--planted-bugs`` also runs, per loop, the mutants of the bugs the issue names (first site
of each operator, seed 0, default budget) and tabulates their final train loss and val
metric next to the unmutated loop's: the symptoms must show within the default budget.

    python benchmarks/bench_loops.py [--repeats 3] [--loops mlp_digits char_lm] [--planted-bugs]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from experiments import telemetry
from experiments.loops import loop_names, mutant_main

LOOPS = loop_names()
BUDGET_S = {"char_lm": 8.0}  # every other loop: DEFAULT_BUDGET_S
DEFAULT_BUDGET_S = 3.0
PLANTED_BUGS = ("drop_zero_grad", "scale_lr", "eval_mode_before_training", "shuffle_labels")
LOOPS_DIR = Path(__file__).resolve().parent.parent / "reference_loops"


@dataclass
class Timing:
    loop: str
    epochs: int
    wall_s: list[float]
    cpu_s: list[float]
    final: dict[str, float]

    @property
    def budget_s(self) -> float:
        return BUDGET_S.get(self.loop, DEFAULT_BUDGET_S)


def run_quietly(
    loop: str, argv: list[str], main: Callable[[list[str]], None] | None = None
) -> tuple[float, float, list[dict]]:
    reports: list[dict] = []
    telemetry.set_sink(reports.append)
    main = main or importlib.import_module(f"reference_loops.{loop}").main
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            wall, cpu = time.perf_counter(), time.process_time()
            main(argv)
            return time.perf_counter() - wall, time.process_time() - cpu, reports
    finally:
        telemetry.set_sink(None)


def time_loop(loop: str, repeats: int) -> Timing:
    run_quietly(loop, ["--epochs", "1"])  # warm-up: imports, data, lazy torch modules
    walls, cpus, reports = [], [], []
    for _ in range(repeats):
        wall, cpu, reports = run_quietly(loop, ["--seed", "0"])
        walls.append(wall)
        cpus.append(cpu)
    epochs = [r for r in reports if "epoch" in r]
    return Timing(loop, len(epochs), walls, cpus, epochs[-1])


def final_values(loop: str, main: Callable[[list[str]], None] | None) -> str:
    if main is None:
        return "no site"
    try:
        _, _, reports = run_quietly(loop, ["--seed", "0"], main)
    except Exception as error:  # a crashing mutant is a result
        return f"crash ({type(error).__name__})"
    final = [r for r in reports if "epoch" in r][-1]
    return f"{final['train_loss']:.3f} / {final['val_metric']:.3f}"


def planted_bugs_table(loops: list[str]) -> str:
    lines = [
        "| loop | unmutated | " + " | ".join(PLANTED_BUGS) + " |",
        "|---|---|" + "---|" * len(PLANTED_BUGS),
    ]
    for loop in loops:
        cells = [final_values(loop, importlib.import_module(f"reference_loops.{loop}").main)]
        cells += [final_values(loop, mutant_main(loop, operator)) for operator in PLANTED_BUGS]
        lines.append(f"| {loop} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{cpu_model()}, {os.cpu_count()} cores "
        f"(load average {load}), Python {platform.python_version()}, torch {torch.__version__}"
    )


def table(timings: list[Timing]) -> str:
    lines = [
        "| loop | epochs | CPU s (median) | wall s (median) | budget s | within | "
        "final val loss | final val metric |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in timings:
        cpu = statistics.median(t.cpu_s)
        lines.append(
            f"| {t.loop} | {t.epochs} | {cpu:.2f} | {statistics.median(t.wall_s):.2f} | "
            f"{t.budget_s:.0f} | {'yes' if cpu <= t.budget_s else 'NO'} | "
            f"{t.final['val_loss']:.3f} | {t.final['val_metric']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loops", nargs="+", default=list(LOOPS), choices=LOOPS)
    parser.add_argument("--planted-bugs", action="store_true", help="also tabulate mutants")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    timings = [time_loop(loop, args.repeats) for loop in args.loops]
    print(f"machine: {machine()}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}, seed 0, {args.repeats} repeats, 1 thread")
    print(table(timings))
    if args.planted_bugs:
        print("\nfinal train loss / final val metric, seed 0, default budget:")
        print(planted_bugs_table(args.loops))


if __name__ == "__main__":
    main()
