"""Read the numbers a script already reports, with no edit to it (issue 23, phase 1).

In the run's process, before the script starts, ``start(writer, pattern)`` installs:
``report()``'s sink, patches of TensorBoard, wandb and Lightning that wait for the script
to import them (``imports``, ``libraries``), a patch of ``logging``; and forces wandb
offline. When the script is done, ``Collector.finish(run_dir)`` also reads the run's
``stdout.txt`` and ``stderr.txt`` (whatever wrote them: ``print``, a C extension, a
subprocess), then writes what it resolved.

What the trace gets (experiments/trace.py):

- ``metric`` records, streamed: one per event that showed an evaluation's number
  (``source``, ``step``, ``epoch``, ``at``, ``numbers``: ``[name, split, kind,
  higher_is_better, value, scale]`` each). The evidence; a killed run keeps those of
  its in-process sources (its output files can be read afterwards: ``read_run``).
- ``report`` records, as the script's own ``report(...)`` writes them, with ``source``
  (``report`` for the script's own): the chosen ``val_loss`` and ``val_metric`` series
  (precedence in ``resolve``), so every consumer of ``report`` records reads captured
  numbers as it reads reported ones, and no number twice.
- one ``capture`` record (the interface the verdicts use): ``measured_by`` (per field,
  ``val_loss`` and ``val_metric``: the source that measured it, or null), ``names``
  (what the script called the chosen numbers), ``events`` (events per source),
  ``pattern`` (``loop.metrics``), ``written`` (report records added), ``errors``.

``measured_by(records)`` reads it from any trace (a run killed before its end resolves
from what the trace has).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from experiments.capture import collect, libraries, resolve
from experiments.capture.collect import Collector, Writer
from experiments.capture.events import METRIC_RECORD, SOURCES, Event
from experiments.capture.imports import PatchOnImport

__all__ = ["SOURCES", "Collector", "measured_by", "read_run", "start", "stop"]
OFFLINE_MODES = ("offline", "disabled", "dryrun")


def start(writer: Writer, pattern: str | None = None, observe: bool = True) -> Collector:
    """Install the capture for one run; ``Collector.report`` is ``report()``'s sink.
    ``observe=False`` (a run without telemetry, made to time the script): the sink alone,
    no patches, nothing read at the end."""
    collector = Collector(writer, pattern)
    if not observe:
        collector.observe = False
        return collector
    collector.flushers.append(lambda: libraries.flush_lightning(collector))
    if os.environ.get("WANDB_MODE", "").lower() not in OFFLINE_MODES:
        os.environ["WANDB_MODE"] = "offline"  # never the network, whatever the shell says
    libraries.fresh_logging()
    libraries.patch_logging()
    collector.activate()
    finder = PatchOnImport(libraries.PATCHES, collector.error)
    finder.install()
    collector.finder = finder
    return collector


def stop(collector: Collector) -> None:
    """Remove what ``start`` installed for this run (a process that serves the next one)."""
    collector.deactivate()
    if collector.finder is not None:
        collector.finder.remove()


def measured_by(records: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
    """Per field (``val_loss``, ``val_metric``), the source that measured it, or None.

    From the ``capture`` record when the run wrote one; otherwise (a run killed before
    its end, or recorded before capture existed) from its ``report`` records."""
    found: dict[str, str | None] = dict.fromkeys(resolve.FIELDS)
    for record in records:
        if record.get("kind") == resolve.SUMMARY_RECORD:
            return {**found, **(record.get("measured_by") or {})}
        if record.get("kind") == "report":
            for field in resolve.reported_fields([record]):
                found[field] = found[field] or str(record.get("source") or "report")
    return found


def read_run(folder: str | Path, pattern: str | None = None) -> resolve.Resolution:
    """What a run folder's trace and output files resolve to, read afterwards: for a run
    that ended without its own resolution (timeout, memory cap, kill)."""
    from experiments.capture.lines import compile_pattern
    from experiments.trace import read_trace

    folder = Path(folder)
    records = list(read_trace(folder))
    events = [
        event
        for record in records
        # In-process events carry their time; those read from the output files do not,
        # and are read again below.
        if record.get("kind") == METRIC_RECORD and record.get("at") is not None
        if (event := Event.from_record(record)) is not None
    ]
    compiled = compile_pattern(pattern)
    for name, source in collect.OUTPUT_FILES:
        events += collect.read_output(folder / name, source, compiled)
    reports = [
        r for r in records if r.get("kind") == "report" and r.get("source", "report") == "report"
    ]
    return resolve.resolve(events, resolve.reported_fields(reports), pattern=pattern)
