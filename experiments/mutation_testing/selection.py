"""The tests a mutant needs: those that executed one of its changed lines in the baseline.

mutmut 3 does the same with per-test coverage. A test that never ran the changed code
cannot fail because of it, with three exceptions handled here: code run while test
modules were imported (module-level statements, class bodies) affects every test; code
run while a fixture wider than a function was set up affects every test that uses the
fixture; code run in another process (a data loader worker, a subprocess) was not
recorded at all, so a baseline whose tests started processes selects every test and
never calls a mutant unreached from coverage alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.mutation_testing.discovery import Job
from experiments.mutation_testing.lines import COLLECT, FIXTURE, contexts_running, spans

EVERY_TEST = None


@dataclass(frozen=True)
class Selection:
    tests: list[str] | None  # None: every test (no narrowing); []: no test ran the lines
    why: str
    # Whether the changed lines may have run while the tests were imported and collected
    # (True where the baseline cannot tell): then a warm project cannot take the mutant.
    at_import: bool = True


def select(job: Job, baseline: dict[str, Any]) -> Selection:
    lines = baseline.get("lines")
    if lines is None:
        return Selection(EVERY_TEST, "no per-test coverage (the command is not pytest)")
    unprobed = (baseline.get("unprobed") or {}).get(job.target.name)
    if unprobed:
        return Selection(EVERY_TEST, f"{job.target.name} was {unprobed}")
    wanted = spans(job.target.source, job.mutant.lines)
    if not wanted or any(len(span) == 0 for span in wanted):
        return Selection(EVERY_TEST, "a changed line outside any statement")
    contexts = contexts_running(lines, job.target.name, wanted)
    at_import = COLLECT in contexts  # collection runs in this process: seen even so
    if baseline.get("spawned"):
        why = "the tests start processes, whose lines are not recorded"
        return Selection(EVERY_TEST, why, at_import=at_import)
    items = baseline.get("items") or []
    if at_import:
        return Selection(EVERY_TEST, "the changed lines run when the test modules are imported")
    chosen: set[str] = set()
    for context in contexts:
        if context.startswith(FIXTURE):
            name = context[len(FIXTURE) :]
            chosen.update(item["id"] for item in items if name in item["fixtures"])
        else:
            chosen.add(context)
    ordered = [item["id"] for item in items if item["id"] in chosen]
    if not ordered:
        return Selection([], "no test executed the changed lines", at_import=False)
    why = f"{len(ordered)} of {len(items)} tests executed the changed lines"
    return Selection(ordered, why, at_import=False)
