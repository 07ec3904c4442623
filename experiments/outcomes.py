"""What a finished sweep tells its user in a few lines (``trainwreck catalog`` and ``sweep``).

``status_line(rows)``: per status a count and one example's exception line, e.g.
``ok 40, crash 6 (e.g. RuntimeError: mat1 and mat2 shapes cannot be multiplied),
invalid 1 (e.g. SystemExit: train.py: error: unrecognized arguments: --seed 0)``.

``validation_notes(rows)``: for each loop whose reference reported no validation numbers,
by a ``report(...)`` call or captured from what it logs (a ``report`` record with a
``source``), which labels could not be judged and the ways to give it one: the line to add,
or ``loop.metrics`` for a line it already prints. A loop where anything was captured gets
no note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from experiments.trace import TRACE_FILE, read_trace

EXAMPLE_CHARS = 120
# Labels judged from reported validation numbers (experiments.symptoms reads their
# val_* features); without a report() call they can never fire.
VALIDATION_LABELS = ("overfits", "too_good")
REPORT_LINE = (
    "from experiments.telemetry import report; "
    "report(epoch=epoch, val_loss=val_loss, val_metric=val_accuracy)  # once per epoch"
)


def status_line(rows: Iterable[dict[str, Any]]) -> str:
    rows = list(rows)
    counts = Counter(str(row.get("status")) for row in rows)
    examples: dict[str, str] = {}
    for row in rows:
        status = str(row.get("status"))
        if status in ("ok", "unreached") or status in examples:
            continue
        exception = ": ".join(
            str(part) for part in (row.get("exc_type"), row.get("exc_message")) if part
        )
        if exception:
            examples[status] = _one_line(exception)
    parts = []
    for status, count in sorted(counts.items()):
        example = f" (e.g. {examples[status]})" if status in examples else ""
        parts.append(f"{status} {count}{example}")
    return ", ".join(parts)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= EXAMPLE_CHARS else line[: EXAMPLE_CHARS - 3] + "..."


def validation_notes(rows: Iterable[dict[str, Any]]) -> list[str]:
    """A note per loop whose ok reference runs never reported ``val_loss``/``val_metric``."""
    reported: dict[str, bool] = {}
    for row in rows:
        if row.get("identity", "none") != "none" or row.get("status") != "ok":
            continue
        loop = str(row.get("loop"))
        if reported.get(loop):
            continue
        reported[loop] = _reports_validation(row.get("run_dir"))
    labels = ", ".join(VALIDATION_LABELS)
    return [
        f"{loop}: the script reports no validation numbers (none captured from report(...), "
        f"TensorBoard, wandb, Lightning, logging or stdout), so {labels} could not be judged; "
        f"add one line after each epoch's evaluation: {REPORT_LINE}; or, if it prints one, "
        f'match that line with loop.metrics="REGEX" (named groups val_loss, val_metric)'
        for loop, seen in sorted(reported.items())
        if not seen
    ]


def _reports_validation(folder: str | None) -> bool:
    if not folder:
        return False
    for record in read_trace(Path(folder) / TRACE_FILE):
        if record.get("kind") == "report" and ("val_loss" in record or "val_metric" in record):
            return True
    return False
