"""Declared equivalent mutants: they still exist, and the catalog says why they are silent."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from experiments.catalog.tables import annotate_symptoms
from experiments.report.operators import operator_info
from experiments.symptoms.equivalents import EQUIVALENTS, why_equivalent

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "data" / "mutant_snapshot.json"


def test_every_declared_equivalent_is_a_mutant_of_its_loop():
    # A declaration whose mutant is gone (site removed, loop changed) must not linger.
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    for loop, identity in EQUIVALENTS:
        identities = {row[0] for row in snapshot[f"reference_loops/{loop}.py"]}
        assert identity in identities, (loop, identity)
        assert EQUIVALENTS[(loop, identity)].reason and EQUIVALENTS[(loop, identity)].measured


def test_drop_scheduler_state_on_resume_is_not_declared_equivalent():
    # resume_digits' schedule was changed so this bug bites; it must stay measured.
    assert not any("drop_scheduler_state_on_resume" in identity for _, identity in EQUIVALENTS)


def test_catalog_why_names_the_equivalence_and_only_for_that_loop():
    (loop, identity), declared = next(iter(EQUIVALENTS.items()))
    operator = identity.split("::")[2].split("#")[0]
    rows = [
        {"loop": loop, "device": "cpu", "identity": identity},
        # Same identity under another loop name: a user's script of the same file name.
        {"loop": "my_script", "device": "cpu", "identity": identity},
    ]
    symptoms = pd.DataFrame(
        [
            {**row, "operator": operator, "measured": "silent", "label_fractions": "{}"}
            for row in rows
        ]
    )
    annotated = annotate_symptoms(symptoms, operator_info([operator]))
    why = dict(zip(annotated["loop"], annotated["why"]))
    assert why[loop] == f"equivalent ({declared.reason})"
    assert not why["my_script"].startswith("equivalent")
    assert why_equivalent("my_script", identity) == ""
