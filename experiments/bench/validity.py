"""Which mutants are not the bug they claim, for the benchmark's ground truth.

What each mutant is comes from the catalog of the same results folder
(``catalog/symptoms.csv``, written by ``trainwreck catalog`` or ``trainwreck report``):
equivalence needs the reference's runs and the judged severity, which only the catalog
has. Without a catalog, the stored runs' statuses still show stillborn and unreached
mutants, and the benchmark says that equivalence was not measured.

How far each verdict reaches:

- ``stillborn``: the rewrite is broken code (a ``NameError`` is one on any device), so the
  mutant is no ground truth at all, neither its source nor its runs.
- ``equivalent``, ``unconfirmed`` and ``unreached``: measured on one device, under the
  harness. A run of an equivalent mutant is the clean run of its seed, an unreached one ran
  the clean code, an unconfirmed one never showed its bug (``experiments.witness``): no
  detector that reads runs can be scored on them, so those runs are no ground truth. Their
  source stays ground truth: the measurement does not make the code right elsewhere (a
  dropped ``.to(device)`` is a no-op on the CPU and a crash on a GPU; the harness seeds
  every run itself, so a dropped ``torch.manual_seed`` changes nothing there; a branch
  not taken by default is taken with other options). The export's index says what was
  measured (``equivalent on cpu``). A run set aside on its own (a mutant unconfirmed on
  some seeds only) is left out by its key (the catalog's ``runs.csv``, or the witness
  verdicts of the stored runs against the stored unmutated ones).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from experiments.bench.corpus import Case
from experiments.report.validity import summary_line, validity_markdown
from experiments.unreached import SET_ASIDE, STILLBORN, UNCONFIRMED, UNREACHED
from experiments.validity import NOT_THE_BUG, validity_table
from experiments.witness import NOT_RECORDED, decide_runs

SYMPTOMS_CSV = Path("catalog") / "symptoms.csv"
RUNS_CSV = Path("catalog") / "runs.csv"
Key = tuple[str, str, str]  # (loop, device, identity)


@dataclass
class MutantValidity:
    """``(loop, device, identity) -> stillborn/unconfirmed/equivalent/unreached`` for each
    mutant that is not its bug there, and the catalog's mutant rows they were read from
    (None: no catalog, so equivalence was not measured)."""

    not_the_bug: dict[Key, str] = field(default_factory=dict)
    symptoms: pd.DataFrame | None = None
    # Keys of single runs set aside (unconfirmed or stillborn by their witness).
    aside_runs: set[str] = field(default_factory=set)

    def of(self, loop: str, identity: str) -> str:
        """What was measured of this mutant on any device (``stillborn``, ``equivalent on
        cpu``...), or an empty string."""
        found = sorted(
            (measured, device)
            for (at, device, name), measured in self.not_the_bug.items()
            if (at, name) == (loop, identity)
        )
        if any(measured == STILLBORN for measured, _ in found):
            return STILLBORN
        return "; ".join(f"{measured} on {device}" for measured, device in found)

    def keeps(self, case: Case) -> bool:
        """Whether a case stands as ground truth (the module docstring); clean cases do."""
        if case.truth.clean:
            return True
        if case.run_folder is None:  # a source case
            return self.of(case.loop, case.truth.identity) != STILLBORN
        if case.result.get("status") in SET_ASIDE or case.result.get("key") in self.aside_runs:
            return False
        device = str(case.result.get("device") or "cpu")
        return (case.loop, device, case.truth.identity) not in self.not_the_bug

    def section(self) -> str:
        """The "Mutant validity" section in Markdown, or why equivalence is not in it."""
        if self.symptoms is None:
            counted = {
                status: list(self.not_the_bug.values()).count(status) for status in NOT_THE_BUG
            }
            return (
                "Mutant validity: equivalence not measured (no catalog/symptoms.csv in the "
                "results folder: run `trainwreck catalog` or `trainwreck report`); from the "
                f"stored runs: {counted[STILLBORN]} stillborn, {counted[UNCONFIRMED]} "
                f"unconfirmed, {counted[UNREACHED]} unreached mutants.\n"
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
    needed = {"loop", "device", "identity", "measured", "role"}
    if catalog.is_file():
        try:
            symptoms = pd.read_csv(catalog)
        except (OSError, ValueError):
            symptoms = None
        if symptoms is not None and needed <= set(symptoms):
            mutants = symptoms[symptoms["role"] == "mutant"]
            aside = mutants[mutants["measured"].isin(NOT_THE_BUG)]
            found = {
                (str(loop), str(device), str(identity)): str(measured)
                for loop, device, identity, measured in zip(
                    aside["loop"], aside["device"], aside["identity"], aside["measured"]
                )
            }
            return MutantValidity(found, mutants, _aside_in_catalog(Path(results_dir)))
    return MutantValidity(*_from_runs(Path(results_dir)))


def _aside_in_catalog(results_dir: Path) -> set[str]:
    """Keys of the runs the catalog set aside by their witness (``catalog/runs.csv``)."""
    try:
        runs = pd.read_csv(results_dir / RUNS_CSV, usecols=["key", "status"])
    except (OSError, ValueError):
        return set()
    return set(runs.loc[runs["status"].isin((UNCONFIRMED, STILLBORN)), "key"].astype(str))


def _from_runs(results_dir: Path) -> tuple[dict[Key, str], None, set[str]]:
    """Stillborn (on any seed), unconfirmed and unreached (on every seed) mutants of the
    stored runs, the witness verdicts compared with the stored unmutated runs; and the keys
    of the runs set aside by their witness."""
    results = []
    for path in sorted(results_dir.glob("runs/**/result.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        result.setdefault("witness", NOT_RECORDED)
        result["loop"] = Path(str(result.get("loop") or "")).stem
        results.append(result)
    statuses: dict[Key, set[str]] = {}
    aside: set[str] = set()
    for result, verdict in zip(results, decide_runs(results)):
        identity = str(result.get("identity") or "none")
        if identity == "none":
            continue
        status = str(result.get("status"))
        if verdict is not None and verdict.state in (UNCONFIRMED, STILLBORN):
            status = verdict.state
            aside.add(str(result.get("key")))
        key = (result["loop"], str(result.get("device") or "cpu"), identity)
        statuses.setdefault(key, set()).add(status)
    found = {}
    for key, seen in statuses.items():
        if STILLBORN in seen:
            found[key] = STILLBORN
        elif seen <= {UNCONFIRMED, UNREACHED}:
            found[key] = UNCONFIRMED if UNCONFIRMED in seen else UNREACHED
    return found, None, aside
