"""Judging: every mutant run against its reference (``verdict``), then each mutant over
its seeds (``seeds``, ``summary``), per (loop, device)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from experiments.symptoms.roles import NOOP
from experiments.symptoms.runtable import RunTable
from experiments.symptoms.summary import mutant_row, symptom_columns
from experiments.symptoms.verdict import RunVerdict, scale_changes, verdict


@dataclass
class Judgement:
    run_labels: pd.Series  # per run: list of labels (empty for reference runs)
    run_severity: pd.Series  # per run: the severity its labels set (None for reference runs)
    symptoms: pd.DataFrame  # one row per (loop, device, mutant)


def judge(runs: pd.DataFrame) -> Judgement:
    """Label every mutant and noop run and summarise each mutant over its seeds.

    ``runs`` needs ``loop, device, identity, operator, variant, category, seed, status,
    exc_type, role`` and the signature features.
    """
    table = RunTable(runs)
    verdicts: list[RunVerdict | None] = [None] * len(runs)
    groups: dict[tuple[str, str], list[int]] = {}
    for position, record in enumerate(table.records):
        groups.setdefault((record["loop"], record["device"]), []).append(position)
    rows: list[dict[str, Any]] = []
    for positions in (groups[key] for key in sorted(groups)):
        reference = [p for p in positions if table.records[p]["role"] == "reference"]
        all_reference = table.reference(reference)
        mutants: dict[str, list[int]] = {}
        for p in positions:
            if table.records[p]["role"] != "reference":
                mutants.setdefault(table.records[p]["identity"], []).append(p)
        for members in (mutants[identity] for identity in sorted(mutants)):
            seeds = {table.records[p]["seed"] for p in members}
            same = [p for p in reference if table.records[p]["seed"] in seeds]
            ok_same = len(table.ok(same))
            use_same = table.records[members[0]]["role"] != NOOP and ok_same >= 2
            ref_positions = same if use_same else reference
            ref = table.reference(same) if use_same else all_reference
            scale_free = scale_changes(table.records[members[0]].get("category"))
            judged = [verdict(table.records[p], ref, scale_free=scale_free) for p in members]
            for p, run_verdict in zip(members, judged):
                verdicts[p] = run_verdict
            rows.append(mutant_row(table, members, judged, ref, ref_positions, scale_free))
    symptoms = pd.DataFrame(rows, columns=symptom_columns())
    return Judgement(
        pd.Series([v.labels if v else [] for v in verdicts], index=runs.index, dtype=object),
        pd.Series([v.severity if v else None for v in verdicts], index=runs.index, dtype=object),
        symptoms,
    )
