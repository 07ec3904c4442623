"""Wiring a strength search to a loop: Hydra config, the harness, the reference gate."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.adaptive import Schedule
from experiments.cli_support import UserError
from experiments.strength.axes import Axis
from experiments.strength.search import Evaluator, Result, search


@dataclass
class Session:
    axis: Axis
    evaluator: Evaluator
    results_dir: Path

    def search(self, steps: int) -> Result:
        return search(self.axis, self.evaluator, steps)


Harness = Callable[[list], list[dict]]  # RunSpecs -> their result rows


def prepare(
    loop: str,
    axis: Axis,
    overrides: Sequence[str],
    workers: int | None,
    max_seeds: int,
    harness: Harness | None = None,
) -> Session:
    """``harness`` replaces the harness (``run_sweep``): a benchmark answers from stored runs."""
    from experiments import sweep as sweeps
    from experiments.budgets import runner_budget
    from experiments.compose import compose, one_line, to_sweep
    from experiments.harness import run_sweep
    from experiments.progress import ProgressBar
    from experiments.reference_gate import ReferenceFailed, gated_sweep
    from experiments.resources import workers_for

    try:
        cfg = compose([f"loop={loop}", *overrides])
    except Exception as error:  # Hydra's compose errors name the valid choices
        raise UserError(one_line(str(error))) from None
    base = to_sweep(cfg)
    seeds = list(range(max_seeds))

    def plan(spec: str) -> list:
        return sweeps.build(
            sweeps.Sweep(
                loops=base.loops,
                operators=[spec],
                sites="first",
                seeds=seeds,
                device=base.device,
                limits=base.limits,
            )
        )

    try:
        strongest = plan(axis.spec(axis.strong))
    except sweeps.SweepError as error:
        raise UserError(str(error).splitlines()[0]) from None
    if not any(spec.mutant is not None for spec in strongest):
        raise UserError(f"operator {axis.operator!r} has no site in loop {loop!r}")
    results_dir = Path(cfg.results_dir)
    budget = runner_budget(cfg.budget)  # checked, with the output and trace caps
    chosen_workers = workers or workers_for(cfg)

    def say(note: str) -> None:
        print(f"[trainwreck] {note}", file=sys.stderr)

    def run_harness(chosen: list) -> list[dict]:
        bar = ProgressBar(sys.stderr)
        try:
            return run_sweep(
                chosen, results_dir, workers=chosen_workers, progress=bar, budget=budget
            )
        finally:
            bar.close()

    def run(specs: list) -> list[dict]:
        try:
            return gated_sweep(specs, harness or run_harness, say)
        except ReferenceFailed as failure:
            raise UserError(str(failure).splitlines()[0]) from None

    n_classes = {base.loops[0].label: cfg.loop.n_classes} if cfg.loop.n_classes else {}
    evaluator = Evaluator(
        plan, seeds, run, results_dir, n_classes, Schedule(max_seeds=max_seeds), say
    )
    return Session(axis, evaluator, results_dir)
