"""Loading stored runs: every ``runs/**/result.json`` with its trace, as a ``LoadedRun``
(the result row, the signature features, the curves), through the signature cache."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from experiments.catalog.sigcache import SIGNATURE_CACHE, Curve, cache_key, read_cache, write_cache
from experiments.harness.seal import check_shape
from experiments.signature import LossCurve, floats, loss_curve_of, signature_of, split_by_kind
from experiments.trace import RESULT_FILE, TRACE_FILE


@dataclass
class LoadedRun:
    folder: Path
    result: dict[str, Any]
    features: dict[str, Any]
    loss_source: str
    curves: dict[str, Curve] = field(repr=False)
    cached: bool = False


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
    key = cache_key(folder, n_classes)
    cache_path = folder / SIGNATURE_CACHE
    if use_cache:
        cached = read_cache(cache_path, key)
        if cached is not None:
            features, source, curves = cached
            return LoadedRun(folder, result, features, source, curves, cached=True)
    kinds = split_by_kind(read_trace_fast(folder / TRACE_FILE))
    loss = loss_curve_of(kinds)
    features = signature_of(kinds, result, n_classes=n_classes, loss=loss)
    curves = extract_curves(kinds, loss)
    source = loss[2]
    if use_cache:
        write_cache(cache_path, key, features, source, curves)
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
