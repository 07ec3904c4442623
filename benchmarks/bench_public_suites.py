"""``trainwreck test`` and mutmut 3 on public projects' own test suites (issue 30).

    python benchmarks/bench_public_suites.py --checkouts DIR [--projects a,b] [--workers 2]
        [--mutmut-cap 900] [--no-mutmut] [--results DIR] [--json FILE]
    python benchmarks/bench_public_suites.py --compare BEFORE_RESULTS AFTER_RESULTS

``--compare``: two ``--results`` folders of ``trainwreck test`` runs (two versions of
trainwreck on the same checkouts): per project, the counts by status in each, and every
mutant whose status changed, with the later run's witness line.

The projects are pinned in ``benchmarks/public_suites.toml`` (repository, commit, the
files to mutate, the test command). ``DIR/<name>`` must hold each project's tree at its
commit, with its ``install`` requirements and the project itself (``pip install --no-deps
-e``) installed in this Python; ``DIR/<name>.commit`` names the commit it was made from
(``--prepare MIRROR_DIR`` writes both from local git mirrors, ``<owner>+<name>/repo``).

Per project:

- ``trainwreck test --mutate FILE... --workers W --timeout-factor 10 -- TESTS`` (every
  operator; the factor as in ``bench_checks.py``, for a machine whose load changes): wall time,
  mutants by status, the score, how many runs were forked from the warm project, and the
  overhead per run (its wall time minus its tests' own time), median and max; each
  survivor and each unconfirmed mutant with its witness line (what ran, or why not: issue
  28), in the JSON;
- mutmut 3 on the same files (``only_mutate``) and tests
  (``pytest_add_cli_args_test_selection``), ``--max-children W``, with
  ``OMP_NUM_THREADS=1`` (its forked children otherwise hang on torch's thread pool) and the
  project's ``env``; stopped after ``--mutmut-cap`` seconds, with how far it got.

Everything runs under ``nice``; results go to ``--results`` (default: a folder in the
temporary directory), outside the checkouts.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
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

import tomllib

REPO = Path(__file__).resolve().parents[1]
SUITES = Path(__file__).resolve().parent / "public_suites.toml"


def projects() -> list[dict]:
    return tomllib.loads(SUITES.read_text(encoding="utf-8"))["project"]


def checkout(checkouts: Path, project: dict) -> Path:
    folder = checkouts / project["name"]
    marker = checkouts / f"{project['name']}.commit"
    found = marker.read_text().strip() if marker.exists() else None
    if not folder.is_dir() or found != project["commit"]:
        raise SystemExit(
            f"{project['name']}: no checkout of {project['repository']}@{project['commit'][:12]} "
            f"in {folder} (run with --prepare MIRRORS first)"
        )
    return folder


def prepare(mirrors: Path, checkouts: Path, project: dict) -> None:
    """The project's tree at its commit from a local mirror, and its requirements."""
    mirror = mirrors / project["repository"].replace("/", "+") / "repo"
    folder = checkouts / project["name"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(mirror), "archive", project["commit"]], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    constraint = Path(tempfile.gettempdir()) / "trainwreck-torch-constraint.txt"
    import torch

    constraint.write_text(f"torch=={torch.__version__.split('+')[0]}\n")
    if project.get("install"):
        subprocess.run([*pip, "-c", str(constraint), *project["install"]], check=True)
    env = {**os.environ, **project.get("editable_env", {})}
    subprocess.run([*pip, "--no-deps", "-e", str(folder)], check=True, env=env)
    (checkouts / f"{project['name']}.commit").write_text(project["commit"] + "\n")


def _env(project: dict, **extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, **project.get("env", {}), "PYTHONPATH": path, **extra}


