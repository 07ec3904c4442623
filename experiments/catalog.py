"""The symptom catalog, built from stored runs only (no training happens here).

``load_runs(results_dir)`` finds every ``runs/**/result.json`` with its ``trace.jsonl``,
computes each run's signature once and caches it (with the run's curves) beside the trace
in ``SIGNATURE_CACHE``, keyed by the size and mtime of trace and result, the signature
version and ``n_classes``; a rebuild only parses traces that changed.
``build_tables(runs)`` judges every mutant (``experiments.symptoms``) and returns the
``runs``, ``curves`` and ``symptoms`` tables; ``write_catalog(tables, out_dir)`` writes
all catalog files into a temporary folder and renames it into place, so a reader sees
the old catalog or the new one, never a mix. ``rebuild_report(results_dir)`` is
``trainwreck report RESULTS_DIR``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from experiments import signature as signature_module
from experiments import trace as trace_module
from experiments.files import write_bytes_atomic
from experiments.harness.seal import check_shape
from experiments.report.interactions import INTERACTION_FILES, interactions_markdown
from experiments.report.operators import OperatorInfo, operator_info
from experiments.report.strength import (
    STRENGTH_DIR,
    load_strength,
    strength_html,
    strength_markdown,
)
from experiments.report.tables import CatalogTables
from experiments.signature import (
    FEATURES,
    LossCurve,
    floats,
    loss_curve_of,
    signature_of,
    split_by_kind,
)
from experiments.symptoms import (
    NOOP,
    REFERENCE,
    SEVERITY_ORDER,
    assign_roles,
    disagreement,
    judge,
    noop_false_positives,
)
from experiments.symptoms.equivalents import why_equivalent
from experiments.symptoms.sequential import Decision, decisions
from experiments.trace import RESULT_FIELDS, RESULT_FILE, TRACE_FILE
from experiments.unreached import judge_reached

SIGNATURE_CACHE = ".signature-cache.json"
# Bump when the cached curves change meaning; edits to signature.py invalidate on their own.
SIGNATURE_VERSION = 1
CATALOG_FILES = (
    "runs.parquet",
    "runs.csv",
    "curves.parquet",
    "symptoms.csv",
    "symptoms.md",
    "study.md",
    "report.html",
)
# Outlive a rebuild: the measured interactions and the list of runs the catalog was built
# from (``catalog_job.SWEEP_FILE``; without it a later ``trainwreck report`` judges every
# stored run, without the loops' class counts).
CARRIED_FILES = (*INTERACTION_FILES, "sweep.json")
CURVE_METRICS = ("loss", "grad_norm", "update_ratio", "train_loss", "val_loss", "val_metric")
_LIST_FIELDS = (
    "operators",
    "categories",
    "contexts",
    "params",
    "lines",
    "mutant_lines",
    "argv",
)

Curve = tuple[np.ndarray, np.ndarray]  # (steps, values)


@dataclass
class LoadedRun:
    folder: Path
    result: dict[str, Any]
    features: dict[str, Any]
    loss_source: str
    curves: dict[str, Curve] = field(repr=False)
    cached: bool = False


@dataclass
class CatalogSummary:
    out_dir: Path
    files: dict[str, Path]
    n_runs: int
    n_mutants: int
    n_loops: int
    cached_signatures: int
    control: dict[str, Any]
    seconds: float
    agreement: tuple[int, int] = (0, 0)  # mutants whose measured severity = declared, of
    misleads: int = 0  # mutants whose model is fine but a reported number lies


# -- loading ------------------------------------------------------------------------------


def find_result_files(results_dir: str | Path) -> list[Path]:
    return sorted((Path(results_dir) / "runs").glob(f"**/{RESULT_FILE}"))


def load_runs(
    results_dir: str | Path,
    *,
    n_classes: Mapping[str, int] | int | None = None,
    use_cache: bool = True,
    keys: Collection[str] | None = None,
) -> list[LoadedRun]:
    """Every stored run under ``results_dir/runs`` with its signature and curves.

    ``n_classes`` (one number, or per loop name) sets ln C and chance; without it a run's
    ``result.json`` or its ``report(n_classes=...)`` records are used when present.
    ``keys`` limits loading to those runs (a sweep's own runs, not everything stored).
    """
    runs = []
    wanted = set(keys) if keys is not None else None
    for result_path in find_result_files(results_dir):
        if wanted is not None and result_path.parent.name not in wanted:
            continue
        try:
            result = orjson.loads(result_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # a result being written right now; the next rebuild sees it
        if check_shape(result, full=False) is not None:
            continue  # not a row (a script or a person wrote it): readers would trip on it
        runs.append(
            _load_run(result_path.parent, result, _classes_for(result, n_classes), use_cache)
        )
    return runs


def _classes_for(
    result: Mapping[str, Any], n_classes: Mapping[str, int] | int | None
) -> int | None:
    if isinstance(n_classes, int):
        return n_classes
    if isinstance(n_classes, Mapping) and result.get("loop") in n_classes:
        return int(n_classes[result["loop"]])
    value = result.get("n_classes")
    return int(value) if isinstance(value, int | float) else None


def _load_run(
    folder: Path, result: dict[str, Any], n_classes: int | None, use_cache: bool
) -> LoadedRun:
    key = _cache_key(folder, n_classes)
    cache_path = folder / SIGNATURE_CACHE
    if use_cache:
        cached = _read_cache(cache_path, key)
        if cached is not None:
            features, source, curves = cached
            return LoadedRun(folder, result, features, source, curves, cached=True)
    kinds = split_by_kind(read_trace_fast(folder / TRACE_FILE))
    loss = loss_curve_of(kinds)
    features = signature_of(kinds, result, n_classes=n_classes, loss=loss)
    curves = extract_curves(kinds, loss)
    source = loss[2]
    if use_cache:
        _write_cache(cache_path, key, features, source, curves)
    return LoadedRun(folder, result, features, source, curves)


def read_trace_fast(path: Path) -> list[dict[str, Any]]:
    """All records of a trace; torn or corrupt lines (a run killed mid-write) are skipped.

    The lines are parsed as one JSON array (one orjson call instead of one per record);
    only a trace with a bad line falls back to line by line.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return []
    lines = [line for line in data.splitlines() if line.strip()]
    try:
        records = orjson.loads(b"[" + b",".join(lines) + b"]")
    except orjson.JSONDecodeError:
        records = []
        for line in lines:
            try:
                records.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return [record for record in records if isinstance(record, dict)]


def extract_curves(kinds: Mapping[str, list[dict[str, Any]]], loss: LossCurve) -> dict[str, Curve]:
    """The per-run series the ``curves`` table and the report plot."""
    curves: dict[str, Curve] = {"loss": (loss[0], loss[1])}
    step_records = kinds.get("step", [])
    step_index = floats([r.get("i", k + 1) for k, r in enumerate(step_records)])
    for metric in ("grad_norm", "update_ratio"):
        values = floats([r.get(metric) for r in step_records])
        if np.isfinite(values).any():
            curves[metric] = (step_index, values)
    reports = kinds.get("report", [])
    for metric in ("train_loss", "val_loss", "val_metric"):
        points = [(r.get("epoch", k), r.get(metric)) for k, r in enumerate(reports) if metric in r]
        if points:
            x, y = zip(*points)
            curves[metric] = (floats(list(x)), floats(list(y)))
    return curves


@cache
def _code_version() -> str:
    """Digest of the code a cached signature depends on, so an edit invalidates the cache."""
    digest = hashlib.sha256(str(SIGNATURE_VERSION).encode())
    for module in (signature_module, trace_module):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _cache_key(folder: Path, n_classes: int | None) -> list[Any]:
    parts: list[Any] = [_code_version(), n_classes]
    for name in (TRACE_FILE, RESULT_FILE):
        try:
            stat = (folder / name).stat()
            parts += [stat.st_size, stat.st_mtime_ns]
        except OSError:
            parts += [None, None]
    return parts


def _read_cache(path: Path, key: list[Any]) -> tuple[dict[str, Any], str, dict[str, Curve]] | None:
    try:
        payload = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(payload, dict) or payload.get("key") != key:
        return None
    features = {name: payload["features"].get(name) for name in FEATURES}
    curves = {
        metric: (np.asarray(series[0], dtype=float), np.asarray(series[1], dtype=float))
        for metric, series in payload["curves"].items()
    }
    return features, payload["loss_source"], curves


def _write_cache(
    path: Path, key: list[Any], features: dict[str, Any], source: str, curves: dict[str, Curve]
) -> None:
    payload = {
        "key": key,
        "features": features,
        "loss_source": source,
        # NaN is written as null by orjson and read back as NaN by numpy: lossless here.
        "curves": {metric: [steps, values] for metric, (steps, values) in curves.items()},
    }
    with contextlib.suppress(OSError):  # a read-only results folder just means no cache
        write_bytes_atomic(path, orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY))


