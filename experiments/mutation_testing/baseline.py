"""The unmutated command first: it must pass, or nothing can be said about a mutant.

Its run also gives what the mutants' runs are measured against: its time (deadlines
scale from it) and, with pytest, each test's time, which test executed which line of
the mutated files (``lines``), by target name, and each test's witness facts on the
unmutated project (``witness``: the reference every mutant's test is compared with).
"""

from __future__ import annotations

import os
from typing import Any

from experiments.cli_support import UserError
from experiments.harness import workdir
from experiments.mutation_testing import advice, runs
from experiments.mutation_testing.discovery import Target
from experiments.mutation_testing.forkserver import Pool

FAILED = 1  # the exit status when the baseline fails: the user's tests, not their input
DEFAULT_TIMEOUT_S = 3600.0


class BaselineFailed(UserError):
    """The unmutated command did not pass: one line, then its output's tail."""


def run(setting: runs.Setting, pool: Pool, targets: list[Target]) -> dict[str, Any]:
    prepared = runs.prepare(setting, 0, None)
    try:
        runs.start(setting, pool, "baseline", DEFAULT_TIMEOUT_S, prepared, None, record=targets)
        finished = next(iter(pool.wait()))
    except BaseException:
        workdir.remove(prepared.workdir)
        raise
    result, tail = runs.collect(prepared, finished.exit_code, setting.command.is_pytest)
    if finished.exit_code is None or result is None or result.get("exit") != 0:
        how = (
            "did not end within an hour"
            if finished.exit_code is None
            else f"failed (exit status {result.get('exit')})"
            if result
            else f"died (exit status {finished.exit_code})"
        )
        tail_lines = "\n".join("    " + line for line in tail.rstrip().splitlines()[-25:])
        hint = advice.for_usage_error(tail) if result and result.get("exit") == 4 else ""
        raise BaselineFailed(
            f"the unmutated command `{setting.command.text()}` {how}; no mutant was run: "
            f"make it pass in {setting.root} first{hint}\nlast lines of its output:\n{tail_lines}"
        )
    elsewhere = result.get("elsewhere") or {}
    if elsewhere:
        name, path = next(iter(elsewhere.items()))
        raise BaselineFailed(
            f"the tests import {name} from {path}, not from {setting.root}: no mutant of it "
            "would ever run; install the project in editable mode (pip install -e .) or "
            "put its folder first on the path"
        )
    names = {os.path.realpath(target.path): target.name for target in targets}
    lines = None  # not recorded: any command but pytest
    if result.get("lines") is not None:
        lines = {
            context: {names.get(path, path): hit for path, hit in files.items()}
            for context, files in result["lines"].items()
        }
    return {
        "wall_s": finished.wall_s,
        "items": result.get("items") or [],
        "durations": result.get("durations") or {},
        "lines": lines,
        "spawned": result.get("spawned") or [],
        "unprobed": result.get("unprobed") or {},
        "turned_off": result.get("turned_off") or [],
        "plugins": result.get("plugins"),
        "witness": result.get("witness"),
    }
