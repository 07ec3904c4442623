"""Which witness facts of a test change from one run of the unmutated code to the next.

A mutant's witness compares a test's facts with the same test's in the baseline. Where a
test's values depend on something neither run controls (an environment seeded from the
system's entropy deep in a library, a loop timed by the clock, threads), two runs of the
unmutated code already differ, and any mutant would seem to change them. So, once per
project state (kept with the cached baseline), the unmutated tests that the pending
mutants will run, and whose baseline recorded values, run once more exactly as a
mutant's run does (their random states put back, ``replay``); each fact that differs from
the baseline's is *unstable* for that test. The witness decision leaves unstable facts
out and says so (``verdict``). A test that fails in the repeat is flaky: named in a note.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from experiments.harness import workdir
from experiments.mutation_testing import runs
from experiments.mutation_testing.forkserver import Pool
from experiments.mutation_testing.randomness import RANDOM_FACTS
from experiments.mutation_testing.replay import for_tests
from experiments.mutation_testing.selection import Selection

REPEATED, UNSTABLE, FLAKY = "repeated", "unstable", "flaky"


def needed(base: dict[str, Any], selections: Iterable[Selection]) -> list[str]:
    """The tests the pending mutants run whose baseline facts hold values (a sequence, a
    clip count: what randomness or timing can change) and that were not repeated yet."""
    recorded = (base.get("witness") or {}).get("tests") or {}
    done = set(base.get(REPEATED) or [])
    wanted: dict[str, None] = {}
    for chosen in selections:
        for test in recorded if chosen.tests is None else chosen.tests:
            if test not in done and _has_values((recorded.get(test) or {}).get("facts")):
                wanted[test] = None
    return list(wanted)


def _has_values(facts: dict[str, Any] | None) -> bool:
    for fact in RANDOM_FACTS:
        value = (facts or {}).get(fact)
        if (isinstance(value, dict) and value.get("n")) or (isinstance(value, int) and value):
            return True
    return False


def repeat(
    setting: runs.Setting, pool: Pool, base: dict[str, Any], tests: Sequence[str], timeout_s: float
) -> list[str]:
    """Run ``tests`` on the unmutated project once more; record in ``base`` what changed
    (``UNSTABLE``: test -> facts), which failed (``FLAKY``) and that they were repeated.
    Returns the notes to show."""
    prepared = runs.prepare(setting, 0, None)
    try:
        spec_replay = for_tests(base, list(tests))
        runs.start(
            setting,
            pool,
            "repeat",
            timeout_s,
            prepared,
            None,
            list(tests),
            plugins=base.get("plugins"),
            replay=spec_replay,
        )
        finished = next(iter(pool.wait()))
    except BaseException:
        workdir.remove(prepared.workdir)
        raise
    result, _ = runs.collect(prepared, finished.exit_code, setting.command.is_pytest)
    ran = (result or {}).get("durations") or {}
    # Only tests that ran again were learnt about (-x stops at a failure; a timeout)
    base[REPEATED] = sorted({*(base.get(REPEATED) or []), *(test for test in tests if test in ran)})
    unstable = dict(base.get(UNSTABLE) or {})
    recorded = (base.get("witness") or {}).get("tests") or {}
    again = ((result or {}).get("witness") or {}).get("tests") or {}
    empty = ((result or {}).get("witness") or {}).get("empty") or {}
    for test in tests:
        if test not in ran:
            continue
        mine = (again.get(test) or {}).get("facts") or empty
        theirs = (recorded.get(test) or {}).get("facts") or {}
        changed = sorted(
            name
            for key in theirs
            if theirs.get(key) != mine.get(key)
            for name in _changed(key, theirs.get(key), mine.get(key))
        )
        if changed:
            unstable[test] = changed
    base[UNSTABLE] = unstable
    flaky = sorted(set((result or {}).get("failed") or []))
    base[FLAKY] = sorted({*(base.get(FLAKY) or []), *flaky})
    return notes(base, len(tests), finished.exit_code is None)


def _changed(fact: str, theirs: Any, mine: Any) -> list[str]:
    """The names that changed: an optimizer's settings one by one (a gradient digest that
    follows unseeded data leaves its learning rate comparable), other facts whole."""
    if fact != "optimizer" or not isinstance(theirs, list) or not isinstance(mine, list):
        return [fact]
    if len(theirs) != len(mine):
        return [fact]
    keys = {key for settings in (*theirs, *mine) if isinstance(settings, dict) for key in settings}
    return [
        f"optimizer.{key}"
        for key in sorted(keys)
        if [s.get(key) for s in theirs if isinstance(s, dict)]
        != [s.get(key) for s in mine if isinstance(s, dict)]
    ] or [fact]


def notes(base: dict[str, Any], repeated: int = 0, timed_out: bool = False) -> list[str]:
    found = []
    if repeated:
        found.append(
            f"{repeated} tests ran once more on the unmutated project to find the values "
            f"that change from run to run: {len(base.get(UNSTABLE) or {})} had some"
            + (" (the repeat ran out of time)" if timed_out else "")
        )
    if base.get(FLAKY):
        shown = ", ".join(base[FLAKY][:3])
        found.append(f"tests that failed when the unmutated project ran again (flaky): {shown}")
    return found