# -- tables -------------------------------------------------------------------------------


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
    symptoms = _annotate_symptoms(symptoms, operators, _optimizers(frame))
    _encode_nested(frame)
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
    frame = _runs_frame(runs)
    frame["role"] = assign_roles(frame) if len(frame) else pd.Series(dtype=object)
    noop_rows = frame["role"] == NOOP
    frame.loc[noop_rows, "identity"] = NOOP
    frame.loc[noop_rows, "operator"] = NOOP
    frame.loc[noop_rows, "variant"] = NOOP
    frame.loc[noop_rows, "site"] = ""
    frame.loc[noop_rows, "context"] = ""
    operators = operator_info(list(frame["operator"].unique()) if len(frame) else [])
    frame["category"] = [
        _category(row_operator, row_categories, operators)
        for row_operator, row_categories in zip(frame["operator"], frame["categories"])
    ]
    # Runs whose mutated lines never executed are not judged (experiments.unreached).
    judgement = judge_reached(frame, judge) if len(frame) else None
    return frame, operators, judgement


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


def _encode_nested(frame: pd.DataFrame) -> None:
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


def _runs_frame(runs: list[LoadedRun]) -> pd.DataFrame:
    rows = []
    for run in runs:
        result = run.result
        row: dict[str, Any] = {name: result.get(name) for name in RESULT_FIELDS}
        row["run_id"] = result.get("run_id") or str(run.folder)
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
    columns = list(dict.fromkeys([*leading, *context, "folder", "loss_source", *FEATURES]))
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values(["loop", "device", "identity", "seed"], kind="stable").reset_index(
        drop=True
    )


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


