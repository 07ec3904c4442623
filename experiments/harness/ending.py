"""How a run ended, as the parent concludes it once the process is gone (or has said
"done"): the child's own end record when it wrote one, else an end record the parent
writes from the partial trace and how the process died; then the status (the rules of
``status``; a mutant whose changed lines never ran is ``unreached``; a mutant that died
of a Python-level error at a changed line before its first optimizer step, which its
operator does not declare, is ``stillborn``: ``raised``) and the result row.

New run statuses decided from the whole run (whether the mutant is the bug it claims)
belong here, after ``unreached``: a run's end is concluded in ``conclude`` alone.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from experiments.harness import raised, reach
from experiments.harness import status as rules
from experiments.harness.active import ActiveRun
from experiments.harness.budget import Budget
from experiments.harness.probes_reported import with_reported
from experiments.harness.row import COUNTERS, result_row
from experiments.trace import TRACE_FILE, decode_float, read_trace

TAIL_BYTES = 65536
TRACEBACK_START = "Traceback (most recent call last):"
# A mutant whose changed statements never ran behaves as the script: when the run ended on
# its own with one of these, its status becomes ``unreached`` (a timeout or a kill may have
# come before the mutated lines would have run, so those keep theirs).
UNREACHED_FROM = ("ok", "nan", "crash", "invalid")


def conclude(
    active: ActiveRun, wait_status: int, peak_rss_mb: float | None, wall_s: float, budget: Budget
) -> dict[str, Any]:
    """The result row of a run whose process ended (``wait_status`` as ``os.wait4`` gives
    it); completes its trace with an end record when the child could not write one."""
    trace_path = active.folder / TRACE_FILE
    end = last_end_record(trace_path)
    if end is not None and end.get("nonce") != active.nonce:
        end = None  # an end record the child did not write (the script appended it)
    child_end = end if active.killed_for is None else None
    if end is not None and active.killed_for is None:
        counters = end
        status, exc_type, message = end["status"], end.get("exc_type"), end.get("exc_message")
        exit_code = end.get("exit_code")
        nonfinite = end.get("nonfinite")
    else:
        counters, nonfinite = scan_trace(trace_path)
        counters["telemetry"] = active.spec.telemetry
        if active.killed_for == "timeout":
            status, exc_type = "timeout", "Timeout"
            message = f"no end within {active.timeout_s:.1f} s"
            exit_code = -signal.SIGKILL
        elif active.killed_for == "oom":
            status, exc_type = "oom", "MemoryCap"
            message = f"resident memory above {active.rss_cap_mb:.0f} MB"
            exit_code = -signal.SIGKILL
        else:
            status, exc_type, message, exit_code = rules.after_abrupt_end(
                wait_status, counters, nonfinite is not None
            )
        append_end(
            trace_path,
            wall_s,
            status=status,
            exc_type=exc_type,
            exc_message=message,
            exit_code=exit_code,
            nonfinite=nonfinite,
            written_by="parent",
            witness=counters.get("witness"),
            **{name: counters.get(name, 0) for name in COUNTERS},
        )
    if exc_type == "SystemExit":  # argparse's "error: ..." says more than its exit code
        message = last_stderr_line(active.folder) or message
    reached = reach.summary(counters.get("reach"))
    unreached = active.spec.mutant is not None and reached["reached"] is False
    if unreached and status in UNREACHED_FROM:
        status = "unreached"
    elif raised.stillborn(active.spec.mutant, child_end, status):
        status = "stillborn"
    row = result_row(active.spec, active.key, status, exc_type, message, counters)
    # The numbers the script reported join the facts: written after the child's facts.
    row["witness"] = with_reported(counters.get("witness"), trace_path)
    row.update(reached)
    row.update(reach.eval_summary(counters.get("reach"), counters.get("reach_eval")))
    row.update(
        wall_s=round(wall_s, 4),
        exit_code=exit_code,
        peak_rss_mb=peak_rss_mb,
        peak_cuda_mb=counters.get("peak_cuda_mb"),
        nonfinite_at=nonfinite,
        timeout_s=round(active.timeout_s, 3),
        start_method=active.start_method,
        budget=budget.of(active.spec),
        output_dropped={output.path.name: output.finish() for output in active.outputs},
        trace_dropped=counters.get("trace_dropped"),
    )
    return row


def last_stderr_line(folder: Path) -> str | None:
    """The script's last words on stderr before it exited (argparse's ``error: ...``),
    not the traceback of the ``SystemExit`` that followed them."""
    try:
        with open(folder / "stderr.txt", "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 8192))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if TRACEBACK_START in lines:
        lines = lines[: len(lines) - 1 - lines[::-1].index(TRACEBACK_START)]
    lines = [line.strip() for line in lines if line.strip()]
    return lines[-1][: rules.MESSAGE_LIMIT] if lines else None


def last_end_record(trace_path: Path) -> dict[str, Any] | None:
    """The child's end record, if it wrote one: the last line of the trace."""
    try:
        with open(trace_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            return None
        return record if record.get("kind") == "end" else None
    return None


def scan_trace(trace_path: Path) -> tuple[dict[str, Any], list[Any] | None]:
    """Counters of a trace that has no end record, and its first non-finite loss."""
    counters: dict[str, Any] = dict.fromkeys(COUNTERS, 0)
    nonfinite = None
    for record in read_trace(trace_path):
        kind = record.get("kind")
        if kind == "step":
            counters["steps"] = max(counters["steps"], int(record.get("i", 0)))
        elif kind in ("backward", "loss_fn"):
            name = "backward_calls" if kind == "backward" else "loss_fn_calls"
            counters[name] = max(counters[name], int(record.get("i", -1)) + 1)
            loss = decode_float(record.get("loss"))
            if nonfinite is None and loss is not None and not _finite(loss):
                nonfinite = [kind, record.get("i")]
        elif kind == "forwards":
            for name in COUNTERS[3:]:
                counters[name] = int(record.get(name, 0))
        elif kind == "witness":  # the probes' facts as last written (harness/probes.py)
            counters["witness"] = {k: v for k, v in record.items() if k not in ("kind", "t")}
    return counters, nonfinite


def _finite(value: float) -> bool:
    return value == value and value not in (float("inf"), float("-inf"))


def append_end(trace_path: Path, wall_s: float, **fields: Any) -> None:
    record = {"kind": "end", "t": round(wall_s, 6), **fields}
    with open(trace_path, "a+b") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell():
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":  # a line torn by the kill: end it first
                handle.write(b"\n")
        handle.write(json.dumps(record).encode("utf-8") + b"\n")
