"""A mutant's status from what its run left (Stryker's vocabulary, mutmut's meaning, and
the witness of issue 28: a mutant counts only where its bug ran).

``killed``: a test in which the mutant's witness fired failed (``killed_by`` names those
tests; ``verdict``); ``survived``: the tests passed and the witness fired in one of them,
a test gap; ``unconfirmed``: the witness fired in no test (the bug never ran under the
tests, or had no effect there), outside the score, with its reason in ``witness``;
``timeout``: it was still running at its deadline; ``stillborn``: it failed with a crash
its operator does not declare, before its witness fired, or with a Python-level error
raised at a changed line (``experiments.stillborn``), so no test caught the bug it names;
``unreached``: the tests never executed the changed lines (by the baseline's per-test
coverage, before any run, or by the mutant's reach probes, after it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from experiments.harness.reach import summary as reach_summary
from experiments.mutation_testing.discovery import Job
from experiments.mutation_testing.verdict import UNKNOWN, judge
from experiments.stillborn import Raised, is_stillborn

STATUSES = ("killed", "survived", "unconfirmed", "timeout", "stillborn", "unreached")
SCORED = ("killed", "survived")
# A run that records no witness facts (a command other than pytest; tests that fail with
# the probes in): its kill or survival stands as the exit status says, and the row says
# the witness was not checked.
NOT_OBSERVED = "witness not checked: the run recorded no facts (see the notes)"


@dataclass
class Row:
    """One line of ``mutants.csv`` (and of the cache)."""

    identity: str
    file: str
    line: int
    operator: str
    category: str
    status: str
    killed_by: list[str] = field(default_factory=list)
    # Per ``killed_by`` entry, what that test failed with: ``phase:Class`` (``failure_kinds``)
    failed_with: list[str] = field(default_factory=list)
    tests_run: int | None = None  # None: every test the command collects
    # The tests that ran its changed lines in the baseline ([] with no per-test lines)
    covered_by: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    tests_s: float = 0.0  # the selected tests' own time (pytest's durations)
    cpu_s: float = 0.0  # the run's CPU time, which a busy machine does not inflate
    # Killed with no test's verdict: what the first failing test crashed with (``TypeError``)
    crash: str = ""
    detail: str = ""
    # The witness (``verdict``): what fired, or why not, in one line; its state
    # (confirmed | unconfirmed | stillborn | unknown; "" where nothing was decided).
    witness: str = ""
    witness_state: str = ""
    ran_bug: list[str] = field(default_factory=list)  # the tests in which it fired
    warm: bool = False  # forked from the warm project's server (no import, no collection)
    sha256: str = ""
    cached: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def row_for(job: Job, status: str, **values: Any) -> Row:
    return Row(
        identity=job.identity,
        file=job.target.name,
        line=job.line,
        operator="+".join(job.operator_labels),
        category="+".join(dict.fromkeys(job.mutant.categories)),
        status=status,
        sha256=job.sha256,
        **values,
    )


def bug_ran(result: dict[str, Any], trust_reach: bool = True) -> bool | None:
    """Whether a changed line ran at all (the reach probes): False (it did not), True, or
    None (cannot tell: lines run in other processes). Whether the bug it makes ran is the
    witness's question (``verdict.judge``), asked once this says the line ran."""
    if not trust_reach:
        return None
    return reach_summary(result.get("reach"))["reached"]


@dataclass
class Classified:
    status: str
    killed_by: list[str] = field(default_factory=list)
    detail: str = ""
    witness: str = ""
    witness_state: str = ""
    ran_bug: list[str] = field(default_factory=list)


def classify(
    job: Job,
    exit_code: int | None,
    result: dict[str, Any] | None,
    tail: str,
    trust_reach: bool = True,
    baseline: dict[str, Any] | None = None,
) -> Classified:
    """The status of a finished run. ``exit_code`` None: timed out. ``baseline``: the
    unmutated run, whose per-test witness facts the mutant's are compared with."""
    if exit_code is None:
        return Classified("timeout", detail="still running at its deadline")
    if result is None:
        last = tail.strip().splitlines()[-1:] or [""]
        why = "witness not recorded: the test process died before writing its facts"
        return Classified(
            "killed",
            ["<the test process died>"],
            f"exit {exit_code} {last[0]}".strip(),
            why,
            UNKNOWN,
        )
    failed = list(result.get("failed") or [])
    passed = int(result.get("exit", exit_code)) == 0
    observed = isinstance(result.get("witness"), dict)
    if bug_ran(result, trust_reach) is False:
        if passed:
            return Classified("unreached", detail="the changed lines never ran")
        note = "failed although the changed lines never ran: a flaky test?"
        if observed:
            why = "unconfirmed (mechanism never reached): the changed lines never ran"
            return Classified(
                "unconfirmed", [], f"{note} ({', '.join(failed)})", why, "unconfirmed"
            )
        return Classified("killed", failed, note, NOT_OBSERVED, UNKNOWN)
    changed = {job.target.name: set(job.mutant.mutant_lines)}
    for error in result.get("errors") or []:
        raised = Raised(tuple(error["types"]), error["message"], tuple(map(tuple, error["frames"])))
        if is_stillborn(raised, changed, job.declares_crash):
            line = next(line for path, line in reversed(raised.frames) if path in changed)
            detail = f"{raised.name} at line {line}: {raised.message}"[:300]
            why = f"stillborn: {raised.name} raised at a changed line, before any bug could run"
            return Classified("stillborn", [], detail, why, "stillborn")
    judged = judge(job, result, baseline or {}) if observed else None
    if judged is not None:
        return Classified(
            judged.status,
            judged.killed_by,
            judged.detail,
            judged.witness[:300],
            judged.state,
            judged.ran_bug,
        )
    if passed:
        return Classified("survived", [], "", NOT_OBSERVED, UNKNOWN)
    killed_by = failed or [f"<exit status {result.get('exit', exit_code)}>"]
    return Classified("killed", killed_by, "", NOT_OBSERVED, UNKNOWN)


def failure_kinds(killed_by: list[str], result: dict[str, Any] | None) -> list[str]:
    """What each test of ``killed_by`` failed with, in the same order: ``phase:Class``
    (``call:CheckFailed``, ``setup:RuntimeError``, ``collect:ImportError``), or ``""``
    where the run recorded none (a process that died, a command other than pytest).

    It tells a check's verdict from a crash under a test or a broken fixture, which the
    status alone cannot: each is a failing test and kills the mutant.
    """
    first: dict[str, str] = {}
    for error in (result or {}).get("errors") or []:
        if "test" in error and "raised" in error:
            first.setdefault(error["test"], f"{error['when']}:{error['raised']}")
    return [first.get(test, "") for test in killed_by]


def crash_kind(killed_by: list[str], result: dict[str, Any] | None) -> str:
    """For a kill where no failing test gave a verdict (an assertion, a check's
    ``CheckFailed``, ``pytest.fail``) but each crashed under it, the first crash's class;
    else ``""``. Such a kill may come from code that broke, not from a test that checks
    the bug (a ``TypeError`` inside a framework after a removed call)."""
    first: dict[str, dict[str, Any]] = {}
    for error in (result or {}).get("errors") or []:
        if "test" in error and "verdict" in error:
            first.setdefault(error["test"], error)
    seen = [first[test] for test in killed_by if test in first]
    if not seen or any(error["verdict"] for error in seen):
        return ""
    return str(seen[0]["raised"])
