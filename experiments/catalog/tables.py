"""The catalog's tables from loaded runs: roles and categories, every mutant judged
(``experiments.symptoms``), the sequential rule's decision per mutant, the symptoms
annotated with what each operator declares, and the ``curves`` table."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from experiments.catalog.frame import category, encode_nested, runs_frame
from experiments.catalog.runs import LoadedRun
from experiments.catalog.witnesses import mark_witnesses, with_witness_column
from experiments.equivalence import EQUIVALENT, mark_equivalent, same_as_reference
from experiments.report.operators import OperatorInfo, operator_info
from experiments.report.tables import CatalogTables
from experiments.symptoms import (
    NOOP,
    SEVERITY_ORDER,
    UNJUDGED,
    assign_roles,
    disagreement,
    judge,
    noop_false_positives,
)
from experiments.symptoms.equivalents import declared_equivalent, why_equivalent
from experiments.symptoms.sequential import Decision, decisions
from experiments.unreached import STILLBORN, UNCONFIRMED, UNREACHED, judge_reached
from experiments.validity import is_valid

CURVE_METRICS = ("loss", "grad_norm", "update_ratio", "train_loss", "val_loss", "val_metric")


def build_tables(runs: list[LoadedRun]) -> CatalogTables:
    """Judge every mutant and return the catalog's tables (see the module docstring)."""
    frame, operators, judgement = _judged(runs)
    labels = judgement.run_labels if judgement else pd.Series(dtype=object)
    frame["labels"] = [";".join(run_labels) for run_labels in labels] if len(frame) else []
    symptoms = judgement.symptoms if judgement else pd.DataFrame()
    control = (
        noop_false_positives(symptoms, labels, judgement.run_severity, frame) if judgement else {}
    )
    symptoms = _with_stopping(symptoms, frame, judgement)
    symptoms = annotate_symptoms(symptoms, operators, _optimizers(frame))
    symptoms = with_witness_column(symptoms, frame)
    encode_nested(frame)
    curves = _curves_frame(runs)
    return CatalogTables(frame, curves, symptoms, control, operators)


def stopping_decisions(runs: list[LoadedRun]) -> dict[tuple[str, str, str], Decision]:
    """The sequential rule's decision per (loop, device, identity), without the tables
    (what ``experiments.adaptive`` asks after each round)."""
    frame, _, judgement = _judged(runs)
    if judgement is None:
        return {}
    return decisions(frame, judgement.run_labels, judgement.run_severity)


def _judged(runs: list[LoadedRun]):
    """The runs frame with roles and categories, the operators' info, and the judgement."""
    frame = runs_frame(runs)
    frame["role"] = assign_roles(frame) if len(frame) else pd.Series(dtype=object)
    noop_rows = frame["role"] == NOOP
    frame.loc[noop_rows, "identity"] = NOOP
    frame.loc[noop_rows, "operator"] = NOOP
    frame.loc[noop_rows, "variant"] = NOOP
    frame.loc[noop_rows, "site"] = ""
    frame.loc[noop_rows, "context"] = ""
    operators = operator_info(list(frame["operator"].unique()) if len(frame) else [])
    frame["category"] = [
        category(row_operator, row_categories, operators)
        for row_operator, row_categories in zip(frame["operator"], frame["categories"])
    ]
    frame["same_as_reference"] = same_as_reference(frame)
    # Runs that did not show their operator's witness are ``unconfirmed`` (or ``stillborn``
    # when they crashed first): experiments.witness.
    mark_witnesses(frame)
    # Runs whose mutated lines never executed, or whose rewrite cannot run, are not judged
    # (experiments.unreached); mutants identical to the reference are ``equivalent``.
    judgement = judge_reached(frame, judge) if len(frame) else None
    costs_only = {name for name, info in operators.items() if info.expected == "cost_only"}
    marked = mark_equivalent(frame, judgement, declared_equivalent, costs_only.__contains__)
    return frame, operators, marked


def _with_stopping(symptoms: pd.DataFrame, frame: pd.DataFrame, judgement) -> pd.DataFrame:
    """``decided`` and ``stopped`` after ``n_seeds``: the sequential rule replayed on each
    mutant's seeds (docs/adaptive.md); with fixed seeds it says whether they were enough."""
    if symptoms.empty or judgement is None:
        return symptoms
    found = decisions(frame, judgement.run_labels, judgement.run_severity)
    keys = zip(symptoms["loop"], symptoms["device"], symptoms["identity"])
    chosen = [found.get(key) for key in keys]
    symptoms = symptoms.copy()
    position = symptoms.columns.get_loc("n_seeds") + 1
    symptoms.insert(position, "decided", [True if d is None else d.decided for d in chosen])
    symptoms.insert(
        position + 1, "stopped", ["not judged" if d is None else d.reason for d in chosen]
    )
    return symptoms


