"""Judging: every mutant run against its reference (``verdict``), then each mutant over
its seeds (``seeds``, ``summary``), per (loop, device)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from experiments.symptoms.reference import MIN_SPREAD_SEEDS
from experiments.symptoms.roles import NOOP
from experiments.symptoms.runtable import RunTable
from experiments.symptoms.summary import mutant_row, symptom_columns
from experiments.symptoms.verdict import RunVerdict, scale_changes, verdict
from experiments.symptoms.vocabulary import MARKERS, base_name

STATUS_BASES = ("crash", "oom", "timeout", "nan")


@dataclass
class Judgement:
    run_labels: pd.Series  # per run: list of labels (empty for reference runs)
    run_severity: pd.Series  # per run: the severity its labels set (None for reference runs)
    symptoms: pd.DataFrame  # one row per (loop, device, mutant)


def judge(runs: pd.DataFrame) -> Judgement:
    """Label every mutant and noop run and summarise each mutant over its seeds.

    ``runs`` needs ``loop, device, identity, operator, variant, category, seed, status,
    exc_type, role`` and the signature features. The noop control of a (loop, device) is
    judged first: the labels it shows are not evidence for that group's mutants (their
    runs' severities leave them out); its own runs keep the severities their labels set
    (the false-positive rate is theirs), while its row is ``silent`` by construction.
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
        # The control first (its identity sorts anywhere among the mutants').
        order = sorted(mutants, key=lambda identity: (identity != NOOP, identity))
        control: frozenset[str] = frozenset()
        for identity in order:
            members = mutants[identity]
            seeds = {table.records[p]["seed"] for p in members}
            same = [p for p in reference if table.records[p]["seed"] in seeds]
            ok_same = len(table.ok(same))
            use_same = identity != NOOP and ok_same >= MIN_SPREAD_SEEDS
            ref_positions = same if use_same else reference
            ref = table.reference(same) if use_same else all_reference
            scale_free = scale_changes(table.records[members[0]].get("category"))
            mine = frozenset() if identity == NOOP else control
            judged = [
                verdict(table.records[p], ref, scale_free=scale_free, control=mine) for p in members
            ]
            for p, run_verdict in zip(members, judged):
                verdicts[p] = run_verdict
            if identity == NOOP:
                control = control_labels(judged)
                mine = control
            rows.append(mutant_row(table, members, judged, ref, ref_positions, scale_free, mine))
    symptoms = pd.DataFrame(rows, columns=symptom_columns())
    return Judgement(
        pd.Series([v.labels if v else [] for v in verdicts], index=runs.index, dtype=object),
        pd.Series([v.severity if v else None for v in verdicts], index=runs.index, dtype=object),
        symptoms,
    )


def control_labels(judged: list[RunVerdict]) -> frozenset[str]:
    """Base names of the labels the noop control showed on any of its runs. A status (a
    crash, a timeout, a non-finite loss) is what happened to that run, whoever else shares
    it: not included."""
    return frozenset(
        base_name(label)
        for run_verdict in judged
        for label in run_verdict.labels
        if label not in MARKERS and base_name(label) not in STATUS_BASES
    )
