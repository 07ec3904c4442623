"""Harness benchmarks: overhead per run, telemetry overhead, unchanged-sweep time.

    python benchmarks/bench_harness.py [--repeats 5] [--loops mlp_digits,cnn_digits,...]

1. Telemetry: each reference loop run in this (warm) process with and without the hooks,
   alternating, CPU time (``process_time``, so other processes on the machine count
   less), median over repeats. Overhead = extra time per optimizer step / step time.
2. Harness overhead per run, per reference loop: the script's own time (run in this warm
   process, no hooks), a harness run without telemetry (``run_sweep`` of one spec into a
   fresh results folder: fork, child setup, trace, bookkeeping, result), the same with
   telemetry, and a fresh interpreter (``python script.py``, what one pays without a warm
   parent). Wall and CPU time (parent plus reaped children: the machine is shared, and
   CPU time moves less with the load of others). Medians over repeats; the fresh
   interpreter once per loop.
3. Unchanged sweep: ``python -m experiments.run`` (a fresh process, as a user runs it)
   over a sweep whose runs are all cached.
4. Working-directory mirror: creating and removing a run's mirror of a project folder (a
   few files and a data folder of many files), and the guard's copy-on-write of a
   mirrored folder on a first write into it.
5. Reach probes: each reference loop run in this process with a probe before every one
   of its statements (the worst case: a real mutant probes one to a few) against the
   same source compiled plainly; CPU time per optimizer step.

6. Telemetry features (not a timing): every mode and gradient mutant (first site) of a few
   loops, 3 epochs, through the harness; their signature features other than times and
   memory. ``--features-out FILE`` saves them, ``--features-compare FILE`` reports every
   feature that differs from a saved file (exit 1 if any): run it before and after a
   change to the hooks or the writer to show the signature sees the same runs.

7. Reuse: the whole harness per run in sweeps of ``--runs`` runs, a fresh fork per run
   against run processes that serve up to ``--reuse`` runs each (``Runner(reuse=K)``).

``--only telemetry,harness,reuse,sweep,mirror,probes,features`` runs some sections (``features`` is
not in the default set). ``benchmarks/bench_hooks.py`` times each hook on its own.
Prints a markdown report (for docs/benchmarks.md).

    python benchmarks/bench_harness.py --gpu

On a machine with CUDA instead: every reference loop with ``--device cuda`` (must be
``ok``) and every device-placement mutant (must ``crash`` with torch's device-mismatch
error), through the harness, as a markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import resource
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.harness import RunSpec, load_results, run_dir, run_sweep  # noqa: E402
from experiments.harness.warm import warm_up  # noqa: E402
from experiments.loops import loop_names  # noqa: E402
from mutations.registry import operator_classes  # noqa: E402

LOOPS = loop_names()


def script_of(loop: str) -> Path:
    return ROOT / "reference_loops" / f"{loop}.py"


@contextlib.contextmanager
def _inside(folder: str):
    """Like the child: the script runs in a scratch folder (contextlib.chdir is 3.11+)."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def run_in_process(loop: str, argv: list[str], clock=time.perf_counter) -> float:
    """The script's own time, in this warm process (the child's starting point)."""
    import torch

    path = script_of(loop)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv, sys.path[0] = [str(path), *argv], str(path.parent)
    torch.manual_seed(0)
    try:
        with tempfile.TemporaryDirectory() as work, _inside(work):
            start = clock()
            with contextlib.redirect_stdout(io.StringIO()):
                runpy.run_path(str(path), run_name="__main__")
            return clock() - start
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def telemetry_overhead(loops: list[str], repeats: int) -> list[str]:
    """Per loop: CPU per optimizer step without and with the hooks, alternating runs."""
    from experiments.harness.hooks import SAMPLE_EVERY, Telemetry
    from experiments.harness.writer import TraceWriter

    argv = ["--seed", "0"]

    def hooked(loop: str) -> tuple[float, int]:
        with tempfile.TemporaryDirectory() as folder:
            writer = TraceWriter(Path(folder) / "trace.jsonl")
            telemetry = Telemetry(writer, sample_every=SAMPLE_EVERY)
            telemetry.install()
            try:
                seconds = run_in_process(loop, argv, time.process_time)
            finally:
                telemetry.finish()
                telemetry.remove()
                writer.close()
        return seconds, telemetry.steps

    lines = [
        f"| loop | steps | CPU per step, no hooks | with hooks (sample every {SAMPLE_EVERY}) "
        "| telemetry per step | overhead |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for loop in loops:
        run_in_process(loop, argv)  # warm caches
        base, with_hooks, steps = [], [], 1
        for _ in range(repeats):
            base.append(run_in_process(loop, argv, time.process_time))
            seconds, steps = hooked(loop)
            with_hooks.append(seconds)
        b, h = statistics.median(base), statistics.median(with_hooks)
        lines.append(
            f"| {loop} | {steps} | {b / steps * 1e6:.0f} us | {h / steps * 1e6:.0f} us | "
            f"{(h - b) / steps * 1e6:+.1f} us | {h / b - 1:+.1%} |"
        )
    lines.append(
        f"\nCPU time (process_time) of the whole script in this warm process, medians of "
        f"{repeats} alternating runs, divided by its optimizer steps."
    )
    return lines


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def harness_run(path: Path, loop: str, argv: list[str], seed: int, telemetry: bool):
    """(wall s, CPU s of parent + child, row) of one uncached harness run."""
    with tempfile.TemporaryDirectory() as results:
        spec = RunSpec(
            str(path), path.read_text(), tuple(argv), seed=seed, loop=loop, telemetry=telemetry
        )
        cpu, children, wall = time.process_time(), _children_cpu(), time.perf_counter()
        (row,) = run_sweep([spec], results, workers=1)
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu + _children_cpu() - children
    assert row["status"] == "ok", row
    return wall, cpu, row


def sweep_run(
    path: Path, loop: str, argv: list[str], seeds: range, reuse: int
) -> tuple[float, float, dict[str, int]]:
    """(CPU s per run of parent + children, steps, why reused processes retired) of one
    uncached sweep of ``len(seeds)`` runs with telemetry, one worker. Idle processes are
    reaped when the sweep returns, so their CPU time is counted."""
    from experiments.harness.runner import Runner

    with tempfile.TemporaryDirectory() as results:
        specs = [
            RunSpec(str(path), path.read_text(), tuple(argv), seed=seed, loop=loop)
            for seed in seeds
        ]
        cpu, children = time.process_time(), _children_cpu()
        runner = Runner(results, workers=1, reuse=reuse)
        rows = runner.run(specs)
        cpu = time.process_time() - cpu + _children_cpu() - children
    assert all(row["status"] == "ok" for row in rows), rows
    return cpu / len(seeds), rows[0]["steps"], runner.retired


def reuse_overhead(loops: list[str], repeats: int, runs: int, reuse: int) -> list[str]:
    """Whole harness per run (fork, setup, telemetry, result) in sweeps of ``runs`` runs:
    a fresh fork per run against processes that serve up to ``reuse`` runs each."""
    lines = [
        f"| loop | steps | script alone CPU | harness CPU / run, fork per run | reuse={reuse} "
        "| overhead / run, fork per run | reuse |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    fork_fractions, reuse_fractions, retired_all = [], [], {}
    argv = ["--seed", "0"]
    for loop in loops:
        path = script_of(loop)
        alone, forked, reused, steps = [], [], [], 0
        for repeat in range(repeats):
            cpu = time.process_time()
            run_in_process(loop, argv)
            alone.append(time.process_time() - cpu)
            seeds = range(repeat * runs, (repeat + 1) * runs)
            cpu, steps, _ = sweep_run(path, loop, argv, seeds, 1)
            forked.append(cpu)
            cpu, steps, retired = sweep_run(path, loop, argv, seeds, reuse)
            reused.append(cpu)
            for reason, count in retired.items():
                retired_all[reason] = retired_all.get(reason, 0) + count
        median = statistics.median
        a = median(alone)
        f = median(x - y for x, y in zip(forked, alone))
        r = median(x - y for x, y in zip(reused, alone))
        fork_fractions.append(f / median(forked))
        reuse_fractions.append(r / median(reused))
        lines.append(
            f"| {loop} | {steps} | {a * 1e3:.0f} ms | {median(forked) * 1e3:.0f} ms "
            f"(+{f * 1e3:.0f}) | {median(reused) * 1e3:.0f} ms (+{r * 1e3:.0f}) | "
            f"{fork_fractions[-1]:.1%} | {reuse_fractions[-1]:.1%} |"
        )
    lines.append(
        f"\nWhole harness, median over loops: {statistics.median(fork_fractions):.1%} of a "
        f"run's CPU with a fork per run (max {max(fork_fractions):.1%}), "
        f"{statistics.median(reuse_fractions):.1%} with reuse={reuse} (max "
        f"{max(reuse_fractions):.1%}). Sweeps of {runs} runs with telemetry, one worker; "
        f"CPU of this process and its reaped children per run, medians of {repeats} "
        f"alternating repeats. Reused processes retired after an ok run: "
        f"{retired_all or 'none'}."
    )
    return lines


def harness_overhead(loops: list[str], repeats: int) -> list[str]:
    lines = [
        "| loop | steps | script alone | harness, no telemetry | fixed overhead | harness | "
        "telemetry | overhead / run | fresh interpreter | fresh / harness |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    fixed_all, total_fractions, fixed_fractions = [], [], []
    for loop in loops:
        path = script_of(loop)
        if not path.exists():
            lines.append(f"| {loop} | (script missing) | | | | | | | | |")
            continue
        argv = ["--seed", "0"]
        alone, alone_cpu, bare, bare_cpu, full, full_cpu = [], [], [], [], [], []
        steps = 0
        for repeat in range(repeats):
            cpu = time.process_time()
            alone.append(run_in_process(loop, argv))
            alone_cpu.append(time.process_time() - cpu)
            wall, cpu, _ = harness_run(path, loop, argv, repeat, telemetry=False)
            bare.append(wall)
            bare_cpu.append(cpu)
            wall, cpu, row = harness_run(path, loop, argv, repeat, telemetry=True)
            full.append(wall)
            full_cpu.append(cpu)
            steps = row["steps"]
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, str(path), *argv],
            check=True,
            capture_output=True,
            cwd=tempfile.gettempdir(),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        fresh = time.perf_counter() - start
        median = statistics.median
        a, b, f = median(alone), median(bare), median(full)
        fixed = median(x - y for x, y in zip(bare, alone))
        fixed_cpu = median(x - y for x, y in zip(bare_cpu, alone_cpu))
        telemetry = median(x - y for x, y in zip(full, bare))
        telemetry_cpu = median(x - y for x, y in zip(full_cpu, bare_cpu))
        total_cpu = median(x - y for x, y in zip(full_cpu, alone_cpu))
        fixed_all.append(fixed)
        fixed_fractions.append(fixed / b)
        total_fractions.append(total_cpu / median(full_cpu))
        lines.append(
            f"| {loop} | {steps} | {a:.3f} s | {b:.3f} s | {fixed * 1e3:.0f} ms "
            f"(CPU {fixed_cpu * 1e3:.0f} ms) | {f:.3f} s | {telemetry * 1e3:.0f} ms "
            f"(CPU {telemetry_cpu * 1e3:.0f} ms) | {total_cpu / median(full_cpu):.1%} CPU | "
            f"{fresh:.2f} s | {fresh / f:.1f}x |"
        )
    if fixed_all:
        lines.append(
            f"\nFixed overhead (fork, child setup, trace, result; no telemetry): median "
            f"{statistics.median(fixed_all) * 1e3:.0f} ms per run, "
            f"{statistics.median(fixed_fractions):.1%} of run wall. With telemetry, total "
            f"overhead is a median {statistics.median(total_fractions):.1%} of a run's CPU time "
            f"(max {max(total_fractions):.1%}). Medians of {repeats} repeats per loop; the "
            f"fresh interpreter ran once per loop."
        )
    return lines


def mirror_cost(repeats: int, data_files: int = 1000) -> list[str]:
    """Time to make and remove a run's mirror of a project with a data folder."""
    from experiments.harness import guard, workdir

    with tempfile.TemporaryDirectory() as base:
        project = Path(base) / "project"
        (project / "data").mkdir(parents=True)
        for name in ("train.py", "model.py", "config.yaml", "README.md", "model.pt"):
            (project / name).write_bytes(b"x" * 4096)
        for number in range(data_files):
            (project / "data" / f"{number:05d}.bin").write_bytes(b"y" * 1024)
        create, remove, first_write = [], [], []
        for _ in range(max(repeats, 5)):
            start = time.perf_counter()
            mirror = workdir.create(project)
            create.append(time.perf_counter() - start)
            keeper = guard.Guard(str(mirror), protected=[str(project)], allowed=[])
            start = time.perf_counter()
            keeper("open", (str(mirror / "data" / "cache.npy"), "w", 0))
            first_write.append(time.perf_counter() - start)
            start = time.perf_counter()
            workdir.remove(mirror)
            remove.append(time.perf_counter() - start)
    median = statistics.median
    return [
        f"| project: 5 files + data/ of {data_files} files | median |",
        "| --- | --- |",
        f"| create the mirror (one symlink per entry of the folder and its parent) | {median(create) * 1e3:.2f} ms |",
        f"| remove it | {median(remove) * 1e3:.2f} ms |",
        f"| first write into data/ (the folder becomes {data_files} symlinks) | {median(first_write) * 1e3:.2f} ms |",
    ]


def probe_cost(loops: list[str], repeats: int) -> list[str]:
    """CPU per step of each loop with a reach probe before every statement vs none."""
    from experiments.harness import reach

    lines = [
        "| loop | steps | probe hits per run | CPU plain | CPU probed | per step | overhead |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for loop in loops:
        path = script_of(loop)
        source = path.read_text()
        everything = [{"start": 1, "end": source.count("\n") + 1}]
        plain, probed, hits, steps = [], [], 0, 0
        for _ in range(repeats):
            plain.append(_exec_timed(path, compile(source, str(path), "exec"))[0])
            counters, _ = reach.install(1)  # with the evaluation check, as in a run
            code, _ = reach.compile_probed(source, str(path), everything)
            seconds, steps = _exec_timed(path, code)
            probed.append(seconds)
            hits = counters[0]
        a, b = statistics.median(plain), statistics.median(probed)
        lines.append(
            f"| {loop} | {steps} | {hits} | {a:.3f} s | {b:.3f} s | "
            f"{(b - a) / max(steps, 1) * 1e6:+.1f} us | {b / a - 1:+.1%} |"
        )
    return lines


def _exec_timed(path: Path, code) -> tuple[float, int]:
    """CPU seconds of one in-process run of ``code`` as ``__main__``, and its steps."""
    import importlib

    import torch

    optimizer_module = importlib.import_module("torch.optim.optimizer")
    steps = [0]
    hook = optimizer_module.register_optimizer_step_post_hook(
        lambda *args: steps.__setitem__(0, steps[0] + 1)
    )
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv, sys.path[0] = [str(path), "--seed", "0"], str(path.parent)
    torch.manual_seed(0)
    try:
        with tempfile.TemporaryDirectory() as work, _inside(work):
            start = time.process_time()
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, {"__name__": "__main__", "__file__": str(path)})
            return time.process_time() - start, steps[0]
    finally:
        hook.remove()
        sys.argv, sys.path[:] = saved_argv, saved_path


def unchanged_sweep(loop: str, operators: str) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        command = [
            sys.executable,
            "-m",
            "experiments.run",
            f"loop={loop}",
            f"mutation={operators}",
            "budget=smoke",
            "seeds=[0,1]",
            f"results_dir={folder}/results",
            f"hydra.run.dir={folder}/outputs",
            "quiet=true",
        ]
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, capture_output=True)
        first = time.perf_counter() - start
        count = len(load_results(Path(folder) / "results"))
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, capture_output=True)
        second = time.perf_counter() - start
        assert len(load_results(Path(folder) / "results")) == count
    return [
        f"`python -m experiments.run loop={loop} mutation={operators} budget=smoke seeds=[0,1]`: "
        f"{count} runs; first sweep {first:.1f} s, the same sweep again (all cached) "
        f"{second:.1f} s, in a fresh process (Python, Hydra, building the mutants, cache look-ups)."
    ]


