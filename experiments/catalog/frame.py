"""The ``runs`` table: one row per run (result fields, labels read from the mutant's
identity, signature features), and how nested values are stored in it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.catalog.runs import LoadedRun
from experiments.equivalence import run_digest
from experiments.report.operators import OperatorInfo
from experiments.signature import FEATURES
from experiments.symptoms import NOOP, REFERENCE
from experiments.trace import RESULT_FIELDS
from experiments.witness import NOT_RECORDED

STDOUT_FILE = "stdout.txt"  # the run's stdout (experiments.harness.child writes it)
_LIST_FIELDS = (
    "operators",
    "categories",
    "contexts",
    "params",
    "lines",
    "mutant_lines",
    "argv",
)


def runs_frame(runs: list[LoadedRun]) -> pd.DataFrame:
    rows = []
    for run in runs:
        result = run.result
        row: dict[str, Any] = {name: result.get(name) for name in RESULT_FIELDS}
        row["run_id"] = result.get("run_id") or str(run.folder)
        if "witness" not in result:  # a run of a harness before the probes (version 9)
            row["witness"] = NOT_RECORDED
        row["identity"] = result.get("identity") or REFERENCE
        row["device"] = result.get("device") or "cpu"
        row["seed"] = int(result["seed"]) if result.get("seed") is not None else -1
        for name in _LIST_FIELDS:
            row[name] = list(result.get(name) or [])
        row["operator"] = operator_name(row["identity"], row["operators"])
        row["variant"] = variant_label(row["identity"], row["operator"])
        row["site"] = site_label(row["identity"])
        # Where the mutated code is (mutator.semantics.roles); "" for the reference.
        row["context"] = "+".join(dict.fromkeys(row["contexts"]))
        row["folder"] = str(run.folder)
        row["loss_source"] = run.loss_source
        # What the run computed, for the equivalence check (experiments.equivalence).
        row["trace_digest"] = run_digest(result, run.features, run.curves, _stdout(run.folder))
        row.update(run.features)
        rows.append(row)
    leading = [
        "run_id",
        "loop",
        "identity",
        "operator",
        "variant",
        "site",
        "context",
        "seed",
        "device",
        "status",
        "exc_type",
        "exc_message",
    ]
    # steps and backward_calls reappear as features (optimizer_steps, backward_calls).
    context = [name for name in RESULT_FIELDS if name not in (*leading, *FEATURES, "steps")]
    columns = list(
        dict.fromkeys([*leading, *context, "folder", "loss_source", "trace_digest", *FEATURES])
    )
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values(["loop", "device", "identity", "seed"], kind="stable").reset_index(
        drop=True
    )


def _stdout(folder: Path) -> bytes | None:
    try:
        return (folder / STDOUT_FILE).read_bytes()
    except OSError:
        return None


def operator_name(identity: str, operators: list[str]) -> str:
    """``none`` for the unmutated script, the operator's name, or ``a+b`` for higher order."""
    if identity == NOOP or operators == [NOOP]:
        return NOOP
    if not operators:
        return REFERENCE
    return "+".join(operators)


def variant_label(identity: str, operator: str) -> str:
    """The operator label with parameters, e.g. ``scale_lr(factor=100.0)``, from the identity."""
    labels = []
    for part in identity.split("+"):
        pieces = part.split("::")
        if len(pieces) >= 3:
            labels.append(pieces[-1].rsplit("#", 1)[0])
    return "+".join(labels) if labels else operator


def site_label(identity: str) -> str:
    """Where in the script, e.g. ``train#1`` from ``t.py::train::drop_zero_grad#1``."""
    sites = []
    for part in identity.split("+"):
        pieces = part.split("::")
        if len(pieces) >= 3:
            ordinal = pieces[-1].rsplit("#", 1)
            sites.append(f"{pieces[1]}#{ordinal[1]}" if len(ordinal) == 2 else pieces[1])
    return "+".join(sites)


def category(operator: str, categories: list[str], operators: Mapping[str, OperatorInfo]) -> str:
    info = operators.get(operator)
    if info is not None and info.category:
        return info.category
    if operator == REFERENCE:
        return "reference"
    return "+".join(dict.fromkeys(categories)) if categories else ""


def encode_nested(frame: pd.DataFrame) -> None:
    """Lists and dicts (argv, params, ``nonfinite_at``...) as JSON text: one type per column
    for parquet, and the same text in the CSV."""
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_object_dtype(values.dtype) and any(
            isinstance(value, list | tuple | dict) for value in values
        ):
            frame[column] = [
                json.dumps(value) if isinstance(value, list | tuple | dict) else value
                for value in values
            ]
