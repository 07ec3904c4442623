"""Did a mutant's run show its bug? The decision of the witness its operator declares.

Every operator declares a witness (``mutator.witness``): a runtime fact recorded by the
harness's probes (``experiments/harness/probes.py``, the run's ``witness`` facts) and how
the mutant's must differ from the reference run's on the same seed. ``decide`` compares
the two and says what the run is:

- ``confirmed``: the witness fired (or the run crashed as its operator declares its bug
  crashes); for a higher-order mutant, one of its operators' witnesses. A crash after the
  witness fired of a kind the operator does not declare stays the bug's crash, marked
  ``undeclared: <exception>`` for a reader to judge;
- ``unconfirmed``: the run ended without its witness. ``reason`` says why, in one line:
  the mechanism had no effect on this model (a model without dropout trained in eval
  mode), it was never reached (the reference has no clipping to remove), it is not
  observable on this device (a dropped ``.to(device)`` on the CPU), the run ended (a
  timeout) before it fired, no reference run on its seed to compare with, or no facts;
- ``stillborn``: the run crashed, before its witness fired, with a crash its operator does
  not declare: the rewrite broke the script, it did not make the bug.

``unknown``: an operator this installation does not know (no claim either way).

Pure Python (no torch): the catalog, the benchmark and ``trainwreck test`` call it with
whatever holds a run's status, exception, device and facts. Everything recorded happened
before the run ended, so "fired before the crash" is "fired in the crashed run's facts".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mutator.witness import FACTS, Witness

CONFIRMED, UNCONFIRMED, STILLBORN, UNKNOWN = "confirmed", "unconfirmed", "stillborn", "unknown"
# A run's ``witness`` when its record has no such field: recorded by a harness before the
# probes (version 9) or written by hand. Its verdict is ``unknown`` (judged as before, and
# the row says so), unlike a run of this harness without telemetry, whose witness is None
# (``unconfirmed``: nothing observed it).
NOT_RECORDED = "not recorded"
# Statuses whose run ended normally: its counts are complete ("fewer" can be judged).
FINISHED = ("ok", "nan")
ENDED_EARLY = ("timeout", "oom", "killed")
# Statuses the harness already set aside (or that say nothing about a bug): not decided.
NOT_DECIDED = ("unreached", "stillborn", "invalid")


# Why a run is unconfirmed, in the words every table shows: "unconfirmed (<words>): ...".
REASONS = {
    "no_effect": "no effect on this model",
    "not_reached": "mechanism never reached",
    "device": "not observable on this device",
    "ended_early": "the run ended first",
    "no_reference": "no reference run",
    "not_observed": "not observed",
}


@dataclass(frozen=True)
class Verdict:
    state: str  # confirmed | unconfirmed | stillborn | unknown
    reason: str  # fired | declared_crash | no_effect | not_reached | device | ended_early
    #             | no_reference | not_observed | crashed_first | undecided
    text: str  # one line for a reader
    undeclared: str | None = None  # an undeclared crash after the witness fired

    @property
    def counts(self) -> bool:
        """Whether the run stands as its bug (confirmed, or nothing to decide)."""
        return self.state in (CONFIRMED, UNKNOWN)


def decide(
    operators: Sequence[tuple[type, Mapping[str, Any]]],
    run: Mapping[str, Any],
    reference: Mapping[str, Any] | None,
) -> Verdict:
    """The verdict on one mutant run. ``operators``: each part's operator class and its
    parameters; ``run``/``reference``: ``status``, ``exc_type``, ``exc_message``,
    ``device``, ``seed`` and ``witness`` (the probes' facts; None when not observed)."""
    status = str(run.get("status"))
    if status in NOT_DECIDED or not operators:
        return Verdict(UNKNOWN, "undecided", "")
    witnesses = [getattr(cls, "witness", None) for cls, _ in operators]
    if any(not isinstance(witness, Witness) for witness in witnesses):
        return Verdict(UNKNOWN, "undecided", "an operator declares no witness")
    if run.get("witness") == NOT_RECORDED or (reference or {}).get("witness") == NOT_RECORDED:
        return Verdict(UNKNOWN, "not_recorded", "witness not recorded (a run of harness < 9)")
    crash = _crash(run)
    declared = crash is not None and any(w.declares(crash) for w in witnesses)
    if declared:
        return Verdict(CONFIRMED, "declared_crash", f"crashed as its bug does: {crash}")
    results = [
        _part(witness, dict(params), run, reference)
        for witness, (_, params) in zip(witnesses, operators)
    ]
    # A higher-order mutant shows its bugs when one of them fires: combined bugs mask each
    # other (what ``trainwreck quiz interactions`` measures), so "all" would drop exactly
    # the masking pairs.
    fired = [result for result in results if result[0] is True]
    missing = [result for result in results if result[0] is not True]
    if fired:
        text = "; ".join(result[1] for result in fired)
        if crash is not None:
            return Verdict(CONFIRMED, "fired", f"{text}; then crashed", f"undeclared: {crash}")
        return Verdict(CONFIRMED, "fired", text)
    _, detail, reason = missing[0]
    if crash is not None and reason not in ("device", "no_reference", "not_observed"):
        return Verdict(
            STILLBORN,
            "crashed_first",
            f"stillborn: crashed ({crash}) before its witness fired ({detail}); not a crash "
            "its operator declares",
        )
    if status in ENDED_EARLY and reason not in ("device", "no_reference", "not_observed"):
        reason, detail = "ended_early", f"the run ended ({status}) before it fired: {detail}"
    return Verdict(UNCONFIRMED, reason, f"unconfirmed ({REASONS[reason]}): {detail}")


def _crash(run: Mapping[str, Any]) -> str | None:
    if run.get("status") != "crash":
        return None
    text = ": ".join(str(part) for part in (run.get("exc_type"), run.get("exc_message")) if part)
    text = " ".join(text.split())
    return (text if len(text) <= 200 else text[:197] + "...") or "crash"


def _part(
    witness: Witness,
    params: dict[str, Any],
    run: Mapping[str, Any],
    reference: Mapping[str, Any] | None,
) -> tuple[bool, str, str]:
    """(fired, what it showed or why not, reason) for one operator's witness."""
    device = str(run.get("device") or "cpu")
    if witness.comparison == "device":
        if device == "cpu":
            return False, f"cannot happen on the CPU: {witness.says}", "device"
        return False, f"no device-mismatch crash ({witness.says})", "no_effect"
    if witness.comparison == "crash":
        return False, f"it did not crash as declared: {witness.says}", "no_effect"
    mine = run.get("witness")
    if not isinstance(mine, Mapping):
        return (
            False,
            "no witness facts (telemetry off, or a run older than harness 9)",
            "not_observed",
        )
    theirs = reference.get("witness") if reference else None
    if not isinstance(theirs, Mapping):
        seed = run.get("seed")
        return False, f"no reference run on seed {seed} to compare its witness with", "no_reference"
    finished = str(run.get("status")) in FINISHED
    found: list[tuple[bool, str, str]] = []
    for fact in witness.facts:
        found.append(_compare(witness, fact, params, mine, theirs, finished))
        if found[-1][0]:
            return True, f"{witness.says} ({found[-1][1]})", "fired"
    why = found[0] if found else (False, "", "no_effect")
    where = f"the reference on seed {run.get('seed')}"
    detail = (
        f"not seen: {witness.says} ({why[1]}; {where})" if why[1] else f"not seen: {witness.says}"
    )
    return False, detail, why[2]


def _compare(
    witness: Witness,
    fact: str,
    params: Mapping[str, Any],
    mine: Mapping[str, Any],
    theirs: Mapping[str, Any],
    finished: bool,
) -> tuple[bool, str, str]:
    kind = FACTS.get(fact, ("value", ""))[0]
    if fact not in mine and "." not in fact:  # ``reported``: not in trainwreck test's facts
        return False, f"{fact} is not recorded where this ran", "not_observed"
    comparison = "differs" if witness.differential else witness.comparison
    m, r = _value(mine, fact, kind), _value(theirs, fact, kind)
    if kind in ("events", "count") and comparison in ("more", "fewer", "differs"):
        return _counts(fact, comparison, m, r, finished, mine, theirs)
    if comparison == "factor":
        return _factor(fact, m, r, params.get(witness.factor or "factor"))
    if kind == "sequence":
        return _sequences(fact, m, r, finished)
    if m is None or m == []:
        return False, f"no {fact} recorded", "no_effect"
    if fact == "dropout_p" and set(m) - set(r or []):
        return True, f"dropout p {sorted(set(m) - set(r or []))} vs {r}", "fired"
    if m != r and (finished or fact != "dropout_p"):
        return True, _differs(fact, m, r), "fired"
    return False, f"same {fact} as the reference", "no_effect"


def _differs(fact: str, m: Any, r: Any) -> str:
    """What differs, in a few words: for two long lists, the first place they part."""
    if isinstance(m, list) and isinstance(r, list) and len(m) > 1:
        for index, (got, want) in enumerate(zip(m, r)):
            if got != want:
                return f"{fact} #{index}: {_short(got)} vs {_short(want)}"
        return f"{fact}: {len(m)} entries vs {len(r)}"
    return f"{fact} {_short(m)} vs {_short(r)}"


def _value(facts: Mapping[str, Any], fact: str, kind: str) -> Any:
    if fact.startswith("optimizer."):
        key = fact.split(".", 1)[1]
        return [settings.get(key) for settings in facts.get("optimizer") or []]
    value = facts.get(fact)
    if kind == "events":
        return int(value[0]) if isinstance(value, list) and value else 0
    return value


def _counts(fact, comparison, m, r, finished, mine, theirs) -> tuple[bool, str, str]:
    if m is None or r is None:
        return False, f"{fact} not recorded", "no_effect"
    first = mine.get(fact)
    at = f", first after {first[1]} steps" if isinstance(first, list) and first and first[0] else ""
    more = comparison == "more" and m > r
    if more or (comparison == "differs" and m != r and (finished or m > r)):
        return True, f"{m} vs {r}{at}", "fired"
    if comparison == "fewer" and finished and m < r:
        return True, f"{m} vs {r}", "fired"
    if fact == "clip_active" and r == 0 and theirs.get("clip_calls"):
        return False, "the reference's clipping never cut a gradient", "no_effect"
    if comparison == "fewer" and r == 0:
        return False, f"the reference has no {fact} either", "not_reached"
    if fact in ("train_mode_off", "eval_mode_on") and not mine.get("mode_modules"):
        return (
            False,
            "the model has no module whose behaviour depends on train/eval mode",
            "no_effect",
        )
    return False, f"{m} vs {r}", "no_effect"


def _factor(fact, m, r, factor) -> tuple[bool, str, str]:
    m, r = (value if isinstance(value, list) or value is None else [value] for value in (m, r))
    if not m:
        return False, f"no {fact} recorded", "no_effect"
    for got, want in zip(m, r or []):
        if got != want:
            ratio = f" (x{got / want:g})" if _number(got) and _number(want) and want else ""
            return True, f"{fact} {_short(got)} vs {_short(want)}{ratio}", "fired"
    values = [want for want in (r or []) if want is not None]
    if values and _number(factor) and all(_number(v) and v * factor == v for v in values):
        return (
            False,
            f"the reference's {fact} is {_short(values[0])}, so x{factor:g} changes nothing",
            "no_effect",
        )
    return False, f"same {fact} as the reference ({_short(r)})", "no_effect"


def _sequences(fact, m, r, finished) -> tuple[bool, str, str]:
    mine, theirs = _entries(m), _entries(r)
    if not mine[1]:
        return False, f"no {fact} recorded", "no_effect"
    for index in sorted(set(mine[1]) & set(theirs[1])):
        if mine[1][index] != theirs[1][index]:
            return True, f"{fact} differ from #{index}", "fired"
    if finished and mine[0] != theirs[0]:
        return True, f"{mine[0]} {fact} vs {theirs[0]}", "fired"
    if finished and mine[2] is not None and theirs[2] is not None and mine[2] != theirs[2]:
        return True, f"{fact} differ (between samples)", "fired"
    return False, f"same {fact} as the reference", "no_effect"


def _entries(value: Any) -> tuple[int, dict[int, Any], Any]:
    """(events, index -> value, checksum) of a sampled sequence ``{"n", "chain", "at"}``
    (harness/digest.py) or a plain list."""
    if isinstance(value, Mapping):
        pairs = value.get("at") or []
        return int(value.get("n") or 0), {int(i): v for i, v in pairs}, value.get("chain")
    if isinstance(value, list):
        return len(value), {i: _freeze(v) for i, v in enumerate(value)}, None
    return 0, {}, None


def _freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = repr(value[0] if isinstance(value, list) and len(value) == 1 else value)
    return text if len(text) <= 60 else text[:57] + "..."


def operator_parts(names: Sequence[str], params: Sequence[Any]) -> list[tuple[type, dict]] | None:
    """Each named operator's class with the parameters it ran with (its defaults filled
    in); None when one is not registered here (no claim either way)."""
    from mutations.registry import operator_classes

    classes = operator_classes()
    if not names or any(name not in classes for name in names):
        return None
    parts = []
    for index, name in enumerate(names):
        given = params[index] if index < len(params) and isinstance(params[index], Mapping) else {}
        try:
            values = classes[name](**given).params
        except (TypeError, ValueError):
            values = dict(given)
        parts.append((classes[name], values))
    return parts


def decide_runs(runs: Sequence[Mapping[str, Any]]) -> list[Verdict | None]:
    """The verdict of every mutant run among ``runs`` (result rows: ``loop``, ``device``,
    ``seed``, ``argv``, ``identity``, ``operators``, ``params``, ``status``, ``witness``),
    each compared with the unmutated run (identity ``none``) of its loop, device, seed and
    argv among them; None for the unmutated runs themselves."""
    references: dict[tuple, Mapping[str, Any]] = {}
    for run in runs:
        if not _listed(run.get("operators")):
            references.setdefault(_match_key(run), run)
    verdicts: list[Verdict | None] = []
    for run in runs:
        names = _listed(run.get("operators"))
        if not names or names == ["noop"]:  # the unmutated script, or its control
            verdicts.append(None)
            continue
        parts = operator_parts(names, _listed(run.get("params")))
        if parts is None:
            verdicts.append(Verdict(UNKNOWN, "undecided", "an operator this installation lacks"))
            continue
        verdicts.append(decide(parts, run, references.get(_match_key(run))))
    return verdicts


def _match_key(run: Mapping[str, Any]) -> tuple:
    argv = run.get("argv")
    argv = tuple(argv) if isinstance(argv, (list, tuple)) else str(argv)
    return (str(run.get("loop")), str(run.get("device") or "cpu"), int(run.get("seed") or 0), argv)


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []
