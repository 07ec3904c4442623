"""GPU sweep throughput: runs per minute of the small reference loops on ``device=cuda``.

    python benchmarks/bench_gpu.py [--loops mlp_digits,cnn_digits] [--runs 96]
                                   [--runs-per-gpu 4,8,16,24] [--start-methods fork,spawn]

For each runs-per-GPU setting and start method: ``--runs`` unmutated runs (distinct
seeds, so nothing is cached) spread over every visible GPU, as ``device=cuda`` sweeps do,
into a fresh results folder; wall time from the first start to the last result. Prints a
markdown table for docs/benchmarks.md, with the status counts (every run must be ``ok``)
and a check that this process never initialised CUDA (its forks would be unusable).
The goal on one H200: >= 100 runs/min (anchor there: 54 with fresh processes, 87 forked
from a warm parent, 16 at a time). Each setting's first run goes alone (the harness
times a reference before the rest), as in a real sweep.

``--device cpu --gpus 0,1`` runs the same path without a GPU (a check of this script,
not a measurement: runs then share the CPU, not GPUs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.harness import RunSpec, run_sweep  # noqa: E402
from experiments.harness.gpu import parse_visible_devices, visible_gpus  # noqa: E402
from experiments.harness.warm import warm_up  # noqa: E402

TIMEOUT_S = 300.0  # fixed: a throughput run has no reference-derived deadline to wait for


def specs_for(loops: list[str], runs: int, device: str, epochs: int | None) -> list[RunSpec]:
    specs = []
    for index in range(runs):
        loop = loops[index % len(loops)]
        path = ROOT / "reference_loops" / f"{loop}.py"
        seed = index // len(loops)
        argv = [*(["--epochs", str(epochs)] if epochs else []), "--seed", str(seed)]
        specs.append(
            RunSpec(
                str(path),
                path.read_text(encoding="utf-8"),
                (*argv, "--device", device),
                seed=seed,
                device=device,
                loop=loop,
                timeout_s=TIMEOUT_S,
            )
        )
    return specs


def measure(
    specs: list[RunSpec], gpus: list[str], runs_per_gpu: int, start_method: str
) -> tuple[float, Counter, float]:
    """(runs per minute, status counts, median run wall s) of one uncached sweep."""
    with tempfile.TemporaryDirectory() as results:
        started = time.perf_counter()
        rows = run_sweep(
            specs,
            results,
            workers=len(gpus) * runs_per_gpu,
            start_method=start_method,
            gpus=gpus,
            runs_per_gpu=runs_per_gpu,
        )
        elapsed = time.perf_counter() - started
    walls = sorted(row["wall_s"] or 0.0 for row in rows)
    return (
        60.0 * len(rows) / elapsed,
        Counter(row["status"] for row in rows),
        walls[len(walls) // 2],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="mlp_digits,cnn_digits")
    parser.add_argument("--runs", type=int, default=96)
    parser.add_argument("--runs-per-gpu", default="4,8,16,24")
    parser.add_argument("--start-methods", default="fork,spawn")
    parser.add_argument("--epochs", type=int, default=None, help="default: each loop's own")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpus", default=None, help="GPU ids; default: all visible")
    args = parser.parse_args()

    gpus = parse_visible_devices(args.gpus) if args.gpus is not None else visible_gpus()
    if not gpus:
        raise SystemExit("no GPU visible: run this on a machine with CUDA (see docs/scale.md)")
    loops = args.loops.split(",")
    specs = specs_for(loops, args.runs, args.device, args.epochs)
    print(
        f"{len(specs)} runs of {', '.join(loops)} on {args.device}, GPUs {gpus}, "
        f"{os.cpu_count()} CPUs\n"
    )
    warm_up()  # a sweep's parent pays its imports once, before its runs: not measured here
    print("| runs per GPU | start | runs/min | statuses | median run wall s |")
    print("| --- | --- | --- | --- | --- |")
    for start_method in args.start_methods.split(","):
        for runs_per_gpu in (int(value) for value in args.runs_per_gpu.split(",")):
            rate, statuses, median_wall = measure(specs, gpus, runs_per_gpu, start_method)
            counts = ", ".join(f"{name} {count}" for name, count in sorted(statuses.items()))
            print(
                f"| {runs_per_gpu} | {start_method} | {rate:.0f} | {counts} | {median_wall:.2f} |"
            )
    torch = sys.modules.get("torch")
    initialised = torch is not None and torch.cuda.is_initialized()
    print(f"\nparent initialised CUDA: {initialised} (must be False)")


if __name__ == "__main__":
    main()
