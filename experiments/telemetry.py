"""The one call a training script may make into trainwreck: ``report(**metrics)``.

Outside the harness it does nothing. Inside, the harness installs a sink with
``set_sink`` before the script starts; each call appends one record to the run's trace.
Deliberately imports nothing heavy (no torch, pandas or hydra).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_sink: Callable[[dict[str, Any]], None] | None = None


def report(**metrics: Any) -> None:
    """Record validation metrics for one epoch, e.g. ``report(epoch=3, val_loss=0.4)``."""
    if _sink is not None:
        _sink({key: _plain(value) for key, value in metrics.items()})


def set_sink(sink: Callable[[dict[str, Any]], None] | None) -> None:
    global _sink
    _sink = sink


def _plain(value: Any) -> Any:
    """Tensors and numpy scalars become Python numbers; everything else passes through."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            return value
    return value