def _optimizers(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(loop, device) -> the optimizer class that trained the reference's model."""
    if "optimizer" not in frame or not len(frame):
        return {}
    reference = frame[(frame["role"] == "reference") & frame["optimizer"].notna()]
    return {
        key: str(group["optimizer"].mode().iloc[0])
        for key, group in reference.groupby(["loop", "device"], sort=False)
    }


def annotate_symptoms(
    symptoms: pd.DataFrame,
    operators: Mapping[str, OperatorInfo],
    optimizers: Mapping[tuple[str, str], str] | None = None,
) -> pd.DataFrame:
    if symptoms.empty:
        return symptoms
    symptoms = symptoms.copy()
    optimizers = optimizers or {}
    symptoms["optimizer"] = [
        optimizers.get((loop, device)) for loop, device in zip(symptoms["loop"], symptoms["device"])
    ]
    infos = [operators.get(name) for name in symptoms["operator"]]
    expected = [info.expected if info else None for info in infos]
    position = symptoms.columns.get_loc("measured")
    symptoms.insert(position, "expected", expected)
    # A mutant that is not its bug (stillborn, equivalent, unreached) and an unjudged row
    # neither agree nor disagree with what the operator declares: no verdict to compare.
    symptoms.insert(
        position + 2,
        "agrees",
        [
            None if exp is None or got == UNJUDGED or not is_valid(got) else exp == got
            for exp, got in zip(expected, symptoms["measured"])
        ],
    )
    symptoms.insert(
        position + 3,
        "why",
        [
            not_the_bug(row) or _text(row.get("unjudged_reason")) or disagreement(row, exp)
            for row, exp in zip(symptoms.to_dict("records"), expected)
        ],
    )
    symptoms.insert(position + 4, "summary", [info.summary if info else "" for info in infos])
    order = {severity: index for index, severity in enumerate(SEVERITY_ORDER)}
    symptoms["_order"] = symptoms["measured"].map(lambda s: order.get(s, len(order)))
    symptoms = symptoms.sort_values(
        ["loop", "device", "_order", "operator", "identity"], kind="stable"
    )
    return symptoms.drop(columns="_order").reset_index(drop=True)


def not_the_bug(row: Mapping[str, object]) -> str:
    """The ``why`` of a mutant that is not its bug (or is declared equivalent, see
    ``experiments/symptoms/equivalents.py``); empty for any other."""
    measured = row.get("measured")
    declared = why_equivalent(str(row["loop"]), str(row["identity"]))
    if declared and measured in ("silent", EQUIVALENT):
        return declared
    if measured == EQUIVALENT:
        return (
            f"equivalent on {row.get('device') or 'cpu'}: every run is the reference's on its "
            "seed, bit for bit (losses, metrics, counters, held-out result, printed output)"
        )
    if measured == STILLBORN:
        outcome = str(row.get("outcome") or "")
        if outcome.startswith("stillborn:"):  # the witness rule said why (catalog/witnesses.py)
            return outcome
        return (
            f"stillborn: {outcome} at a changed line before the first optimizer "
            "step; the rewrite cannot run, so it is not the bug its operator names"
        )
    if measured == UNREACHED:
        return "unreached: the changed lines never ran"
    if measured == UNCONFIRMED:
        return str(row.get("outcome") or "unconfirmed: the run never showed its witness")
    return ""


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _curves_frame(runs: list[LoadedRun]) -> pd.DataFrame:
    """Long format (run, step, metric, value) with categorical run and metric columns."""
    run_codes, metric_codes, steps, values = [], [], [], []
    for code, run in enumerate(runs):
        for metric_code, metric in enumerate(CURVE_METRICS):
            if metric not in run.curves:
                continue
            x, y = run.curves[metric]
            run_codes.append(np.full(x.size, code, dtype=np.int32))
            metric_codes.append(np.full(x.size, metric_code, dtype=np.int8))
            steps.append(x)
            values.append(y)
    if not steps:
        return pd.DataFrame(
            {"run": pd.Categorical([]), "step": [], "metric": pd.Categorical([]), "value": []}
        )
    names = [run.result.get("run_id") or str(run.folder) for run in runs]
    return pd.DataFrame(
        {
            "run": pd.Categorical.from_codes(np.concatenate(run_codes), categories=_unique(names)),
            "step": np.concatenate(steps).astype(np.int64),
            "metric": pd.Categorical.from_codes(
                np.concatenate(metric_codes), categories=CURVE_METRICS
            ),
            "value": np.concatenate(values),
        }
    )


def _unique(names: list[str]) -> list[str]:
    """Categories must be unique; two folders with one run_id get a suffix (never silently merged)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        out.append(name if count == 0 else f"{name}~{count}")
    return out
