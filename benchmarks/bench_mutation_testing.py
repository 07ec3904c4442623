"""What ``trainwreck test`` costs and finds on ``tests/projects/tested_pkg``, against a fresh
interpreter per mutant and against mutmut 3 on the same project; or, with ``--public``,
what a mutant costs beyond its tests on public projects, warm project against cold.

    python benchmarks/bench_mutation_testing.py [--workers 1] [--mutmut PATH] [--json FILE]
    python benchmarks/bench_mutation_testing.py --public NAME[,NAME] --checkouts DIR [--workers 2]

``--public``: projects of ``benchmarks/public_suites.toml``, checked out as
``bench_public_suites.py --prepare`` makes them; per project, ``fork`` (the default: runs
forked from the warm project's server), ``fork, cold project`` (``--cold-project``: each
child imports the project and collects the tests) and ``rerun`` (``fork`` again, all
cached), each under ``nice``; per run, its wall time beyond its selected tests' own time is
the overhead issue 30 bounds at 1.0 s (median, on 2 busy cores).

Each configuration runs in its own copy of the project with an empty results folder (no
cache), one after the other:

- ``fork``: the default (a fork of a warm process per mutant, per-test coverage selects
  the tests); per mutant, its wall time beyond its selected tests' own time (pytest's
  durations) is the overhead the issue bounds at 0.3 s;
- ``fork, all tests``: ``--all-tests`` (what coverage-based selection saves);
- ``fresh``: ``--fresh`` (a new interpreter per mutant, the same selection);
- ``rerun``: ``fork`` again in the same copy (everything cached);
- ``mutmut``: mutmut 3 (``pip install mutmut``; pass its executable with ``--mutmut``)
  with its own, generic operators on the same two files, with ``OMP_NUM_THREADS=1``
  (without it, mutmut's forked children hang on torch's thread pool until their
  timeouts); skipped with the reason when it is not installed. ``--mutmut-unpinned-cap S``
  also runs it without that setting, stopped after S seconds.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "projects" / "tested_pkg"
FILES = ("tinynet/train.py", "tinynet/model.py")


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


def trainwreck(project: Path, workers: int, *flags: str) -> dict:
    argv = [sys.executable, "-m", "experiments.cli", "test", "--workers", str(workers)]
    for file in FILES:
        argv += ["--mutate", file]
    started = time.perf_counter()
    done = subprocess.run(
        [*argv, *flags], cwd=project, env=_env(), capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"trainwreck test failed ({done.returncode}):\n{done.stderr[-3000:]}")
    with open(project / "results" / "mutation-testing" / "mutants.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    ran = [row for row in rows if float(row["wall_s"]) > 0 and row["cached"] == "False"]
    overheads = [float(row["wall_s"]) - float(row["tests_s"]) for row in ran]
    cpu = [float(row["cpu_s"]) for row in ran]
    return {
        "wall_s": round(wall, 1),
        "mutants": len(rows),
        "runs": len(ran),
        "statuses": dict(Counter(row["status"] for row in rows)),
        "summary": done.stdout.strip().splitlines()[-1],
        "tests_s": round(sum(float(row["tests_s"]) for row in ran), 2),
        "overhead_median_s": round(statistics.median(overheads), 3) if overheads else None,
        "overhead_max_s": round(max(overheads), 3) if overheads else None,
        "cpu_median_s": round(statistics.median(cpu), 3) if cpu else None,
    }


def mutmut(project: Path, executable: str | None, pinned: bool = True, cap_s: float = 3600) -> dict:
    found = executable or shutil.which("mutmut")
    if not found:
        return {"skipped": "mutmut is not installed (pip install mutmut; or --mutmut PATH)"}
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text()
        + "\n[tool.mutmut]\n"
        + 'source_paths = ["tinynet"]\n'
        + 'pytest_add_cli_args_test_selection = ["tests/"]\n'
    )
    version = subprocess.run(
        [found, "--version"], cwd=project, capture_output=True, text=True, check=False
    )
    env = _env(OMP_NUM_THREADS="1") if pinned else _env()
    if not pinned:
        env.pop("OMP_NUM_THREADS", None)
    started = time.perf_counter()
    process = subprocess.Popen(
        [found, "run"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=cap_s)
        stopped = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        stopped = True
    wall = time.perf_counter() - started
    results = subprocess.run(
        [found, "results", "--all", "true"],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    statuses = Counter(
        match.group(1).strip()
        for match in re.finditer(r"^\s*\S+: (.+)$", results.stdout, re.MULTILINE)
    )
    return {
        "version": (version.stdout or version.stderr).strip(),
        "exit": process.returncode,
        "stopped_at_cap_s": cap_s if stopped else None,
        "wall_s": round(wall, 1),
        "mutants": sum(statuses.values()),
        "statuses": dict(statuses),
        "tail": output[-600:] if process.returncode and not stopped else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--mutmut", help="mutmut's executable (default: mutmut on PATH)")
    parser.add_argument("--skip", action="append", default=[], help="a configuration to skip")
    parser.add_argument(
        "--mutmut-unpinned-cap",
        type=float,
        metavar="S",
        help="also run mutmut without OMP_NUM_THREADS=1, stopped after S seconds",
    )
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--public", help="public projects (benchmarks/public_suites.toml)")
    parser.add_argument("--checkouts", type=Path, help="where --public projects are checked out")
    args = parser.parse_args()
    if args.public:
        return public(args)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-mt-") as scratch:

        def copy(name: str) -> Path:
            target = Path(scratch) / name / "tested_pkg"
            shutil.copytree(FIXTURE, target)
            return target

        configurations = {
            "fork": (),
            "fork, all tests": ("--all-tests",),
            "fresh": ("--fresh",),
        }
        for name, flags in configurations.items():
            if name in args.skip:
                continue
            project = copy(name.replace(",", "").replace(" ", "-"))
            results[name] = trainwreck(project, args.workers, *flags)
            print(name, json.dumps(results[name]), flush=True)
            if name == "fork":
                results["rerun"] = trainwreck(project, args.workers)
                print("rerun", json.dumps(results["rerun"]), flush=True)
        if "mutmut" not in args.skip:
            results["mutmut"] = mutmut(copy("mutmut"), args.mutmut)
            print("mutmut", json.dumps(results["mutmut"]), flush=True)
        if args.mutmut_unpinned_cap:
            name = "mutmut, torch threads not pinned"
            results[name] = mutmut(
                copy("mutmut-unpinned"), args.mutmut, pinned=False, cap_s=args.mutmut_unpinned_cap
            )
            print(name, json.dumps(results[name]), flush=True)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"\nmachine: {machine}; workers {args.workers}")
    print(
        "| configuration | wall s | mutants | runs | statuses "
        "| beyond tests' time, per run: median (max) s | CPU per run, median s |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, result in results.items():
        if "skipped" in result:
            print(f"| {name} | skipped: {result['skipped']} | | | | | |")
            continue
        overhead = (
            f"{result['overhead_median_s']} ({result['overhead_max_s']})"
            if result.get("overhead_median_s") is not None
            else ""
        )
        statuses = ", ".join(f"{key} {value}" for key, value in sorted(result["statuses"].items()))
        print(
            f"| {name} | {result['wall_s']} | {result['mutants']} | {result.get('runs', '')} "
            f"| {statuses} | {overhead} | {result.get('cpu_median_s') or ''} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, **results}, indent=2))


def public(args: argparse.Namespace) -> None:
    import bench_public_suites as suites

    if args.checkouts is None:
        raise SystemExit("--public needs --checkouts DIR")
    names = args.public.split(",")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-mt-public-") as scratch:
        for project in [p for p in suites.projects() if p["name"] in names]:
            folder = suites.checkout(args.checkouts, project)
            out = Path(scratch) / project["name"]
            found = {
                "fork": suites.trainwreck(project, folder, out / "warm", args.workers),
                "fork, cold project": suites.trainwreck(
                    project, folder, out / "cold", args.workers, "--cold-project"
                ),
            }
            again = out / "warm-again"
            shutil.copytree(out / "warm", again)
            found["rerun"] = suites.trainwreck(project, folder, again, args.workers, keep=True)
            for name, result in found.items():
                print(project["name"], name, json.dumps(result), flush=True)
            results[project["name"]] = found
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"\nmachine: {machine}; workers {args.workers}\n")
    print(suites.table(results))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, **results}, indent=2))


if __name__ == "__main__":
    main()
