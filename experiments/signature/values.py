"""Trace values as numbers: records grouped by kind, trace floats (numbers or "nan"/"inf"
strings) as floats, a feature's type. Shared by every feature module of the package."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from experiments.trace import decode_float

Feature = float | int | str | None
Kinds = Mapping[str, list[dict[str, Any]]]


def split_by_kind(records: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records grouped by ``kind`` in one pass (every feature reads one or two kinds)."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        kinds.setdefault(record.get("kind"), []).append(record)
    return kinds


def floats(values: list[Any]) -> np.ndarray:
    """Trace values as a float array: numbers, "nan"/"inf" strings; None and junk as NaN."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return np.asarray([as_float(value) for value in values], dtype=float)


def as_float(value: Any) -> float:
    """Trace floats (numbers or "nan"/"inf" strings) as float; missing or junk as NaN."""
    try:
        decoded = decode_float(value)
    except (TypeError, ValueError):
        return math.nan
    return math.nan if decoded is None else decoded


def column(records: list[dict[str, Any]], key: str) -> np.ndarray:
    return floats([r.get(key) for r in records])


def span(records: list[dict[str, Any]]) -> float | None:
    """Seconds between the first and the last of these records (their ``t``)."""
    times = floats([r.get("t") for r in records])
    times = times[np.isfinite(times)]
    return float(times[-1] - times[0]) if times.size >= 2 else None
