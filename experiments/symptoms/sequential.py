"""When is a mutant's verdict decided? A sequential test over its seeds (docs/adaptive.md).

A mutant's verdict is made of per-seed yes/no *indicators*: for every severity level, "this
seed's run is at least that bad" (the measured severity is the worst level reached in at
least half the seeds), and for every label that fired in any seed, "this label fired on
this seed" (a label is stable from 80% of seeds). Each indicator is a Bernoulli sequence
with an unknown rate q. Wald's sequential probability ratio test (SPRT) between
H0: q = ``P0`` (the indicator is off, with noise) and H1: q = ``P1`` (it is on) adds
``log(P1/P0)`` per seed that has it and ``log((1-P1)/(1-P0))`` per seed that has not; it
accepts a hypothesis when the sum leaves ``(log(BETA/(1-ALPHA)), log((1-BETA)/ALPHA))``.
With the symmetric ``P0 = 0.2, P1 = 0.8`` each seed moves the sum by +-log 4, so the test
is the walk ``yes - no`` and it stops at +-3: three seeds that agree decide; 2 of 3 does
not. Seeds beyond ``MAX_SEEDS`` are never run: an indicator still undecided there keeps
its majority verdict and the mutant is reported as stopped by the cap.

``error_rates`` computes the exact probabilities of each ending for any true q (the walk
is small enough to enumerate), which the docs tabulate and the tests check against
simulation: at q = P0 the test wrongly accepts H1 with probability 63/4095 = 1.5%, under
the ALPHA = 5% that Wald's bound promises.

A mutant is decided when every indicator is; an invalid mutant (nothing ran) is decided
at once. Because a mutant's seeds are judged against the reference runs on the same
seeds, a decision depends only on its own seeds' runs and those references (earlier
seeds' verdicts are recomputed as the reference grows, so an indicator can reopen):
replaying the rule on stored runs
gives the same seeds and the same reasons (this is how an interrupted adaptive sweep
resumes and how the catalog shows why each mutant stopped).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from experiments.symptoms.vocabulary import MARKERS, SEVERITY_ORDER, base_name, rank

P0 = 0.2  # an indicator that is "off" still fires this often (noise, thresholds)
P1 = 0.8  # an indicator that is "on" fires at least this often (STABLE_FRACTION)
ALPHA = 0.05  # P(accept "on" | q = P0), Wald's bound
BETA = 0.05  # P(accept "off" | q = P1)
MIN_SEEDS = 3
MAX_SEEDS = 20
# Severity levels that are indicators ("silent" is the complement of all of them).
LEVELS = tuple(level for level in SEVERITY_ORDER if level != "silent")
NOT_LABELS = MARKERS


def _steps() -> tuple[float, float, float, float]:
    up = math.log(P1 / P0)
    down = math.log((1 - P1) / (1 - P0))
    return up, down, math.log(BETA / (1 - ALPHA)), math.log((1 - BETA) / ALPHA)


def sprt(yes: int, no: int) -> str | None:
    """``"on"``, ``"off"`` or None (keep sampling) after ``yes`` + ``no`` seeds."""
    up, down, lower, upper = _steps()
    total = yes * up + no * down
    if total >= upper:
        return "on"
    if total <= lower:
        return "off"
    return None


def first_passage(values: Sequence[bool]) -> str | None:
    """The test's ending over seeds in order: once a boundary is crossed the indicator is
    decided, whatever later seeds (run for the other indicators) say."""
    yes = 0
    for count, value in enumerate(values, start=1):
        yes += bool(value)
        ending = sprt(yes, count - yes)
        if ending is not None:
            return ending
    return None


@dataclass(frozen=True)
class Decision:
    decided: bool
    reason: str  # one line for the tables
    undecided: tuple[str, ...]  # the indicators still open


def indicators(severities: Sequence[str], labels: Sequence[Sequence[str]]) -> dict[str, list[bool]]:
    """Per-seed yes/no for each severity level and each label seen on any seed."""
    found: dict[str, list[bool]] = {
        f">={level}": [rank(severity) <= rank(level) for severity in severities] for level in LEVELS
    }
    bases = [{base_name(label) for label in seed if label not in NOT_LABELS} for seed in labels]
    for name in sorted(set().union(*bases) if bases else set()):
        found[name] = [name in seed for seed in bases]
    return found


def decide(
    severities: Sequence[str],
    labels: Sequence[Sequence[str]],
    *,
    min_seeds: int = MIN_SEEDS,
    max_seeds: int = MAX_SEEDS,
) -> Decision:
    """Is the verdict over these seeds (one severity and one label list per seed) decided?"""
    n = len(severities)
    if n and all(list(seed) == ["invalid"] for seed in labels):
        return Decision(True, f"invalid mutant ({n} seeds)", ())
    if n < min_seeds:
        return Decision(False, f"{n} seeds, fewer than {min_seeds}", ("min_seeds",))
    open_ = []
    for name, values in indicators(severities, labels).items():
        if first_passage(values) is None:
            open_.append(f"{name} {sum(values)}/{len(values)}")
    if not open_:
        return Decision(True, f"decided at {n} seeds", ())
    # Shown: the open labels, then the worst open severity level (the levels below it
    # are open for the same seeds and would only repeat it).
    levels = [name for name in open_ if name.startswith(">=")]
    shown = ", ".join([name for name in open_ if not name.startswith(">=")][:2] + levels[:1])
    if n >= max_seeds:
        return Decision(True, f"cap {max_seeds} seeds, open: {shown}", tuple(open_))
    return Decision(False, f"open at {n} seeds: {shown}", tuple(open_))


@cache
def error_rates(q: float, max_seeds: int = MAX_SEEDS) -> tuple[float, float, float, float]:
    """Exact (P(on), P(off), P(cap), expected seeds) of one indicator with true rate ``q``
    under the rule (sampling stops at a boundary or at ``max_seeds``)."""
    states = {(0, 0): 1.0}  # (yes, no) -> probability of being there and still open
    on = off = expected = 0.0
    for _ in range(max_seeds):
        following: dict[tuple[int, int], float] = {}
        for (yes, no), probability in states.items():
            for step, weight in (((yes + 1, no), q), ((yes, no + 1), 1 - q)):
                if weight == 0:
                    continue
                mass = probability * weight
                ending = sprt(*step)
                if ending == "on":
                    on += mass
                    expected += mass * sum(step)
                elif ending == "off":
                    off += mass
                    expected += mass * sum(step)
                else:
                    following[step] = following.get(step, 0.0) + mass
        states = following
    capped = sum(states.values())
    expected += capped * max_seeds
    return on, off, capped, expected


def decisions(runs, run_labels, run_severity) -> dict[tuple[str, str, str], Decision]:
    """The decision of every judged (loop, device, identity) of a catalog frame, replayed
    from its runs' verdicts in seed order (``runs`` is sorted by seed within a mutant)."""
    per_mutant: dict[tuple[str, str, str], tuple[list[str], list[list[str]]]] = {}
    for position, (loop, device, identity) in enumerate(
        zip(runs["loop"], runs["device"], runs["identity"])
    ):
        severity = run_severity.iloc[position]
        if severity is None:  # a reference run: not judged
            continue
        severities, labels = per_mutant.setdefault((loop, device, identity), ([], []))
        severities.append(severity)
        labels.append(list(run_labels.iloc[position]))
    return {key: decide(*value) for key, value in per_mutant.items()}