# Features that measure time or memory: they differ from run to run by nature.
TIMING_FEATURES = {
    "time_per_step",
    "train_time_s",
    "wall_s",
    "peak_rss_mb",
    "mem_growth_mb_per_step",
}
FEATURE_LOOPS = ("mlp_digits", "regression_diabetes", "lstm_lm")


def telemetry_features(loops: list[str]) -> dict[str, dict[str, object]]:
    """{run_id: features} of every mode and gradient mutant of ``loops``, 3 epochs."""
    from experiments import sweep as sweeps
    from experiments.signature import signature
    from experiments.trace import read_trace

    operators = [
        name for name, cls in operator_classes().items() if cls.category in ("mode", "gradient")
    ]
    sweep = sweeps.Sweep(
        loops=[sweeps.Loop(str(script_of(loop)), epochs=3) for loop in loops],
        operators=operators,
        sites="first",
    )
    features = {}
    with tempfile.TemporaryDirectory() as results:
        run_sweep(sweeps.build(sweep), results, workers=1)
        for row in load_results(results):
            records = list(read_trace(run_dir(results, row["key"])))
            values = signature(records, row, n_classes=None)
            features[row["run_id"]] = {
                key: value for key, value in values.items() if key not in TIMING_FEATURES
            }
    return features


def compare_features(before: dict, after: dict) -> list[str]:
    """Lines naming every run or feature that differs (floats within 1e-9 relative)."""

    def same(a: object, b: object) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9)
        return a == b

    lines = [f"run only before: {run}" for run in sorted(set(before) - set(after))]
    lines += [f"run only after: {run}" for run in sorted(set(after) - set(before))]
    for run in sorted(set(before) & set(after)):
        for key in sorted(set(before[run]) | set(after[run])):
            a, b = before[run].get(key), after[run].get(key)
            if not same(a, b):
                lines.append(f"{run}: {key} {a!r} -> {b!r}")
    return lines