def trainwreck(
    project: dict, folder: Path, out: Path, workers: int, *flags: str, keep: bool = False
) -> dict:
    argv = ["nice", "-n", "10", sys.executable, "-m", "experiments.cli", "test"]
    for file in project["mutate"]:
        argv += ["--mutate", file]
    # --timeout-factor 10, as bench_checks.py: the machine's load changes while the
    # benchmark runs (other jobs), and at the default 4 a run of one public suite timed
    # out at its deadline on a load three times the baseline's.
    argv += ["--workers", str(workers), "--out", str(out), "--timeout-factor", "10"]
    argv += [*flags, "--", *project["tests"]]
    if not keep:  # keep: a rerun on the same results (its cache)
        shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=folder, env=_env(project), capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        return {"failed": f"exit {done.returncode}: {done.stderr.strip()[-800:]}"}
    with open(out / "mutants.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return summarise(rows, wall, done.stdout.strip().splitlines()[-1])


def summarise(rows: list[dict], wall: float, summary: str) -> dict:
    ran = [row for row in rows if float(row["wall_s"]) > 0 and row["cached"] == "False"]
    cached = sum(row["cached"] == "True" for row in rows)
    overheads = [float(row["wall_s"]) - float(row["tests_s"]) for row in ran]
    counts = Counter(row["status"] for row in rows)
    scored = counts["killed"] + counts["survived"]
    return {
        "wall_s": round(wall, 1),
        "mutants": len(rows),
        "statuses": dict(counts),
        "score": f"{counts['killed']}/{scored} ({100 * counts['killed'] / scored:.1f}%)"
        if scored
        else "n/a",
        "runs": len(ran),
        "cached": cached,
        "warm_runs": sum(row.get("warm") == "True" for row in ran),
        "crash_kills": sum(1 for row in rows if row["status"] == "killed" and row.get("crash")),
        "overhead_median_s": round(statistics.median(overheads), 3) if overheads else None,
        "overhead_max_s": round(max(overheads), 3) if overheads else None,
        "summary": summary,
        # What each survivor's bug did under the tests, and why the unconfirmed did not run
        "witnesses": {
            row["identity"]: f"{row['status']}: {row.get('witness', '')}"
            for row in rows
            if row["status"] in ("survived", "unconfirmed", "stillborn")
        },
    }


def mutmut(project: dict, folder: Path, work: Path, workers: int, cap_s: float) -> dict:
    found = shutil.which("mutmut") or str(Path(sys.executable).parent / "mutmut")
    if not Path(found).exists():
        return {"skipped": "mutmut is not installed (pip install mutmut)"}
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(folder, work, symlinks=True)
    tests = [arg for arg in project["tests"][3:] if arg not in ("-q", "-p", "no:cacheprovider")]
    package = sorted({Path(file).parts[0] for file in project["mutate"]})
    config = (
        "\n[tool.mutmut]\n"
        f"source_paths = {json.dumps(package)}\n"
        f"only_mutate = {json.dumps(project['mutate'])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
    )
    pyproject = work / "pyproject.toml"
    text = pyproject.read_text() if pyproject.exists() else ""
    if "[tool.mutmut]" in text:
        return {"skipped": "the project configures mutmut itself"}
    pyproject.write_text(text + config)
    version = subprocess.run([found, "--version"], cwd=work, capture_output=True, text=True)
    started = time.perf_counter()
    process = subprocess.Popen(
        ["nice", "-n", "10", found, "run", "--max-children", str(workers)],
        cwd=work,
        env=_env(project, OMP_NUM_THREADS="1"),
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
        cwd=work,
        env=_env(project),
        capture_output=True,
        text=True,
        check=False,
    )
    statuses = Counter(
        match.group(1).strip()
        for match in re.finditer(r"^\s*\S+: (.+)$", results.stdout, re.MULTILINE)
    )
    killed, survived = statuses.get("killed", 0), statuses.get("survived", 0)
    return {
        "version": (version.stdout or version.stderr).strip()[-80:],
        "exit": process.returncode,
        "stopped_at_cap_s": cap_s if stopped else None,
        "wall_s": round(wall, 1),
        "mutants": sum(statuses.values()),
        "statuses": dict(statuses),
        "score": f"{killed}/{killed + survived} ({100 * killed / (killed + survived):.1f}%)"
        if killed + survived
        else "n/a",
        "tail": output[-600:] if process.returncode and not stopped else "",
    }


def table(results: dict[str, dict]) -> str:
    head = (
        "| project | tool | wall s | mutants | statuses | score | runs (warm) "
        "| overhead per run, median (max) s |\n|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for name, found in results.items():
        for tool, result in found.items():
            if "skipped" in result or "failed" in result:
                why = result.get("skipped") or result.get("failed")
                lines.append(f"| {name} | {tool} | {why[:120]} | | | | | |")
                continue
            statuses = ", ".join(f"{k} {v}" for k, v in sorted(result["statuses"].items()))
            if result.get("stopped_at_cap_s"):
                statuses += f" (stopped at {result['stopped_at_cap_s']:.0f} s)"
            runs = f"{result['runs']} ({result['warm_runs']})" if "runs" in result else ""
            overhead = (
                f"{result['overhead_median_s']} ({result['overhead_max_s']})"
                if result.get("overhead_median_s") is not None
                else ""
            )
            lines.append(
                f"| {name} | {tool} | {result['wall_s']} | {result['mutants']} | {statuses} "
                f"| {result['score']} | {runs} | {overhead} |"
            )
    return "\n".join(lines)


def _statuses(folder: Path) -> dict[str, dict[str, str]]:
    path = folder / "trainwreck" / "mutants.csv"
    if not path.exists():
        return {}
    with open(path, newline="") as handle:
        return {row["identity"]: row for row in csv.DictReader(handle)}


def compare(before: Path, after: Path) -> str:
    """Per project of both result folders: statuses before and after, and the changes."""
    lines = []
    for folder in sorted(path for path in after.iterdir() if path.is_dir()):
        old, new = _statuses(before / folder.name), _statuses(folder)
        if not old or not new:
            continue
        counts = [Counter(row["status"] for row in rows.values()) for rows in (old, new)]
        lines.append(f"## {folder.name}")
        for label, count in zip(("before", "after"), counts):
            scored = count["killed"] + count["survived"]
            score = f"{count['killed']}/{scored}" if scored else "n/a"
            parts = ", ".join(f"{key} {value}" for key, value in sorted(count.items()))
            lines.append(f"- {label}: {parts}; score {score}")
        for identity in sorted(set(old) | set(new)):
            was = old.get(identity, {}).get("status", "(no such mutant)")
            now = new.get(identity, {})
            if was != now.get("status"):
                witness = now.get("witness", "")[:220]
                lines.append(f"  - `{identity}`: {was} -> {now.get('status')}: {witness}")
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["--compare"]:
        print(compare(Path(sys.argv[2]), Path(sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkouts", type=Path, required=True)
    parser.add_argument("--prepare", type=Path, metavar="MIRRORS", help="make the checkouts")
    parser.add_argument("--projects", help="comma-separated names (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mutmut-cap", type=float, default=900.0)
    parser.add_argument("--no-mutmut", action="store_true")
    parser.add_argument("--mutmut-only", action="store_true", help="skip trainwreck test")
    parser.add_argument(
        "--results", type=Path, default=Path(tempfile.gettempdir()) / "trainwreck-public-suites"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    chosen = [p for p in projects() if not args.projects or p["name"] in args.projects.split(",")]
    results: dict[str, dict] = {}
    for project in chosen:
        if args.prepare:
            prepare(args.prepare, args.checkouts, project)
        folder = checkout(args.checkouts, project)
        out = args.results / project["name"]
        found = {}
        if not args.mutmut_only:
            found["trainwreck test"] = trainwreck(project, folder, out / "trainwreck", args.workers)
            print(project["name"], json.dumps(found["trainwreck test"]), flush=True)
        if not args.no_mutmut:
            found["mutmut"] = mutmut(project, folder, out / "mutmut", args.workers, args.mutmut_cap)
            print(project["name"], "mutmut", json.dumps(found["mutmut"]), flush=True)
        results[project["name"]] = found
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
