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
    finished, result, tail = _attempt(setting, pool, targets)
    witness_off = ""
    if _failed(finished, result) and setting.witness and setting.command.is_pytest:
        # The tests may fail only because the witness probes are in (a hook a test or a
        # library does not expect): then the session runs without them, and says so.
        why = _first_failure(result, tail)
        setting.witness = False
        again = _attempt(setting, pool, targets)
        if _failed(again[0], again[1]):
            setting.witness = True
        else:
            finished, result, tail = again
            witness_off = (
                f"the tests fail with the witness probes installed ({why}) and pass without "
                "them: no witness was recorded, every mutant is counted by its tests' exit "
                "status (witness not checked)"
            )
    if _failed(finished, result):
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
    assert result is not None
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
        "witness_off": witness_off,
    }


def _attempt(setting: runs.Setting, pool: Pool, targets: list[Target]) -> tuple[Any, Any, str]:
    """(finished, result, output's tail) of one run of the unmutated command."""
    prepared = runs.prepare(setting, 0, None)
    try:
        runs.start(setting, pool, "baseline", DEFAULT_TIMEOUT_S, prepared, None, record=targets)
        finished = next(iter(pool.wait()))
    except BaseException:
        workdir.remove(prepared.workdir)
        raise
    result, tail = runs.collect(prepared, finished.exit_code, setting.command.is_pytest)
    return finished, result, tail


def _failed(finished: Any, result: dict[str, Any] | None) -> bool:
    return finished.exit_code is None or result is None or result.get("exit") != 0


def _first_failure(result: dict[str, Any] | None, tail: str) -> str:
    failed = (result or {}).get("failed") or []
    errors = {e["test"]: e for e in (result or {}).get("errors") or [] if "test" in e}
    if failed:
        error = errors.get(failed[0], {})
        what = f"{error.get('raised', '')}: {error.get('message', '')}".strip(": ")
        return f"{failed[0]}: {what[:160]}" if what else failed[0]
    return tail.strip().splitlines()[-1][:200] if tail.strip() else "no output"
