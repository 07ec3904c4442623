"""Adaptive seeds: every mutant starts with a few seeds and gets more only while undecided.

``adaptive_sweep`` runs a planned sweep (mutants and the unmutated loop on every seed up to
the cap, plus the fixed noop control) in rounds. Round one runs each mutant's first
``Schedule.min_seeds`` seeds, the reference on the same seeds and the control; then the
sequential rule (``experiments.symptoms.sequential``) is replayed on the stored runs, and
every undecided mutant gets ``step`` more seeds (the reference gets the seeds its loop's
mutants now need), up to ``max_seeds``. A mutant's seeds are always the first ``n`` of the
plan's seeds, in order, so the rule sees them in the order it was designed for.

Runs go through ``run`` (the harness: cache, deadlines, workers), so a seed is a run like
any other. A rerun of an interrupted sweep replays the same rounds from the cache: the
decisions are a function of stored runs only, so it reaches the round it was cut in
without training anything again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from experiments.harness.spec import RunSpec
from experiments.symptoms.sequential import MAX_SEEDS, MIN_SEEDS, Decision

MutantKey = tuple[str, str, str]  # (loop, device, identity), as the catalog groups
Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Schedule:
    min_seeds: int = MIN_SEEDS
    step: int = 2  # the rule's first crossings fall on odd seed counts: +2 loses nothing
    max_seeds: int = MAX_SEEDS

    def __post_init__(self) -> None:
        if not 1 <= self.min_seeds <= self.max_seeds or self.step < 1:
            raise ValueError(f"bad schedule {self}: need 1 <= min_seeds <= max_seeds, step >= 1")


@dataclass
class Progress:
    """What the sweep did: seeds per mutant at the end, and runs per round."""

    seeds: dict[MutantKey, int] = field(default_factory=dict)
    decisions: dict[MutantKey, Decision] = field(default_factory=dict)
    rounds: list[int] = field(default_factory=list)  # runs asked for in each round

    def summary(self) -> str:
        counts = sorted(self.seeds.values())
        if not counts:
            return "no mutants"
        capped = sum(1 for d in self.decisions.values() if d.reason.startswith("cap "))
        mean = sum(counts) / len(counts)
        return (
            f"{len(counts)} mutants in {len(self.rounds)} rounds, seeds per mutant "
            f"{counts[0]}-{counts[-1]} (mean {mean:.1f}), {capped} stopped at the cap"
        )


def mutant_key(spec: RunSpec) -> MutantKey:
    return (spec.loop_name, spec.device, spec.identity)


def shard_of(name: str, count: int) -> int:
    """A stable shard for a name (a mutant's key, a strength search), the same in every
    process (``hash()`` is salted per process)."""
    return int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % count


def shard_mutants(specs: Sequence[RunSpec], index: int, count: int) -> list[RunSpec]:
    """This shard's mutants with every seed of each, and every unmutated run.

    Shards split *mutants*, not runs (``trainwreck sweep`` splits runs by key): a mutant's
    decision needs all of its seeds, and depends only on them and the reference on the
    same seeds, so each shard runs its mutants adaptively on its own and reaches the
    decisions one unsharded sweep would. The reference runs two shards share have one key:
    the cache (and its lock) runs each once."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard index must be in [0, {count}), got {index}")
    return [
        spec
        for spec in specs
        if spec.mutant is None or shard_of("/".join(mutant_key(spec)), count) == index
    ]


def adaptive_sweep(
    specs: Sequence[RunSpec],
    seeds: Sequence[int],
    run: Callable[[list[RunSpec]], Rows],
    judge: Callable[[Rows], Mapping[MutantKey, Decision]],
    schedule: Schedule = Schedule(),
    say: Callable[[str], None] = lambda message: None,
) -> tuple[Rows, Progress]:
    """Run ``specs`` (planned on ``seeds``; unmutated runs on other seeds are the control
    and always run) in rounds until every mutant is decided or at the cap."""
    order = {seed: index for index, seed in enumerate(seeds[: schedule.max_seeds])}
    need = {mutant_key(s): schedule.min_seeds for s in specs if s.mutant is not None}
    progress = Progress()
    while True:
        reference_need: dict[tuple[str, str], int] = {}
        for (loop, device, _), count in need.items():
            reference_need[(loop, device)] = max(reference_need.get((loop, device), 0), count)
        chosen = [s for s in specs if _included(s, order, need, reference_need)]
        progress.rounds.append(len(chosen))
        rows = run(chosen)
        # Only open mutants are judged again: a decided one keeps its seeds, and so its
        # reference runs, so its verdict cannot change (judging is most of a round's
        # bookkeeping once the runs are cached).
        still_open = {key for key in need if not progress.decisions.get(key, _OPEN).decided}
        found = judge(_rows_of(chosen, rows, still_open))
        progress.decisions.update({key: found.get(key, _NOT_JUDGED) for key in still_open})
        grown = {
            key: min(count + schedule.step, schedule.max_seeds, len(order))
            for key, count in need.items()
            if not progress.decisions[key].decided
        }
        grown = {key: count for key, count in grown.items() if count > need[key]}
        progress.seeds = dict(need)
        if not grown:
            return rows, progress
        say(
            f"round {len(progress.rounds)}: {len(grown)} of {len(need)} mutants undecided, "
            f"up to {max(grown.values())} seeds"
        )
        need.update(grown)


_NOT_JUDGED = Decision(True, "not judged", ())
_OPEN = Decision(False, "not judged yet", ())


def _rows_of(chosen: Sequence[RunSpec], rows: Rows, still_open: set[MutantKey]) -> Rows:
    """The rows of the open mutants, with their loops' unmutated runs (reference, control)."""
    by_key = {row["key"]: row for row in rows}
    loops = {(loop, device) for loop, device, _ in still_open}
    wanted: dict[str, dict[str, Any]] = {}
    for spec in chosen:
        if spec.mutant is None:
            keep = (spec.loop_name, spec.device) in loops
        else:
            keep = mutant_key(spec) in still_open
        if keep and spec.key in by_key:
            wanted.setdefault(spec.key, by_key[spec.key])
    return list(wanted.values())


def _included(
    spec: RunSpec,
    order: Mapping[int, int],
    need: Mapping[MutantKey, int],
    reference_need: Mapping[tuple[str, str], int],
) -> bool:
    if spec.seed not in order:
        return spec.mutant is None  # the control's own seeds
    if spec.mutant is None:
        return order[spec.seed] < reference_need.get((spec.loop_name, spec.device), 0)
    return order[spec.seed] < need[mutant_key(spec)]
