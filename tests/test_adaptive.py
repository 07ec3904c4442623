"""Adaptive sweeps in rounds (experiments/adaptive.py): who gets seeds, and resume."""

import pytest

from experiments.adaptive import Schedule, adaptive_sweep, mutant_key
from experiments.harness.spec import RunSpec
from experiments.symptoms.sequential import decide

SEEDS = tuple(range(20))
CONTROL = (100, 101, 102)
# Per mutant: does seed s show the bug? clear (always), never, coin (alternates).
BEHAVIOUR = {
    "clear": lambda seed: True,
    "never": lambda seed: False,
    "coin": lambda seed: seed % 2 == 0,
}


def _specs() -> list[RunSpec]:
    specs = []
    for seed in (*SEEDS, *CONTROL):
        specs.append(RunSpec(script="t.py", source="x", seed=seed, loop="toy"))
    for name in BEHAVIOUR:
        for seed in SEEDS:
            specs.append(
                RunSpec(
                    script="t.py",
                    source=name,
                    seed=seed,
                    loop="toy",
                    mutant={"identity": name},
                )
            )
    return specs


class Store:
    """A fake harness: a cache of finished runs, and the runs it trained on each call."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.done: dict[str, dict] = {}
        self.trained: list[str] = []
        self.fail_after = fail_after

    def run(self, specs: list[RunSpec]) -> list[dict]:
        rows = []
        for spec in specs:
            if spec.key not in self.done:
                if self.fail_after is not None and len(self.trained) >= self.fail_after:
                    raise KeyboardInterrupt  # the sweep is cut mid-round
                self.trained.append(spec.key)
                shows = spec.mutant is not None and BEHAVIOUR[spec.identity](spec.seed)
                self.done[spec.key] = {
                    "key": spec.key,
                    "identity": spec.identity,
                    "loop": "toy",
                    "seed": spec.seed,
                    "shows": shows,
                }
            rows.append(self.done[spec.key])
        return rows


def judge(rows: list[dict]):
    by_mutant: dict = {}
    for row in sorted(rows, key=lambda r: r["seed"]):
        if row["identity"] != "none":
            by_mutant.setdefault(("toy", "cpu", row["identity"]), []).append(row["shows"])
    return {
        key: decide(
            ["degrades" if shows else "silent" for shows in values],
            [["worse_model"] if shows else [] for shows in values],
        )
        for key, values in by_mutant.items()
    }


def test_clear_mutants_stop_at_three_seeds_and_borderline_ones_go_to_the_cap():
    store = Store()
    rows, progress = adaptive_sweep(_specs(), SEEDS, store.run, judge)
    assert progress.seeds == {
        ("toy", "cpu", "clear"): 3,
        ("toy", "cpu", "never"): 3,
        ("toy", "cpu", "coin"): 20,
    }
    assert progress.decisions[("toy", "cpu", "coin")].reason.startswith("cap 20 seeds")
    # The reference ran on every seed a mutant needed, the control on its own seeds.
    reference_seeds = sorted(row["seed"] for row in rows if row["identity"] == "none")
    assert reference_seeds == [*SEEDS, *CONTROL]
    assert len(store.trained) == len(rows) == 3 + 3 + 20 + 20 + 3


def test_an_interrupted_sweep_resumes_without_training_anything_twice():
    uninterrupted = Store()
    adaptive_sweep(_specs(), SEEDS, uninterrupted.run, judge)
    store = Store(fail_after=len(uninterrupted.trained) - 10)
    with pytest.raises(KeyboardInterrupt):
        adaptive_sweep(_specs(), SEEDS, store.run, judge)
    before = list(store.trained)
    store.fail_after = None
    adaptive_sweep(_specs(), SEEDS, store.run, judge)
    again = store.trained[len(before) :]
    assert not set(again) & set(before)
    assert sorted(store.trained) == sorted(uninterrupted.trained)
    # A third run replays every round from the cache and trains nothing.
    count = len(store.trained)
    adaptive_sweep(_specs(), SEEDS, store.run, judge)
    assert len(store.trained) == count


def test_mutant_keys_and_schedule_checks():
    spec = RunSpec(script="t.py", source="y", loop="toy", mutant={"identity": "m"})
    assert mutant_key(spec) == ("toy", "cpu", "m")
    with pytest.raises(ValueError):
        Schedule(min_seeds=5, max_seeds=3)


def test_decided_mutants_are_not_judged_again():
    store = Store()
    seen: list[set[str]] = []

    def counting_judge(rows):
        seen.append({row["identity"] for row in rows})
        return judge(rows)

    adaptive_sweep(_specs(), SEEDS, store.run, counting_judge)
    assert seen[0] == {"none", "clear", "never", "coin"}
    assert all(identities == {"none", "coin"} for identities in seen[1:])