DEVICE_MISMATCH = ("same device", "Expected all tensors", "device type", "cuda")


def gpu_check(loops: list[str]) -> list[str]:
    from experiments import sweep as sweeps

    device_operators = [
        name for name, cls in operator_classes().items() if cls.category == "device"
    ]
    available = [loop for loop in loops if script_of(loop).exists()]
    sweep = sweeps.Sweep(
        loops=[sweeps.Loop(str(script_of(loop))) for loop in available],
        operators=device_operators,
        device="cuda",
    )
    specs = sweeps.build(sweep)
    with tempfile.TemporaryDirectory() as results:
        started = time.perf_counter()
        rows = run_sweep(specs, results, workers=min(8, os.cpu_count() or 1))
        elapsed = time.perf_counter() - started
    lines = [
        "| loop | mutant | status | expected | exception | wall s | peak CUDA MB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    failures = 0
    for row in rows:
        expected = "ok" if row["identity"] == "none" else "crash"
        message = (
            (row.get("exc_message") or "").splitlines()[0][:80] if row.get("exc_message") else ""
        )
        good = row["status"] == expected and (
            expected == "ok" or any(text in message for text in DEVICE_MISMATCH)
        )
        failures += not good
        lines.append(
            f"| {row['loop']} | {row['identity']} | {row['status']} | {expected}"
            f"{'' if good else ' (MISMATCH)'} | {row.get('exc_type') or ''} {message} | "
            f"{row['wall_s']:.2f} | {row.get('peak_cuda_mb') or ''} |"
        )
    lines.append(f"\n{len(rows)} runs in {elapsed:.0f} s; {failures} not as expected.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--sweep-operators", default="all")
    parser.add_argument("--gpu", action="store_true", help="the CUDA check instead")
    parser.add_argument("--only", default="telemetry,harness,reuse,sweep,mirror,probes")
    parser.add_argument("--runs", type=int, default=8, help="runs per sweep (reuse section)")
    parser.add_argument(
        "--reuse", type=int, default=16, help="runs per process (reuse section; 1: a fork each)"
    )
    parser.add_argument("--features-out", help="save the features section's features here")
    parser.add_argument("--features-compare", help="compare them with this saved file")
    args = parser.parse_args()
    sections = set(args.only.split(","))
    if args.gpu:
        print("\n".join(gpu_check(args.loops.split(","))))
        return

    started = time.perf_counter()
    warm_up()
    warm_s = time.perf_counter() - started
    import torch

    print("## Harness\n")
    print(
        f"Command: `python benchmarks/bench_harness.py --repeats {args.repeats}`. Machine: "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {torch.__version__}, {time.strftime('%Y-%m-%d')}. Warm-up of the parent "
        f"(torch, scikit-learn, first optimizer): {warm_s:.1f} s, once per process.\n"
    )
    loops = args.loops.split(",")
    if "telemetry" in sections:
        print("### Telemetry overhead\n")
        print("\n".join(telemetry_overhead(loops, args.repeats)) + "\n")
    if "harness" in sections:
        print("### Harness overhead per run\n")
        print("\n".join(harness_overhead(loops, args.repeats)) + "\n")
    if "reuse" in sections:
        print("### Whole harness per run in a sweep: fork per run vs reused processes\n")
        print("\n".join(reuse_overhead(loops, args.repeats, args.runs, args.reuse)) + "\n")
    if "sweep" in sections:
        print("### Unchanged sweep\n")
        print("\n".join(unchanged_sweep("mlp_digits", args.sweep_operators)) + "\n")
    if "mirror" in sections:
        print("### Working-directory mirror\n")
        print("\n".join(mirror_cost(args.repeats)) + "\n")
    if "probes" in sections:
        print("### Reach probes (a probe before every statement)\n")
        print("\n".join(probe_cost(loops, args.repeats)))
    if "features" in sections:
        features = telemetry_features(list(FEATURE_LOOPS))
        print(f"### Telemetry features\n\n{len(features)} runs (mode and gradient mutants).")
        if args.features_out:
            Path(args.features_out).write_text(json.dumps(features, indent=1, sort_keys=True))
        if args.features_compare:
            saved = json.loads(Path(args.features_compare).read_text())
            differences = compare_features(saved, features)
            print("\n".join(differences) or "Every feature equal to the saved ones.")
            if differences:
                sys.exit(1)


if __name__ == "__main__":
    main()
