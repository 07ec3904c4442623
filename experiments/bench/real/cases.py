"""The real faults of the replay set as benchmark cases (issue 32).

Each fault is read from its mirror (faulty = the fix's parent, fixed = the fix), coupled
with the operators (``coupling``), and, when a run detector is scored, run offline where
its entry says how (``runs``). Cases, beside the mutants' and never mixed into their scores:

- source: the faulty file (ground truth: the fault's lines, in the faulty file's
  coordinates) and the fixed file (clean) of every fault that was read. Like a mutant's
  code, the faulty code stays ground truth when its runs here show nothing (a ``.cuda()``
  fault is inert on a CPU, not absent);
- runs: the faulty runs of the faults that stand as ground truth (``runs.standing``:
  a healthy fixed version, the fault's lines reached, the runs not identical to the fixed
  ones on every seed), the fixed runs (clean), and the runs of the coupled mutant of the
  same fixed file on the same seeds.

``loop`` of every case is ``real/<fault id>``: no real case joins a reference loop's group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.bench.api import ScriptInput
from experiments.bench.corpus import CLEAN, Case, Truth
from experiments.bench.real.coupling import EQUIVALENT, EXACT, UNREAD, Coupling, couple
from experiments.bench.real.diff import diff, flatten
from experiments.bench.real.replay import CATEGORY_OF_CLASS, Fault, Pair, load, read_pair
from experiments.bench.real.runs import (
    LIVE,
    FaultRuns,
    Variant,
    faulty_identity,
    mutant_variant,
    run_fault,
)
from experiments.unreached import SET_ASIDE

PREFIX = "real/"


@dataclass
class RealFault:
    """One fault of the replay set as the benchmark sees it."""

    fault: Fault
    coupling: Coupling
    pair: Pair | None = None
    runs: FaultRuns | None = None  # None: not run (no run detector was scored)
    fixed_lines: tuple[int, ...] = field(default=())  # the fault's place in the fixed file

    @property
    def loop(self) -> str:
        return PREFIX + self.fault.id

    @property
    def read(self) -> bool:
        return self.pair is not None and self.coupling.verdict != UNREAD

    @property
    def coupled(self) -> tuple[str, ...]:
        """The operators whose mutant is this fault (exact or equivalent), else ()."""
        return self.coupling.operators if self.coupling.verdict in (EXACT, EQUIVALENT) else ()

    @property
    def categories(self) -> tuple[str, ...]:
        from mutations.registry import operator_classes

        classes = operator_classes()
        found = [CATEGORY_OF_CLASS.get(self.fault.fault_class, "")]
        found += [classes[name].category for name in self.coupled if name in classes]
        return tuple(dict.fromkeys(name for name in found if name))

    def truth(self) -> Truth:
        return Truth(
            identity=faulty_identity(self.fault),
            operators=self.coupled,
            categories=self.categories,
            lines=self.fixed_lines,
            mutant_lines=self.fault.lines,
        )

    def mutant_truth(self) -> Truth | None:
        """The coupled mutant of the fixed file (the operator's rewrite), or None."""
        if not (self.coupled and self.coupling.source):
            return None
        entry = self.coupling.entry
        return Truth(
            self.coupling.identity,
            tuple(entry.get("operators", ())),
            tuple(entry.get("categories", ())),
            tuple(entry.get("lines", ())),
            tuple(entry.get("mutant_lines", ())),
            tuple(entry.get("contexts", ())),
        )

    def static_standing(self) -> str:
        """LIVE when the faulty file is ground truth for source detectors, else why not."""
        return LIVE if self.read else f"not read: {self.coupling.reason}"

    def run_standing(self) -> str:
        if not self.read:
            return self.static_standing()
        return self.runs.standing if self.runs is not None else "not run (no run detector)"

    def provenance(self) -> dict[str, Any]:
        fault = self.fault
        return {
            "id": fault.id,
            "repository": fault.repository,
            "fix": fault.fix,
            "parent": fault.parent,
            "path": fault.path,
            "lines": list(fault.lines),  # in the faulty file (the parent's version)
            "fixed_lines": list(self.fixed_lines),
            "class": fault.fault_class,
            "categories": list(self.categories),
            "description": fault.description,
            "source_thread": fault.source,
            "coupling": self.coupling.verdict,
            "coupled_operators": list(self.coupled),
            "coupled_mutant": self.coupling.identity if self.coupled else "",
            "standing_operator": fault.operator,
            "static_standing": self.static_standing(),
            "run_standing": self.run_standing(),
        }


def _fixed_lines(fault: Fault, pair: Pair) -> tuple[int, ...]:
    """Lines of the fixed file that the fault's edits replace (or sit between)."""
    edits = [
        e for e in diff(flatten(pair.fixed), flatten(pair.faulty)) if e.touches_b(set(fault.lines))
    ]
    lines: set[int] = set()
    for edit in edits:
        first, last = edit.a_lines
        lines.update(range(first, min(last, first + 200) + 1))
    return tuple(sorted(lines))


def collect(mirrors: Path, replay_set: Path, only: list[str] | None = None) -> list[RealFault]:
    """Every fault of the set, read and coupled (unread ones kept, with the reason)."""
    found = []
    for fault in load(replay_set):
        if only and fault.id not in only:
            continue
        try:
            pair = read_pair(fault, mirrors)
        except ValueError as error:
            found.append(RealFault(fault, Coupling(fault, UNREAD, reason=str(error))))
            continue
        coupling = couple(fault, pair)
        lines = _fixed_lines(fault, pair) if coupling.verdict != UNREAD else ()
        found.append(RealFault(fault, coupling, pair, fixed_lines=lines))
    return found


def run_all(faults: list[RealFault], mirrors: Path, seeds: int, results_dir: Path) -> None:
    """The offline runs of every read fault that declares one (fixed, faulty and the
    coupled mutant), stored under ``results_dir``; the others get their reason."""
    for item in faults:
        if not item.read:
            continue
        assert item.pair is not None
        mutants = mutant_variants(item)
        item.runs = run_fault(item.fault, item.pair, mirrors, seeds, results_dir, mutants)


def source_cases(faults: list[RealFault]) -> list[Case]:
    """The faulty and fixed file of every fault that was read."""
    cases = []
    for item in faults:
        if not item.read:
            continue
        assert item.pair is not None
        path = f"{item.fault.repository}/{item.fault.path}"
        fixed = ScriptInput(item.pair.fixed, path, item.loop)
        faulty = ScriptInput(item.pair.faulty, path, item.loop)
        cases.append(Case(f"{item.loop}/{CLEAN}", item.loop, Truth(), fixed))
        cases.append(Case(f"{item.loop}/faulty", item.loop, item.truth(), faulty))
        mutant = item.mutant_truth()
        if mutant is not None:
            script = ScriptInput(item.coupling.source, path, item.loop)
            cases.append(Case(f"{item.loop}/{mutant.identity}", item.loop, mutant, script))
    return cases


def run_cases(faults: list[RealFault]) -> list[Case]:
    """Fixed, faulty and coupled-mutant runs of the faults whose runs are ground truth."""
    cases = []
    for item in faults:
        runs = item.runs
        if runs is None or runs.standing != LIVE:
            continue
        labelled = [(CLEAN, Truth()), (faulty_identity(item.fault), item.truth())]
        mutant = item.mutant_truth()
        if mutant is not None:
            labelled.append((mutant.identity, mutant))
        for identity, truth in labelled:
            for seed in range(runs.seeds):
                run = runs.run(identity, seed)
                if run is None or run.status in SET_ASIDE:
                    continue
                role = "faulty" if identity.startswith("real::") else identity
                case_id = f"{item.loop}/{role}/seed{seed}"
                cases.append(Case(case_id, item.loop, truth, None, run.folder, run.result, seed))
    return cases


def mutant_variants(item: RealFault) -> list[Variant]:
    """The coupled mutant of a fault as a run variant (empty when there is none)."""
    if not (item.coupled and item.coupling.source and item.pair):
        return []
    entry = {**item.coupling.entry, "diff": ""}
    return [mutant_variant(entry, item.pair.fixed, item.coupling.source)]
