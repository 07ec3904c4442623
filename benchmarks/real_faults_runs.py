"""The real bug beside its mutant, run through the harness (issue 32).

For each fault that declares an offline run (``run`` in the replay set), the fixed file (the
reference), the faulty file and the candidate mutants of the static coupling (the exact one,
or those of the fault's operator and those touching the fault) run on the same seeds
(``experiments.bench.real.runs``: the tree of the fix commit in a temporary folder, the gym
shim where the entry asks for it). What each run computed is compared with
``experiments.equivalence.run_digest``:

- a fault that does not stand as ground truth (a fixed version that is not ``ok`` on every
  seed, lines never reached, or faulty runs equal to the fixed runs on every seed: *inert
  offline*) gets no equivalent mutant, and the section says why;
- otherwise a candidate whose runs have the faulty runs' digest on every seed makes the
  fault ``equivalent`` (an ``exact`` verdict stays ``exact``).

Each variant is also judged as the catalog judges a mutant against the fixed runs (outcome,
severity, symptoms; ``experiments.catalog.tables``), so the real bug and its mutant are
compared on what they did, not only on whether they computed the same.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from experiments.bench.real.coupling import EQUIVALENT, EXACT, Coupling
from experiments.bench.real.replay import read_pair
from experiments.bench.real.runs import (
    LIVE,
    FaultRuns,
    Variant,
    faulty_identity,
    mutant_variant,
    run_fault,
)
from experiments.catalog.runs import load_runs
from experiments.catalog.tables import build_tables
from mutations.registry import all_variants
from mutator import SourceFile

SHOWN = ("optimizer_steps", "initial_loss", "final_loss", "first_nan_step")


def _candidates(coupling: Coupling, fixed: str, name: str) -> list[Variant]:
    """Each candidate mutant of the static coupling as a run variant."""
    if coupling.verdict == EXACT and coupling.source:
        return [mutant_variant({**coupling.entry, "diff": ""}, fixed, coupling.source)]
    source = SourceFile(fixed, name)
    sites = {site.identity: site for site in source.find_sites(all_variants())}
    found = []
    for identity in sorted(set(coupling.candidates)):
        parts = [sites.get(part) for part in identity.split("+")]
        if any(part is None for part in parts):
            continue
        mutant = source.apply(parts)
        found.append(mutant_variant({**mutant.manifest_entry(), "diff": ""}, fixed, mutant.source))
    return found


def _judged(results_dir: Path, runs: FaultRuns) -> dict[str, dict[str, Any]]:
    """identity -> the catalog's judgement of that variant against the fixed runs."""
    keys = {run.folder.name for run in runs.runs.values()}
    if not keys:
        return {}
    symptoms = build_tables(load_runs(results_dir, keys=keys)).symptoms
    if symptoms.empty:
        return {}
    return {
        str(row["identity"]): {
            "measured": row.get("measured"),
            "outcome": row.get("outcome"),
            "symptoms": row.get("symptoms"),
        }
        for _, row in symptoms.iterrows()
    }


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return str(value).replace("|", "/") or "-"


def _row(label: str, runs: FaultRuns, identity: str, judged: dict) -> str:
    found = runs.of(identity)
    statuses = "/".join(sorted({run.status for run in found})) or "-"
    cells = []
    for name in SHOWN:
        values = [run.features.get(name) for run in found]
        cells.append("/".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in values))
    verdict = judged.get(runs.aliases.get(identity, identity), {})
    extra = [_cell(verdict.get(key)) for key in ("measured", "outcome", "symptoms")]
    return f"| {label} | {statuses} | " + " | ".join([*cells, *extra]) + " |"


def side_by_side(coupling: Coupling, runs: FaultRuns, judged: dict) -> list[str]:
    fault = coupling.fault
    faulty = faulty_identity(fault)
    lines = [f"### {fault.id} ({fault.fault_class}; {runs.seeds} seeds)", ""]
    if runs.standing == LIVE:
        lines.append("The faulty version's runs differ from the fixed ones': the bug is live here.")
    else:
        lines.append(f"Not ground truth: {runs.standing}.")
    header = [*SHOWN, "severity", "outcome", "symptoms"]
    lines += ["", "| run | status | " + " | ".join(header) + " |"]
    lines.append("|---|---|" + "---|" * len(header))
    lines.append(_row("fixed (reference)", runs, "none", judged))
    lines.append(_row("faulty (the real bug)", runs, faulty, judged))
    mutants = [v for v in runs.variants if v.entry and v.identity != faulty]
    mutants += [Variant(name, "") for name in runs.aliases if name != faulty]
    if not mutants:
        lines.append("| (no mutant of the fixed file is a candidate) |" + " |" * (len(header) + 1))
    for variant in mutants:
        same = runs.same(variant.identity, faulty) if runs.standing == LIVE else None
        note = " (the faulty source)" if runs.aliases.get(variant.identity) == faulty else ""
        note = note or {True: " = faulty on every seed", False: "", None: ""}[same]
        lines.append(_row(f"mutant {variant.identity}{note}", runs, variant.identity, judged))
    return [*lines, ""]


def run_one(coupling: Coupling, mirrors: Path, seeds: int, results_dir: Path) -> list[str]:
    """Run one offline fault; update the coupling's verdict; its side-by-side section."""
    fault = coupling.fault
    pair = read_pair(fault, mirrors)
    candidates = _candidates(coupling, pair.fixed, Path(fault.path).name)
    runs = run_fault(fault, pair, mirrors, seeds, results_dir, candidates)
    faulty = faulty_identity(fault)
    if runs.standing == LIVE and coupling.verdict != EXACT:
        matched = [v.identity for v in candidates if runs.same(v.identity, faulty)]
        if matched:
            coupling.verdict = EQUIVALENT
            coupling.identity = matched[0]
            coupling.operators = tuple(sorted({i.split("::")[-1].split("#")[0] for i in matched}))
    return side_by_side(coupling, runs, _judged(results_dir, runs))


def run_offline(results: list[Coupling], mirrors: Path, seeds: int, results_dir: str) -> list[str]:
    """Every fault that declares an offline run: the side-by-side sections."""
    runnable = [c for c in results if c.fault.run and c.verdict != "unread"]
    out = [
        f"{len(runnable)} of {len(results)} faults declare an offline run "
        "(packaged or generated data, generated environments); the others need data sets, "
        "environments or models that cannot be fetched here.",
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="trainwreck-real-results-") as scratch:
        folder = Path(results_dir) if results_dir else Path(scratch)
        for coupling in runnable:
            out += run_one(coupling, mirrors, seeds, folder)
    return out
