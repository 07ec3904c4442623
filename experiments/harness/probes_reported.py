"""A witness fact derived from what the run already records: the numbers the script
reported (``report(...)``, or captured from what it printed or logged: the trace's
``report`` records, experiments/capture).

A bug in what a script reports (validation numbers added to the training accumulators)
changes neither its losses nor its evaluation outputs; the only runtime fact that shows
it is the reported numbers themselves. ``reported(trace)`` reads them once the run has
ended (the parent, ``ending.conclude``: the captured ones are resolved only after the
child's probes wrote their facts) and ``with_reported`` adds them to the run's facts as a
sequence like the probes' sampled ones (digest.py): every record's numbers as one text,
the first ``KEEP`` kept, a count and a checksum over all. Pure Python (no torch).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

KEEP = 48
# Record fields that are not the script's numbers (when, where from, what they are named).
_NOT_NUMBERS = frozenset({"kind", "t", "source", "split", "names", "val_metric_kind"})
# Numbers named for a time differ between two runs of one script on one seed: left out.
_TIMING = re.compile(r"time|sec|duration|elapsed|speed|throughput|per_s|wall|clock", re.I)


def reported(trace_path: str | Path) -> dict[str, Any]:
    """``{"n", "chain", "at"}`` of the trace's report records (module docstring)."""
    n, chain, kept = 0, 0, []
    for text in _report_texts(trace_path):
        if len(kept) < KEEP:
            kept.append([n, text])
        chain = zlib.crc32(text.encode(), chain)
        n += 1
    return {"n": n, "chain": f"{chain:08x}", "at": kept}


def _report_texts(trace_path: str | Path) -> Iterator[str]:
    try:
        with open(trace_path, "rb") as handle:
            for line in handle:
                if b'"report"' not in line:  # most records: no parse
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and record.get("kind") == "report":
                    yield _numbers(record)
    except OSError:
        return


def _numbers(record: dict[str, Any]) -> str:
    items = sorted(
        (key, value)
        for key, value in record.items()
        if key not in _NOT_NUMBERS and not _TIMING.search(key)
    )
    return " ".join(f"{key}={value!r}" for key, value in items)


def with_reported(facts: Any, trace_path: str | Path) -> Any:
    """The run's facts with ``reported`` added (facts that are not a mapping: unchanged)."""
    if not isinstance(facts, dict):
        return facts
    return {**facts, "reported": reported(trace_path)}
