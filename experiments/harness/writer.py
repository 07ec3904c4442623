"""Streams trace records to ``trace.jsonl`` without a host sync per record.

Hooks hand over records whose values may still be tensors (a loss, a gradient norm).
They wait in a small queue; a flush turns all pending tensors into floats with one
``stack().tolist()`` per device (one sync for many records) and writes the lines.
Flushes happen every ``flush_every`` records, and a daemon thread flushes every
``flush_interval_s`` seconds whatever the script is doing (stuck in a loop or in native
code): a run that dies abruptly (SIGKILL, segfault) loses at most the records of its last
``flush_interval_s`` seconds. The end record is written and flushed at once.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from experiments.harness import tracecap

LOSS_KINDS = ("backward", "loss_fn")


def _clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become "nan"/"inf"/"-inf" (the trace's convention)."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(key): _clean(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(item) for item in value]
    if isinstance(value, torch.Tensor):
        return _clean(value.tolist()) if value.numel() <= 64 else f"<tensor {list(value.shape)}>"
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        try:
            return _clean(item())
        except (TypeError, ValueError):
            pass
    return str(value)


class TraceWriter:
    def __init__(
        self,
        path: str | Path,
        t0: float | None = None,
        flush_every: int = 256,
        flush_interval_s: float = 0.2,
    ) -> None:
        self._file = tracecap.open_trace(path)  # thinned beyond the run's trace cap
        self.t0 = time.perf_counter() if t0 is None else t0
        self._pending: deque[tuple[str, float, dict[str, Any]]] = deque()
        self._flush_every = flush_every
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._flusher = threading.Thread(
            target=self._flush_periodically, args=(flush_interval_s,), daemon=True
        )
        self._flusher.start()
        # A process the script forks (a data loader worker) inherits the hooks: it must
        # not write into this trace.
        self._forked_away = False
        os.register_at_fork(after_in_child=self._leave_to_parent)
        # (kind, i) of the first non-finite loss, known once its record is flushed.
        self.first_nonfinite: tuple[str, int] | None = None
        # Called at the start of every flush; may ``append`` records (forward counters).
        self.before_flush: Callable[[], None] | None = None

    def _leave_to_parent(self) -> None:
        self._forked_away = True
        self._stopped.set()

    def append(self, kind: str, **fields: Any) -> None:
        """Queue a record without flushing (deque appends need no lock)."""
        if not self._forked_away:
            self._pending.append((kind, time.perf_counter(), fields))

    def record(self, kind: str, **fields: Any) -> None:
        if self._forked_away:
            return
        pending = self._pending
        pending.append((kind, time.perf_counter(), fields))
        if len(pending) >= self._flush_every:
            self.flush()

    def write_now(self, kind: str, **fields: Any) -> None:
        """Record and flush at once (start and end records)."""
        self.record(kind, **fields)
        self.flush()

    def _flush_periodically(self, interval_s: float) -> None:
        while not self._stopped.wait(interval_s):
            self.flush()

    def flush(self) -> None:
        if self._forked_away:
            return
        if self.before_flush is not None:
            self.before_flush()
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        queued = self._pending
        pending = [queued.popleft() for _ in range(len(queued))]
        if pending:
            t0 = self.t0
            records = [
                {"kind": kind, "t": round(when - t0, 6), **fields} for kind, when, fields in pending
            ]
            _resolve_tensors(records)
            lines = []
            for record in records:
                if self.first_nonfinite is None and record["kind"] in LOSS_KINDS:
                    loss = record.get("loss")
                    if isinstance(loss, float) and not math.isfinite(loss):
                        self.first_nonfinite = (record["kind"], record.get("i", -1))
                try:  # the C encoder, when every value is plain and finite
                    lines.append(json.dumps(record, allow_nan=False))
                except (TypeError, ValueError):
                    lines.append(json.dumps(_clean(record), allow_nan=False))
            self._file.write("\n".join(lines) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._stopped.set()
        self.flush()
        with self._lock:
            self._file.close()


def _resolve_tensors(records: list[dict[str, Any]]) -> None:
    """Replace every scalar tensor value by its float, one transfer per device and dtype."""
    groups: dict[tuple[torch.device, torch.dtype], list[tuple[dict[str, Any], str, Any]]] = {}
    for record in records:
        for key, value in record.items():
            if isinstance(value, torch.Tensor):
                groups.setdefault((value.device, value.dtype), []).append((record, key, value))
    for slots in groups.values():
        try:
            values = torch.stack([tensor.reshape(()) for _, _, tensor in slots]).tolist()
        except RuntimeError:  # e.g. a non-scalar slipped in: fall back one by one
            values = [_scalar_or_none(tensor) for _, _, tensor in slots]
        for (record, key, _), value in zip(slots, values):
            record[key] = value


def _scalar_or_none(tensor: torch.Tensor) -> float | None:
    try:
        return float(tensor.detach().reshape(()).item())
    except (RuntimeError, ValueError):
        return None
