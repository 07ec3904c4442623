"""The run's collector: what the hooks hand over, streamed to the trace and resolved at
the end into ``report`` records (``resolve``) with a ``capture`` summary.

One collector is active per run (``active()``); the patched library methods look it up on
every call, so a process that serves several runs patches each library once and the
wrappers pass straight through between runs.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from experiments.capture import keys, resolve
from experiments.capture.events import METRIC_RECORD, Event, Number, keep
from experiments.capture.lines import LineReader, compile_pattern

# The run's output files (experiments/harness/child.py writes them) and their sources.
OUTPUT_FILES = (("stdout.txt", "stdout"), ("stderr.txt", "stderr"))
READ_LIMIT_BYTES = 64 * 2**20  # an output file is capped well below this (budget.output_cap_mb)


class Writer(Protocol):
    t0: float

    def record(self, kind: str, **fields: Any) -> None: ...

    def flush(self) -> None: ...


_active: Collector | None = None


def active() -> Collector | None:
    return _active


class Collector:
    def __init__(self, writer: Writer, pattern: str | None = None) -> None:
        self.writer = writer
        self.errors: list[str] = []
        self.pattern_text = pattern
        try:
            self.pattern = compile_pattern(pattern)
        except ValueError as error:  # checked when the sweep is built; a spec by hand
            self.pattern = None
            self.errors.append(str(error))
        self.events: list[Event] = []
        self.reported: set[str] = set()
        self._logging = LineReader("logging", self.pattern)
        self.flushers: list[Any] = []  # callables that hand over what they still hold
        self.finder: Any = None  # the import hook installed for this run
        self.observe = True  # False: report()'s sink only (a run without telemetry)

    def activate(self) -> None:
        global _active
        _active = self

    def deactivate(self) -> None:
        global _active
        if _active is self:
            _active = None

    def now(self) -> float:
        return round(time.perf_counter() - self.writer.t0, 6)

    def report(self, metrics: dict[str, Any]) -> None:
        """The ``report(...)`` sink: the script's own numbers, tagged ``source: report``."""
        self.reported |= resolve.reported_fields([metrics])
        self.writer.record("report", **{"source": "report", **metrics})

    def add(self, event: Event) -> None:
        self.events.append(event)
        self.writer.record(METRIC_RECORD, **event.record())

    def named(
        self,
        source: str,
        items: Iterable[tuple[str, Any]],
        step: Any = None,
        epoch: Any = None,
    ) -> None:
        """Numbers with names (a tag, a dict key): kept when one is an evaluation's."""
        numbers = []
        for name, value in items:
            key = keys.classify(name)
            if key is None or key.split not in ("val", "test", "train"):
                continue
            number = as_float(value)
            if number is not None:
                numbers.append(Number.of(name, key, number))
        kept = keep(numbers)
        if kept:
            self.add(Event(source, kept, _count(step), _count(epoch), self.now()))

    def message(self, text: str) -> None:
        """A logging record's message, read like a printed line."""
        for event in self._logging.read(text, self.now()):
            self.add(event)

    def error(self, where: str, error: BaseException) -> None:
        """A hook that failed: noted in the summary, never raised into the script."""
        if len(self.errors) < 10:
            self.errors.append(f"{where}: {type(error).__name__}: {error}")

    def finish(self, run_dir: Path) -> None:
        """Once the script is done: read its output files, write the resolved report
        records and the ``capture`` summary. Never raises (the end record must follow)."""
        self.deactivate()  # what runs after the script (the held-out evaluation) is not its
        if not self.observe:
            return
        try:
            for flush in self.flushers:
                flush()
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            for name, source in OUTPUT_FILES:
                for event in read_output(Path(run_dir) / name, source, self.pattern):
                    self.add(event)
            resolution = resolve.resolve(self.events, self.reported, pattern=self.pattern_text)
            for record in resolution.records:
                self.writer.record("report", **record)
            summary = resolution.summary
        except Exception as error:  # a bug here must not cost the run its end record
            self.error("finish", error)
            summary = {"measured_by": dict.fromkeys(resolve.FIELDS)}
        self.writer.record(resolve.SUMMARY_RECORD, **summary, errors=self.errors)
        self.writer.flush()


def read_output(path: Path, source: str, pattern: Any = None) -> list[Event]:
    """The events of a run's output file (its last ``READ_LIMIT_BYTES`` at most)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - READ_LIMIT_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return list(LineReader(source, pattern).read_text(text))


def as_float(value: Any) -> float | None:
    """A plain number from a Python, numpy or one-element torch value; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        numel = getattr(value, "numel", None)
        if callable(numel) and numel() != 1:
            return None
        item = getattr(value, "item", None)
        if not callable(item):
            return None
        try:
            number = float(item())
        except (TypeError, ValueError, RuntimeError):
            return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int | None:
    number = as_float(value)
    return int(number) if number is not None else None
