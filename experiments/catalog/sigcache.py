"""The signature cache: each run's signature and curves, stored beside its trace in
``SIGNATURE_CACHE`` and keyed by the size and mtime of trace and result, the signature
code's digest and ``n_classes``, so a rebuild only parses traces that changed."""

from __future__ import annotations

import contextlib
import hashlib
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from experiments import signature as signature_module
from experiments import trace as trace_module
from experiments.files import write_bytes_atomic
from experiments.signature import FEATURES
from experiments.trace import RESULT_FILE, TRACE_FILE

Curve = tuple[np.ndarray, np.ndarray]  # (steps, values)
SIGNATURE_CACHE = ".signature-cache.json"
# Bump when the cached curves change meaning; edits to experiments/signature/ invalidate on
# their own.
SIGNATURE_VERSION = 1


@cache
def _code_version() -> str:
    """Digest of the code a cached signature depends on, so an edit invalidates the cache."""
    digest = hashlib.sha256(str(SIGNATURE_VERSION).encode())
    # Every module of the signature package, and the trace reader.
    sources = sorted(Path(signature_module.__file__).parent.glob("*.py"))
    for path in [*sources, Path(trace_module.__file__)]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(folder: Path, n_classes: int | None) -> list[Any]:
    parts: list[Any] = [_code_version(), n_classes]
    for name in (TRACE_FILE, RESULT_FILE):
        try:
            stat = (folder / name).stat()
            parts += [stat.st_size, stat.st_mtime_ns]
        except OSError:
            parts += [None, None]
    return parts


def read_cache(path: Path, key: list[Any]) -> tuple[dict[str, Any], str, dict[str, Curve]] | None:
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


def write_cache(
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
