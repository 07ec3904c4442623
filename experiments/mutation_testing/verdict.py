"""Did the mutant's bug run under the tests, and did a test that ran it fail?

Every operator declares a witness (``mutator.witness``): the runtime fact that makes a run
its bug. Each test of a mutant's run records its facts (``facts``), and so did the same
test in the baseline, on the unmutated project: ``experiments.witness.decide`` compares the
two, test by test (the same test, started the same way; values drawn from randomness the
project does not seed are left out, and the verdict says so: ``randomness``). Then:

- ``killed``: a test in which the witness fired failed, by a verdict (an assertion, a
  check), by a crash its operator declares, or by another crash after the witness fired
  (marked ``undeclared: <exception>``, for a reader to judge);
- ``stillborn``: a test failed with a crash its operator does not declare before the
  witness fired (the rewrite broke the code; it did not make the bug);
- ``survived``: every test passed and the witness fired in at least one: a test gap;
- ``unconfirmed``: the witness fired in no test (the bug never ran under the tests, had no
  effect on these models, or cannot be compared), whether the tests passed or one failed
  anyway; with the one-line reason, outside the score. Facts that change between two runs
  of the unmutated test (``stability``) are left out, and said so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from experiments.mutation_testing.discovery import Job
from experiments.mutation_testing.facts import COLLECTION
from experiments.mutation_testing.randomness import RANDOM_FACTS, WORDS, comparable
from experiments.mutation_testing.stability import UNSTABLE
from experiments.witness import CONFIRMED, STILLBORN, UNCONFIRMED, Verdict, decide, operator_parts

UNKNOWN = "unknown"
_SEED = 0  # what ``decide`` names "the reference on seed ...": here, the baseline's test
_THEIRS = f"the reference on seed {_SEED}"


@dataclass
class Judged:
    status: str  # killed | survived | stillborn | unconfirmed
    state: str  # the witness: confirmed | unconfirmed | stillborn | unknown
    witness: str  # one line: what fired, or why not
    killed_by: list[str] = field(default_factory=list)
    ran_bug: list[str] = field(default_factory=list)  # the tests in which the witness fired
    detail: str = ""


def judge(job: Job, result: Mapping[str, Any], baseline: Mapping[str, Any]) -> Judged | None:
    """The verdict on a run that ended (pytest's result) and reached its changed lines;
    None when the run recorded no facts (a command other than pytest)."""
    mine, theirs = result.get("witness"), baseline.get("witness")
    if not isinstance(mine, Mapping):
        return None
    parts = operator_parts(list(job.mutant.operators), list(job.mutant.params))
    if parts is None:
        return _undecided("an operator this installation does not know", result)
    if not isinstance(theirs, Mapping):
        return _undecided("witness not recorded in the baseline", result)
    failures = _failures(result)
    ran = [*dict.fromkeys([*(result.get("durations") or {}), *failures])]
    verdicts = {
        test: _test_verdict(parts, test, mine, theirs, baseline, failures.get(test)) for test in ran
    }
    fired = [test for test, verdict in verdicts.items() if verdict.state == CONFIRMED]
    failed = [_key(test) for test in result.get("failed") or []]
    kills = [test for test in failed if verdicts.get(test, _NONE).state == CONFIRMED]
    if kills:
        return Judged("killed", CONFIRMED, _with_crash(verdicts[kills[0]]), kills, fired)
    broken = [test for test in failed if verdicts.get(test, _NONE).state == STILLBORN]
    if broken:
        text = verdicts[broken[0]].text
        return Judged("stillborn", STILLBORN, text, [], fired, f"{broken[0]}: {text}"[:300])
    if failed:
        verdict = verdicts.get(failed[0], _NONE)
        text = f"a test failed, but its bug did not run there: {verdict.text}"
        return Judged(UNCONFIRMED, UNCONFIRMED, text, [], fired, f"failed: {', '.join(failed)}")
    if fired:
        return Judged("survived", CONFIRMED, verdicts[fired[0]].text, [], fired)
    if not verdicts:
        return Judged(UNCONFIRMED, UNCONFIRMED, "unconfirmed: no test ran", [], [])
    return Judged(UNCONFIRMED, UNCONFIRMED, _most_common(verdicts), [], [])


_NONE = Verdict(UNCONFIRMED, "not_observed", "unconfirmed (not observed): no facts for this test")


def _undecided(why: str, result: Mapping[str, Any]) -> Judged:
    passed = int(result.get("exit", 1)) == 0
    failed = list(result.get("failed") or [])
    status = "survived" if passed else "killed"
    return Judged(status, UNKNOWN, f"witness not decided: {why}", [] if passed else failed, [])


def _key(test: str) -> str:
    return COLLECTION if test.startswith(COLLECTION) else test


def _failures(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Each failed test's first recorded failure (a collection error under COLLECTION)."""
    first: dict[str, Mapping[str, Any]] = {}
    for error in result.get("errors") or []:
        if "test" in error:
            first.setdefault(_key(error["test"]), error)
    for test in result.get("failed") or []:
        first.setdefault(_key(test), {})
    return first


def _record(side: Mapping[str, Any], test: str, ran: bool) -> tuple[dict[str, Any] | None, Any]:
    """(facts, randomness record) of ``test`` on one side; facts None where it did not run
    there. A test that ran and kept no record observed nothing: the empty facts."""
    record = (side.get("tests") or {}).get(test)
    if record is not None:
        return dict(record.get("facts") or {}), record.get("random")
    return (dict(side.get("empty") or {}) if ran else None), None


def _test_verdict(
    parts: list,
    test: str,
    mine: Mapping[str, Any],
    theirs: Mapping[str, Any],
    baseline: Mapping[str, Any],
    failure: Mapping[str, Any] | None,
) -> Verdict:
    facts, my_random = _record(mine, test, True)
    in_baseline = test in (baseline.get("durations") or {}) or test == COLLECTION
    reference, their_random = _record(theirs, test, in_baseline)
    run: dict[str, Any] = {"status": "ok", "device": "cpu", "seed": _SEED, "witness": facts}
    if failure and not failure.get("verdict", True):  # a crash, not a test's verdict
        types = failure.get("types") or [failure.get("raised", "")]
        run.update(status="crash", exc_type=types[0], exc_message=failure.get("message", ""))
    if reference is None:
        text = "unconfirmed (no reference run): the baseline did not run this test"
        return Verdict(UNCONFIRMED, "no_reference", text)
    unseeded = comparable(my_random, their_random) if their_random and my_random else ""
    unstable = set((baseline.get(UNSTABLE) or {}).get(test) or ())
    for fact in (RANDOM_FACTS if unseeded else set()) | unstable:
        _leave_out(facts, fact)
        _leave_out(reference, fact)
    verdict = decide(parts, run, {"status": "ok", "witness": reference})
    if verdict.state == CONFIRMED:
        return _reworded(verdict)
    if unseeded and _uses_randomness(parts):
        words = WORDS.get(unseeded, unseeded)
        return _left_out(
            "randomness not seeded",
            f"the test draws {words} random numbers it does not seed, so its values cannot "
            "be compared with the baseline's",
            run,
        )
    shaky = sorted(unstable & _witness_facts(parts))
    if shaky:
        return _left_out(
            "values change from run to run",
            f"this test's {', '.join(shaky)} differ between two runs of the unmutated project",
            run,
        )
    return _reworded(verdict)


def _leave_out(facts: dict[str, Any], fact: str) -> None:
    """Drop ``fact``; an optimizer setting (``optimizer.grad``) from each optimizer only."""
    if fact.startswith("optimizer.") and isinstance(facts.get("optimizer"), list):
        key = fact.split(".", 1)[1]
        facts["optimizer"] = [
            {k: v for k, v in settings.items() if k != key}
            if isinstance(settings, dict)
            else settings
            for settings in facts["optimizer"]
        ]
        return
    facts.pop(fact, None)


def _left_out(reason: str, why: str, run: Mapping[str, Any]) -> Verdict:
    """Unconfirmed because the facts that could show the witness had to be left out."""
    crashed = f"; it crashed ({run['exc_type']})" if run["status"] == "crash" else ""
    key = "unseeded" if reason.startswith("randomness") else "unstable"
    return Verdict(UNCONFIRMED, key, f"unconfirmed ({reason}): {why}{crashed}")


def _witness_facts(parts: list) -> set[str]:
    facts = {fact for cls, _ in parts for fact in cls.witness.facts}
    # an optimizer setting is read from the "optimizer" fact
    return facts | {"optimizer" for fact in facts if fact.startswith("optimizer.")}


def _uses_randomness(parts: list) -> bool:
    return bool(_witness_facts(parts) & RANDOM_FACTS)


def _reworded(verdict: Verdict) -> Verdict:
    text = verdict.text.replace(_THEIRS, "the baseline's run of this test")
    return Verdict(verdict.state, verdict.reason, text, verdict.undeclared)


def _with_crash(verdict: Verdict) -> str:
    return f"{verdict.undeclared}; {verdict.text}" if verdict.undeclared else verdict.text


def _most_common(verdicts: Mapping[str, Verdict]) -> str:
    """The reason most of the tests give (the first test's words for it)."""
    reasons = Counter(verdict.reason for verdict in verdicts.values())
    reason = reasons.most_common(1)[0][0]
    return next(verdict.text for verdict in verdicts.values() if verdict.reason == reason)
