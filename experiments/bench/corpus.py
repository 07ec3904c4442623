"""The benchmark's cases and their ground truth.

- Source cases: every first-order mutant of the reference loops, built with the engine
  directly (no runs needed), plus each unmutated loop.
- Run cases: the stored runs under ``<results_dir>/runs/**/result.json`` (the harness
  writes them), mutants and unmutated runs across seeds.

An operator that crashes while finding its sites (the operator library is still being
written) is skipped and reported in ``problems``: the benchmark goes on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.bench.api import RunInput, ScriptInput
from experiments.loops import loop_paths
from experiments.trace import RESULT_FILE, read_trace
from experiments.unreached import SET_ASIDE

CLEAN = "none"


@dataclass(frozen=True)
class Truth:
    """What the mutation did: the answer a detector is scored against."""

    identity: str = CLEAN
    operators: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    lines: tuple[int, ...] = ()
    mutant_lines: tuple[int, ...] = ()
    contexts: tuple[str, ...] = ()  # each part's static site context (semantics.roles)

    @property
    def clean(self) -> bool:
        return self.identity == CLEAN


@dataclass
class Case:
    """One input to score: a script (source detectors) or a run (run detectors)."""

    case_id: str
    loop: str
    truth: Truth
    script: ScriptInput | None = None
    run_folder: Path | None = None
    result: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None

    def load_run(self) -> RunInput:
        assert self.run_folder is not None, "not a run case"
        return RunInput(list(read_trace(self.run_folder)), self.result, self.run_folder)


reference_loops = loop_paths  # the benchmark's name for the one list of loops


def loop_argv(epochs: int, seed: int, device: str = "cpu") -> tuple[str, ...]:
    """The reference loops' command line (see reference_loops/__init__)."""
    return ("--epochs", str(epochs), "--seed", str(seed), "--device", device)


def source_cases(
    loops: Iterable[Path],
    operators: Sequence[Any] | None = None,
    epochs: int = 1,
    seed: int = 0,
) -> tuple[list[Case], list[str]]:
    """Each loop unmutated plus each of its first-order mutants; and the problems met."""
    from mutations.registry import all_variants
    from mutator.engine import MutationError, SourceFile

    chosen = list(operators) if operators is not None else all_variants()
    cases: list[Case] = []
    problems: list[str] = []
    for path in loops:
        loop = path.stem
        relative = f"{path.parent.name}/{path.name}"
        argv = loop_argv(epochs, seed)
        text = path.read_text(encoding="utf-8")
        source = SourceFile(text, target=path.name)
        cases.append(
            Case(f"{loop}/{CLEAN}", loop, Truth(), ScriptInput(text, relative, loop, argv, seed))
        )
        for operator in chosen:
            try:
                sites = source.find_sites([operator])
                mutants = [source.apply([site]) for site in sites]
            except (MutationError, Exception) as error:  # a broken operator must not stop the run
                problems.append(
                    f"{loop}: operator {operator.label} failed: {type(error).__name__}: {error}"
                )
                continue
            for mutant in mutants:
                truth = Truth(
                    mutant.identity,
                    mutant.operators,
                    mutant.categories,
                    mutant.lines,
                    mutant.mutant_lines,
                    mutant.contexts,
                )
                script = ScriptInput(mutant.source, relative, loop, argv, seed)
                cases.append(Case(f"{loop}/{mutant.identity}", loop, truth, script))
    return cases, problems


def run_cases(results_dir: str | Path, loops: Sequence[str] | None = None) -> list[Case]:
    """Every finished run stored under ``results_dir`` (optionally of some loops)."""
    cases = []
    for path in sorted(Path(results_dir).glob(f"runs/**/{RESULT_FILE}")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # a run still being written, or a torn file: not a case yet
        loop = str(result.get("loop") or "")
        if loops and loop not in loops and Path(loop).stem not in loops:
            continue
        identity = str(result.get("identity") or CLEAN)
        if result.get("status") in SET_ASIDE:
            continue  # unreached or stillborn: the run shows no bug, so no ground truth
        truth = Truth(
            identity,
            tuple(result.get("operators") or ()),
            tuple(result.get("categories") or ()),
            tuple(result.get("lines") or ()),
            tuple(result.get("mutant_lines") or ()),
            tuple(result.get("contexts") or ()),
        )
        seed = result.get("seed")
        run_id = result.get("run_id") or f"{loop}/{identity}/seed{seed}"
        cases.append(Case(str(run_id), Path(loop).stem, truth, None, path.parent, result, seed))
    cases.sort(key=lambda case: case.case_id)
    return cases
