"""The run folder and trace format shared by the harness (writer) and signatures (reader).

A run folder holds:

- ``trace.jsonl``: one JSON object per line, streamed while the run goes (a crash,
  timeout or SIGKILL keeps what was written). Every record has ``kind`` and ``t``
  (seconds since the script started). Kinds:

  - ``start``: ``pid``, ``device``, ``torch``, ``seed``, ``argv``.
  - ``backward``: ``i`` (0-based count of backward calls), ``loss`` (float value of the
    tensor ``backward()`` was called on; ``nan``/``inf`` kept as strings "nan", "inf",
    "-inf"), ``step`` (optimizer steps taken so far).
  - ``loss_fn``: ``i``, ``loss``: the output of a loss module (``nn.*Loss``) or a
    functional loss computed with grad enabled, in training mode. Lets a mutant that
    never calls ``backward()`` still show a loss curve. Every call is recorded while no
    ``backward()`` has run, plus the first 100; after that every k-th (``i`` says which).
  - ``step``: ``i`` (1-based optimizer step count), ``grad_norm`` (global L2 norm of
    all parameter gradients at ``step()``; null when not sampled), ``update_ratio``
    (||delta w|| / ||w|| over all parameters of that step; null when not sampled),
    ``rss_mb`` (sampled with the norms, null otherwise), ``cuda_mb`` (null on CPU),
    ``step_time`` (seconds since previous step).
  - ``forwards``: cumulative counters at the time of writing:
    ``train_forwards`` (forwards whose output received a gradient), of which
    ``train_forwards_eval_mode`` ran with the module in ``eval()``;
    ``eval_forwards`` (forwards whose output got no gradient), of which
    ``eval_forwards_grad`` ran with grad enabled (a wasted graph).
  - ``report``: whatever the script passed to ``experiments.telemetry.report``
    (``epoch``, ``train_loss``, ``val_loss``, ``val_metric``...), with ``source:
    "report"``; or, written when the script ends, numbers it printed or logged
    (``source``: ``pattern``, ``tensorboard``, ``wandb``, ``lightning``, ``logging``,
    ``stdout``, ``stderr``; plus ``split``, ``names``, ``val_metric_kind``), one series
    per field, never one the script reported itself (``experiments/capture``).
  - ``metric``: one per printed line or logging call that showed an evaluation's number
    (``source``, ``step``, ``epoch``, ``at``, ``numbers``): the evidence behind those.
  - ``capture``: once, before ``end``: ``measured_by`` (per ``val_loss``/``val_metric``,
    the source that measured it, or null), ``names``, ``events``, ``pattern``,
    ``written``, ``errors``.
  - ``end``: ``status`` and the final counters (written by the child if it can;
    otherwise the parent appends it). Fields: ``status``, ``exc_type``, ``exc_message``,
    ``exit_code``, ``nonfinite`` (``[kind, i]`` of the first non-finite ``backward`` or
    ``loss_fn`` loss, or null), ``steps``, ``backward_calls``, ``loss_fn_calls``, the four
    forward counters; from the child also ``wall_s``, ``peak_cuda_mb`` and ``raised``
    (the exception the script ended with: ``types``, its class and base classes' names,
    innermost cause first; ``message``; ``lines``, its traceback's lines in the mutated
    file, outermost first; null on a clean end or an exit), ``reach`` (per changed region,
    how often its statements ran; null: not probed) and ``reach_eval`` (how often while
    evaluating: autograd off, outside module forwards and backwards; null without
    telemetry); from the parent
    ``written_by: "parent"`` (the child died abruptly: timeout, memory cap, signal).

  Harness notes: ``grad_norm``/``update_ratio`` are sampled on step 1 and every
  ``sample_every``-th step after it (default 20: steps 1, 21, 41...; the run's ``spec.json``
  says which). A run with ``telemetry`` off has only start, report and end records. Records reach the disk in batches at
  least every 0.2 s, so a run that dies abruptly loses at most its last 0.2 s of records.
  ``os._exit(code)`` in a script still writes the end record (``exc_type="OsExit"``).

- ``result.json``: the one result row of the run (see ``RESULT_FIELDS``), written
  atomically by the parent when the run ends.
- ``mutant.py`` (the source that ran, when it is a mutant), ``stdout.txt``, ``stderr.txt``.
- ``spec.json``: what the harness passed to the run's process (argv, seed, device, limits).

The status rules (what makes a run ``crash`` rather than ``invalid``...) are spelled out in
``experiments/harness/status.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TRACE_FILE = "trace.jsonl"
RESULT_FILE = "result.json"
# ``unreached``: a mutant whose changed statements never ran (see harness/reach.py);
# ``stillborn``: a mutant that cannot run as the bug it names (see harness/raised.py).
STATUSES = (
    "ok",
    "crash",
    "timeout",
    "nan",
    "oom",
    "killed",
    "invalid",
    "unreached",
    "stillborn",
)

RESULT_FIELDS = (
    "key",  # cache key (hex)
    "run_id",  # human-readable: <loop>/<identity or 'none'>/seed<k>/<device>
    "loop",  # loop name or script path
    "identity",  # mutant identity, or "none" for the unmutated script
    "operators",  # list of operator names ([] when unmutated)
    "categories",
    "contexts",  # each part's static site context: train/eval/setup/export/plot/unknown
    "params",
    "lines",  # original lines the mutation touched
    "mutant_lines",
    "diff",
    "sha256",  # of the source that ran
    "argv",
    "seed",
    "device",
    "status",
    "exc_type",
    "exc_message",
    "steps",  # optimizer steps taken
    "backward_calls",
    "wall_s",  # wall time of the child, start to end
    "peak_rss_mb",
    "peak_cuda_mb",
    "train_forwards",
    "train_forwards_eval_mode",
    "eval_forwards",
    "eval_forwards_grad",
    "exit_code",
    "torch_version",
    "harness_version",
    # Added by the harness:
    "script",  # absolute path of the original script
    "loss_fn_calls",  # training loss-function calls seen (see the loss_fn record)
    "nonfinite_at",  # [kind, i] of the first non-finite loss, or null
    "timeout_s",  # the deadline the run had
    "mem_cap_mb",  # its memory cap above its start
    "start_method",  # "fork" (warm parent), "spawn" (fresh interpreter) or "reused"
    "telemetry",  # False when the run had no hooks (no steps, losses or counters)
    "target",  # the file the mutant changes (the script, or a module it imports)
    "reached",  # whether the mutated statements ran (null: unknown or no mutant)
    "reach_hits",  # how many times they ran
    "reach_eval_hits",  # how many of those while evaluating (harness/reach.py EvalHits)
    "seed_insensitive",  # on reference runs: identical curves on every seed (reference_gate)
    "witness",  # the witness probes' facts (harness/probes.py), compared by experiments.witness
)


def encode_float(value: float | None) -> float | str | None:
    if value is None:
        return None
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def decode_float(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        return float(value)
    return float(value)


def read_trace(path: str | Path) -> Iterator[dict[str, Any]]:
    """Records of a trace file; a torn last line (killed mid-write) is skipped."""
    trace = Path(path)
    if trace.is_dir():
        trace = trace / TRACE_FILE
    if not trace.exists():
        return
    with open(trace, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue
