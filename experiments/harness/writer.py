"""Streams trace records to ``trace.jsonl`` without a host sync per record.

Hooks hand over records whose values may still be tensors (a loss, a gradient norm).
They wait in a small queue; a flush turns all pending tensors into floats with one
``stack().tolist()`` per device (one sync for many records) and writes the lines.
Flushes happen every ``flush_every`` records, and a daemon thread flushes every
``flush_interval_s`` seconds whatever the script is doing (stuck in a loop or in native
code): a run that dies abruptly (SIGKILL, segfault) loses at most the records of its last
``flush_interval_s`` seconds. The end record is written and flushed at once.

Two ways in: ``record(kind, **fields)`` for any record, and ``add(layout, *values)`` for
the per-step records of the telemetry hooks (``backward``, ``loss_fn``, ``step``): a
``Layout`` fixes the kind and field names once, so a hook queues a tuple (no dict, no
keyword arguments) and the flush formats it from a template instead of ``json.dumps``.
Both give the same JSON object; a value the template cannot write (a string, a list, a
non-finite float) goes through ``json.dumps`` like any other record.
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
_Tensor = torch.Tensor


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


def _encode(value: Any) -> str:
    """One JSON value, as ``json.dumps(_clean(value))`` writes it; plain numbers fast."""
    cls = value.__class__
    if cls is float:
        if value - value == 0.0:  # finite (inf - inf and nan - nan are nan)
            return float.__repr__(value)  # what json.dumps writes for a float
    elif cls is int:
        return int.__repr__(value)
    elif value is None:
        return "null"
    return json.dumps(_clean(value), allow_nan=False)


class Layout:
    """The kind and field names of a record that a hook writes many times."""

    __slots__ = ("index_at", "kind", "loss_at", "template", "width")

    def __init__(self, kind: str, *fields: str) -> None:
        self.kind = kind
        self.width = len(fields)
        head = '{"kind": ' + json.dumps(kind) + ', "t": %s'
        self.template = head + "".join(", " + json.dumps(f) + ": %s" for f in fields) + "}"
        # Where the loss is, for the first non-finite loss (None: not a loss record).
        self.loss_at = fields.index("loss") if kind in LOSS_KINDS and "loss" in fields else None
        self.index_at = fields.index("i") if "i" in fields else None


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
        # (layout or kind, perf_counter time, values tuple or fields dict)
        self._pending: deque[tuple[Layout | str, float, Any]] = deque()
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
        # Set by a hook that queued a tensor value (an accelerator's scalar): the next
        # flush reads them all in one transfer per device.
        self.has_tensors = False

    def _leave_to_parent(self) -> None:
        self._forked_away = True
        self._stopped.set()

    def add(self, layout: Layout, *values: Any) -> None:
        """Queue a record of ``layout`` (values in its field order); the hooks' fast path."""
        if self._forked_away:
            return
        pending = self._pending
        pending.append((layout, time.perf_counter(), values))
        if len(pending) >= self._flush_every:
            self.flush()

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
        if self._file.closed:  # the periodic flush, woken just as close() ran
            return
        queued = self._pending
        pending = [queued.popleft() for _ in range(len(queued))]
        if pending:
            if self.has_tensors:
                self.has_tensors = False
                pending = _resolve_tensors(pending)
            lines = self._batch_lines(pending)
            if lines is None:
                lines = [self._line(kind, when, values) for kind, when, values in pending]
            self._file.write("\n".join(lines) + "\n")
        self._file.flush()

    def _batch_lines(self, pending: list[tuple[Layout | str, float, Any]]) -> list[str] | None:
        """Every line at once: the values of all layout records go through one C-encoded
        ``json.dumps`` and are cut apart into their templates. None when that cannot be
        exact (a non-finite float, which then also needs the first-non-finite check, a
        value with ", " in its JSON, an object json cannot encode): write line by line."""
        t0 = self.t0
        rows = [
            (round(when - t0, 6), *values)
            for kind, when, values in pending
            if kind.__class__ is Layout
        ]
        try:
            payload = json.dumps(rows, allow_nan=False)
        except (TypeError, ValueError):
            return None
        chunks = payload[2:-2].split("], [") if rows else []
        if len(chunks) != len(rows):
            return None
        lines = []
        next_chunk = iter(chunks).__next__
        for kind, when, values in pending:
            if kind.__class__ is Layout:
                parts = next_chunk().split(", ")
                if len(parts) != kind.width + 1:
                    return None
                lines.append(kind.template % tuple(parts))
            else:
                lines.append(self._generic_line(kind, round(when - t0, 6), values))
        return lines

    def _line(self, kind: Layout | str, when: float, values: Any) -> str:
        t = round(when - self.t0, 6)
        if kind.__class__ is not Layout:
            return self._generic_line(kind, t, values)
        if kind.loss_at is not None and self.first_nonfinite is None:
            index = -1 if kind.index_at is None else values[kind.index_at]
            self._check_loss(kind.kind, index, values[kind.loss_at])
        return kind.template % (float.__repr__(t), *map(_encode, values))

    def _generic_line(self, kind: str, t: float, fields: dict[str, Any]) -> str:
        record = {"kind": kind, "t": t, **fields}
        if kind in LOSS_KINDS and self.first_nonfinite is None:
            self._check_loss(kind, record.get("i", -1), record.get("loss"))
        try:  # the C encoder, when every value is plain and finite
            return json.dumps(record, allow_nan=False)
        except (TypeError, ValueError):
            return json.dumps(_clean(record), allow_nan=False)

    def _check_loss(self, kind: str, index: Any, loss: Any) -> None:
        if isinstance(loss, float) and not math.isfinite(loss):
            self.first_nonfinite = (kind, index)

    def close(self) -> None:
        self._stopped.set()
        # Joined, so a run process that serves the next run has no thread left over.
        if self._flusher.is_alive() and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=5.0)
        self.flush()
        with self._lock:
            self._file.close()


def _resolve_tensors(
    pending: list[tuple[Layout | str, float, Any]],
) -> list[tuple[Layout | str, float, Any]]:
    """Every scalar tensor value becomes its float, one transfer per device and dtype."""
    rows = [
        (kind, when, list(values) if isinstance(values, tuple) else dict(values))
        for kind, when, values in pending
    ]
    groups: dict[tuple[torch.device, torch.dtype], list[tuple[Any, Any, torch.Tensor]]] = {}
    for _, _, values in rows:
        slots = values.items() if isinstance(values, dict) else enumerate(values)
        for key, value in slots:
            if isinstance(value, _Tensor):
                groups.setdefault((value.device, value.dtype), []).append((values, key, value))
    for slots in groups.values():
        try:
            floats = torch.stack([tensor.reshape(()) for _, _, tensor in slots]).tolist()
        except RuntimeError:  # e.g. a non-scalar slipped in: fall back one by one
            floats = [_scalar_or_none(tensor) for _, _, tensor in slots]
        for (values, key, _), value in zip(slots, floats):
            values[key] = value
    return [
        (kind, when, tuple(values) if isinstance(values, list) else values)
        for kind, when, values in rows
    ]


def _scalar_or_none(tensor: torch.Tensor) -> float | None:
    try:
        return float(tensor.detach().reshape(()).item())
    except (RuntimeError, ValueError):
        return None
