"""Sweeps through Hydra launchers, run as a user runs them, for tests/test_launchers*.py:
the commands of docs/scale.md exactly as printed there, and a small sharded sweep whose
rows every launcher must reproduce. Import as ``from launcher_runs import ...``."""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.harness import load_results

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SCALE_DOC = PROJECT_ROOT / "docs" / "scale.md"
SHARDS = 2
SWEEP = [
    "loop=mlp_digits",
    "mutation.operators=[drop_zero_grad,zero_grad_after_backward]",
    "budget.epochs=2",
    "seeds=[0,1]",
    f"shard.count={SHARDS}",
    f"shard.index=range({SHARDS})",
    "results_dir=results",  # relative: must land under the launch directory for every launcher
    "quiet=false",
]
# What a run's outcome is, as the catalog reads it; times and paths differ between runs.
COMPARED = ("key", "run_id", "identity", "seed", "status", "exc_type", "steps", "backward_calls")
SUMMARY_PREFIX = "[trainwreck] {"


def environment(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def documented_commands() -> list[list[str]]:
    """Every ``python -m experiments.run`` command in docs/scale.md's bash blocks, as argv."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", SCALE_DOC.read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip().startswith("python -m experiments.run"):
                commands.append(shlex.split(line))
    return commands


def documented_command(*needles: str) -> list[str]:
    """The one command of docs/scale.md holding every needle, run by this interpreter."""
    found = [c for c in documented_commands() if all(n in " ".join(c) for n in needles)]
    assert len(found) == 1, f"{len(found)} commands in docs/scale.md hold {needles}"
    return [sys.executable, *found[0][1:]]


def run(command: list[str], workdir: Path, timeout_s: float, **env: str) -> tuple[int, str]:
    done = subprocess.run(
        command,
        cwd=workdir,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout + done.stderr


def sweep(workdir: Path, *overrides: str, timeout_s: float = 300, **env: str) -> str:
    """The test sweep from ``workdir`` in a fresh interpreter, as a user would; its output."""
    command = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        *SWEEP,
        f"hydra.sweep.dir={workdir / 'multirun'}",
        *overrides,
    ]
    code, output = run(command, workdir, timeout_s, **env)
    assert code == 0, output[-4000:]
    return output


def rows(results_dir: Path) -> list[tuple]:
    return sorted(tuple(row[name] for name in COMPARED) for row in load_results(results_dir))


def summaries(text: str) -> list[dict]:
    """Each job's closing summary line (``[trainwreck] {...}``) found in ``text``."""
    found = []
    for line in text.splitlines():
        start = line.find(SUMMARY_PREFIX)
        if start >= 0:
            found.append(ast.literal_eval(line[start + len("[trainwreck] ") :]))
    return found


def assert_each_run_happened_once(found: list[dict], result_rows: list[tuple]) -> None:
    assert len(found) == SHARDS
    # Every shard holds the reference runs; a run one job ran is a cached row for the rest.
    ran = sum(summary["runs"] - summary["cached"] for summary in found)
    assert ran == len(result_rows)


def expected_keys(*overrides: str) -> set[str]:
    """The cache keys of every run of a sweep (all shards), built without running it."""
    from experiments import sweep as sweeps
    from experiments.compose import compose, to_sweep

    plain = [o for o in overrides if not o.startswith(("hydra", "++hydra", "shard."))]
    return {spec.key for spec in sweeps.build(to_sweep(compose(plain)))}


@pytest.fixture(scope="module")
def basic(tmp_path_factory) -> list[tuple]:
    """The test sweep's rows through the basic launcher, the reference for every other."""
    workdir = tmp_path_factory.mktemp("basic")
    output = sweep(workdir)
    found = rows(workdir / "results")
    assert_each_run_happened_once(summaries(output), found)
    return found