def _category(operator: str, categories: list[str], operators: Mapping[str, OperatorInfo]) -> str:
    info = operators.get(operator)
    if info is not None and info.category:
        return info.category
    if operator == REFERENCE:
        return "reference"
    return "+".join(dict.fromkeys(categories)) if categories else ""


def _optimizers(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(loop, device) -> the optimizer class that trained the reference's model."""
    if "optimizer" not in frame or not len(frame):
        return {}
    reference = frame[(frame["role"] == "reference") & frame["optimizer"].notna()]
    return {
        key: str(group["optimizer"].mode().iloc[0])
        for key, group in reference.groupby(["loop", "device"], sort=False)
    }


def _annotate_symptoms(
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
    symptoms.insert(
        position + 2,
        "agrees",
        [None if exp is None else exp == got for exp, got in zip(expected, symptoms["measured"])],
    )
    # A declared equivalent mutant (measured, experiments/symptoms/equivalents.py) says so
    # instead of an unexplained "silent".
    symptoms.insert(
        position + 3,
        "why",
        [
            why_equivalent(row["loop"], row["identity"]) or disagreement(row, exp)
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


# -- writing ------------------------------------------------------------------------------


def write_catalog(tables: CatalogTables, out_dir: str | Path) -> dict[str, Path]:
    """Write every catalog file into ``out_dir``, atomically as a folder; returns the paths."""
    from experiments.report import render_report_html, render_study_md, render_symptoms_md

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Measured bug interactions (``trainwreck quiz interactions``) outlive a catalog rebuild.
    carried = {
        name: (out_dir / name).read_bytes() for name in CARRIED_FILES if (out_dir / name).is_file()
    }
    interactions = (
        pd.read_csv(io.BytesIO(carried[INTERACTION_FILES[0]]))
        if INTERACTION_FILES[0] in carried
        else None
    )
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        tables.runs.to_parquet(staging / "runs.parquet", index=False)
        tables.runs.to_csv(staging / "runs.csv", index=False)
        tables.curves.to_parquet(staging / "curves.parquet", index=False)
        tables.symptoms.to_csv(staging / "symptoms.csv", index=False)
        (staging / "symptoms.md").write_text(render_symptoms_md(tables), encoding="utf-8")
        study, page = render_study_md(tables), render_report_html(tables)
        if interactions is not None:
            study += "\n\n" + interactions_markdown(interactions)
            section = (
                '<section id="interactions"><h2>Interactions between bugs</h2>'
                + interactions.to_html(index=False, escape=True, border=0, na_rep="")
                + "</section>"
            )
            page = page.replace("<script>", section + "<script>", 1)
        strength = load_strength(out_dir.parent / STRENGTH_DIR, set(tables.runs.get("loop", [])))
        if not strength.empty:  # written by ``trainwreck strength`` into the same results
            symptoms_md = (staging / "symptoms.md").read_text(encoding="utf-8")
            section = strength_markdown(strength)
            (staging / "symptoms.md").write_text(symptoms_md + "\n" + section, encoding="utf-8")
            study += "\n\n" + section
            page = page.replace("<script>", strength_html(strength) + "<script>", 1)
        leaderboard = out_dir.parent / "bench" / "section.html"
        if leaderboard.is_file():  # written by ``trainwreck bench`` into the same results
            page = page.replace("<script>", leaderboard.read_text(encoding="utf-8") + "<script>", 1)
        (staging / "study.md").write_text(study, encoding="utf-8")
        (staging / "report.html").write_text(page, encoding="utf-8")
        for name, data in carried.items():
            (staging / name).write_bytes(data)
        staging.chmod(0o755)
        _swap_into_place(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {name: out_dir / name for name in CATALOG_FILES}


def _swap_into_place(staging: Path, out_dir: Path) -> None:
    """Replace ``out_dir`` by ``staging``; the old catalog is removed only after the rename."""
    if not out_dir.exists():
        os.replace(staging, out_dir)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.replace(out_dir, retired / out_dir.name)
    try:
        os.replace(staging, out_dir)
    except OSError:
        os.replace(retired / out_dir.name, out_dir)
        raise
    finally:
        shutil.rmtree(retired, ignore_errors=True)


def rebuild_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    n_classes: Mapping[str, int] | int | None = None,
    progress: Callable[[str], None] | None = None,
    keys: Collection[str] | None = None,
) -> CatalogSummary:
    """``trainwreck report RESULTS_DIR``: rebuild every catalog file from stored runs
    (only the runs named by ``keys`` when given)."""
    started = time.perf_counter()
    out_dir = Path(out_dir) if out_dir is not None else Path(results_dir) / "catalog"
    say = progress or (lambda message: None)
    runs = load_runs(results_dir, n_classes=n_classes, keys=keys)
    say(f"loaded {len(runs)} runs ({sum(run.cached for run in runs)} signatures cached)")
    tables = build_tables(runs)
    files = write_catalog(tables, out_dir)
    say(f"wrote {len(files)} files to {out_dir}")
    judged = tables.symptoms
    mutants = judged[judged["role"] == "mutant"] if len(judged) else judged
    declared = mutants[mutants["agrees"].notna()] if len(mutants) else pd.DataFrame({"agrees": []})
    return CatalogSummary(
        out_dir=out_dir,
        files=files,
        n_runs=len(tables.runs),
        n_mutants=int((judged["role"] == "mutant").sum()) if len(judged) else 0,
        n_loops=int(tables.runs["loop"].nunique()) if len(tables.runs) else 0,
        cached_signatures=sum(run.cached for run in runs),
        control=tables.control,
        seconds=time.perf_counter() - started,
        agreement=(int(declared["agrees"].astype(bool).sum()), len(declared)),
        misleads=int((mutants["measured"] == "misleads").sum()) if len(mutants) else 0,
    )
