"""Which mutants are not the bug they claim, for the benchmark: they are no ground truth.

A detector that "misses" a stillborn mutant (its rewrite cannot run), an equivalent one
(its runs are the reference's) or an unreached one (its changed lines never ran) missed
nothing. What each mutant is comes from the catalog of the same results folder
(``catalog/symptoms.csv``, measured by ``trainwreck catalog`` or rebuilt by ``trainwreck
report``): equivalence needs the reference's runs and the judged severity, which only the
catalog has. Without a catalog, the stored runs' own statuses still show stillborn and
unreached runs, and the benchmark says that equivalence was not measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from experiments.bench.corpus import Case
from experiments.report.validity import summary_line, validity_markdown
from experiments.unreached import SET_ASIDE
from experiments.validity import NOT_THE_BUG, validity_table

SYMPTOMS_CSV = Path("catalog") / "symptoms.csv"


@dataclass
class MutantValidity:
    """(loop, identity) -> ``stillborn``/``equivalent``/``unreached`` for each mutant that is
    not its bug, and the catalog's mutant rows they were read from (None: no catalog)."""

    not_the_bug: dict[tuple[str, str], str] = field(default_factory=dict)
    symptoms: pd.DataFrame | None = None

    def of(self, loop: str, identity: str) -> str:
        """Why this mutant is not its bug, or an empty string."""
        return self.not_the_bug.get((loop, identity), "")

    def keeps(self, case: Case) -> bool:
        """Whether a case stands as ground truth (clean cases always do)."""
        if case.truth.clean:
            return True
        if case.result.get("status") in SET_ASIDE:
            return False
        return not self.of(case.loop, case.truth.identity)

    def section(self) -> str:
        """The "Mutant validity" section in Markdown, or why there is none."""
        if self.symptoms is None:
            counted = {
                status: list(self.not_the_bug.values()).count(status) for status in NOT_THE_BUG
            }
            return (
                "Mutant validity: equivalence not measured (no catalog/symptoms.csv in the "
                "results folder: run `trainwreck catalog` or `trainwreck report`); from the "
                f"stored runs: {counted['stillborn']} stillborn, {counted['unreached']} "
                "unreached mutants, left out of the ground truth.\n"
            )
        return validity_markdown(self.symptoms) or "Mutant validity: no mutants in the catalog.\n"

    def line(self) -> str:
        if self.symptoms is None:
            return "mutant validity: equivalence not measured (no catalog in the results folder)"
        return f"mutant validity: {summary_line(validity_table(self.symptoms))}"


def mutant_validity(results_dir: Path | None) -> MutantValidity:
    """What the catalog (or, without one, the stored runs) of ``results_dir`` says."""
    if results_dir is None:
        return MutantValidity()
    catalog = Path(results_dir) / SYMPTOMS_CSV
    if catalog.is_file():
        try:
            symptoms = pd.read_csv(catalog)
        except (OSError, ValueError):
            symptoms = None
        if symptoms is not None and {"loop", "identity", "measured", "role"} <= set(symptoms):
            mutants = symptoms[symptoms["role"] == "mutant"]
            aside = mutants[mutants["measured"].isin(NOT_THE_BUG)]
            found = {
                (str(loop), str(identity)): str(measured)
                for loop, identity, measured in zip(
                    aside["loop"], aside["identity"], aside["measured"]
                )
            }
            return MutantValidity(found, mutants)
    return MutantValidity(_from_runs(Path(results_dir)))


def _from_runs(results_dir: Path) -> dict[tuple[str, str], str]:
    """Stillborn (on any seed) and unreached (on every seed) mutants of the stored runs."""
    statuses: dict[tuple[str, str], set[str]] = {}
    for path in sorted(results_dir.glob("runs/**/result.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        identity = str(result.get("identity") or "none")
        if identity == "none":
            continue
        key = (Path(str(result.get("loop") or "")).stem, identity)
        statuses.setdefault(key, set()).add(str(result.get("status")))
    found = {}
    for key, seen in statuses.items():
        if "stillborn" in seen:
            found[key] = "stillborn"
        elif seen == {"unreached"}:
            found[key] = "unreached"
    return found
