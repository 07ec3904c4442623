"""No verdict without a healthy reference: the unmutated script must end ``ok`` on every seed.

``trainwreck catalog`` and ``trainwreck sweep`` run the unmutated runs first and call
``check(rows)``. A reference that crashed, hung or exited (a missing package, a data file
it cannot find, an argument it does not take) would make every mutant look like a bug
that "crashes" or is "silent": the sweep stops there with one message naming the loop,
seed, status, exception line and the last lines of its stderr, and nothing is labelled.

A reference that passes may still ignore the seed (a script that calls
``torch.manual_seed(1337)`` itself): identical curves on every seed leave no spread to
measure effect sizes against. ``check`` says so once per loop, and ``mark`` records
``seed_insensitive`` on those reference runs' ``result.json``, so the catalog compares
that loop's mutants by exact differences and says why.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.files import write_text_atomic
from experiments.harness.spec import RunSpec
from experiments.trace import RESULT_FILE, TRACE_FILE, read_trace

STDERR_LINES = 8
CURVE_KINDS = ("backward", "loss_fn", "report")


class ReferenceFailed(Exception):
    """The unmutated script did not end ``ok`` on some seed: no table can stand on it."""


@dataclass
class Gate:
    failures: list[dict[str, Any]] = field(default_factory=list)
    seed_insensitive: dict[str, list[int]] = field(default_factory=dict)  # loop -> seeds

    @property
    def ok(self) -> bool:
        return not self.failures

    def message(self) -> str:
        """One message for the first failure (and how many more there are)."""
        if not self.failures:
            return ""
        row = self.failures[0]
        exception = ": ".join(filter(None, [row.get("exc_type"), row.get("exc_message")]))
        lines = [
            f"the reference (unmutated {row.get('loop')}) did not end ok on seed "
            f"{row.get('seed')}: status {row.get('status')}"
            + (f", {exception}" if exception else ""),
        ]
        tail = stderr_tail(row.get("run_dir"))
        if tail:
            lines.append("last lines of its stderr:")
            lines += [f"    {line}" for line in tail]
        others = len(self.failures) - 1
        if others:
            seeds = sorted({(r.get("loop"), r.get("seed")) for r in self.failures[1:]})
            lines.append(f"{others} more reference runs failed too: {seeds}")
        lines.append(
            "no mutant was run and nothing was labelled: fix the script, its arguments "
            "(loop.argv) or its folder (loop.cwd), check it with `python SCRIPT ARGS`, rerun"
        )
        return "\n".join(lines)

    def notes(self) -> list[str]:
        return [seed_note(loop, seeds) for loop, seeds in sorted(self.seed_insensitive.items())]


def seed_note(loop: str, seeds: Sequence[int]) -> str:
    return (
        f"{loop}: the reference gives identical curves on seeds {list(seeds)} (the script "
        f"seeds itself), so mutants are compared by exact differences, not effect sizes; "
        f"to vary the seed, pass it to the script: loop.seed_arg=--seed (and "
        f"loop.flag_style=equals for --seed=0)"
    )


def references(specs: Iterable[RunSpec]) -> list[RunSpec]:
    """The unmutated runs of a sweep (every seed, the noop control's too)."""
    return [spec for spec in specs if spec.mutant is None and spec.invalid_reason is None]


def check(rows: Iterable[dict[str, Any]]) -> Gate:
    gate = Gate()
    by_loop: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("identity", "none") != "none":
            continue
        if row.get("status") != "ok":
            gate.failures.append(row)
        else:
            by_loop[str(row.get("loop"))].append(row)
    gate.failures.sort(key=lambda row: (str(row.get("loop")), int(row.get("seed") or 0)))
    for loop, loop_rows in by_loop.items():
        seeds = sorted({int(row["seed"]) for row in loop_rows})
        if len(seeds) >= 2 and _identical_curves(loop_rows):
            gate.seed_insensitive[loop] = seeds
    return gate


def mark(rows: Iterable[dict[str, Any]], gate: Gate) -> None:
    """Record ``seed_insensitive`` (True or False) on every ok reference run's result."""
    for row in rows:
        folder = row.get("run_dir")
        if row.get("identity", "none") != "none" or row.get("status") != "ok" or not folder:
            continue
        flag = str(row.get("loop")) in gate.seed_insensitive
        if row.get("seed_insensitive") == flag:
            continue
        row["seed_insensitive"] = flag
        stored = {name: value for name, value in row.items() if name not in ("run_dir", "cached")}
        write_text_atomic(Path(folder) / RESULT_FILE, _dumps(stored))


def _dumps(row: dict[str, Any]) -> str:
    import json

    return json.dumps(row, indent=1)


def _identical_curves(rows: list[dict[str, Any]]) -> bool:
    curves = [_curve(row.get("run_dir")) for row in rows]
    return bool(curves[0]) and all(curve == curves[0] for curve in curves[1:])


def _curve(folder: str | None) -> list[Any]:
    """The run's losses and reported metrics, in order (what a seed would change)."""
    if not folder:
        return []
    values: list[Any] = []
    for record in read_trace(Path(folder) / TRACE_FILE):
        kind = record.get("kind")
        if kind in ("backward", "loss_fn"):
            values.append((kind, record.get("loss")))
        elif kind == "report":
            values.append(
                (kind, sorted((k, v) for k, v in record.items() if k not in ("kind", "t")))
            )
    return values


def stderr_tail(folder: str | None, count: int = STDERR_LINES) -> list[str]:
    """The last lines of a run's stderr, without the traceback frames of the harness and
    the standard library (the script's own frames and its last words stay)."""
    if not folder:
        return []
    try:
        text = (Path(folder) / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line.startswith('  File "'):
            skipping = any(part in line for part in _HIDDEN_FRAMES)
        elif not line.startswith("    "):
            skipping = False
        if line.strip() and not skipping:
            kept.append(line.rstrip())
    return kept[-count:]


# Frames a user does not need to see: the harness running the script, the standard library.
_HIDDEN_FRAMES = (
    str(Path(__file__).resolve().parent / "harness"),
    str(Path(os.__file__).resolve().parent) + os.sep,
)


def gated_sweep(specs: Sequence[RunSpec], run: Any, say: Any = print) -> list[dict[str, Any]]:
    """Run the references of ``specs`` first (``run(specs) -> rows``), check them, then
    everything (the references come back from the cache). Raises ``ReferenceFailed``
    with the message when a reference failed; a sweep without mutants is not gated."""
    unmutated = references(specs)
    if len(unmutated) == len(specs):
        return run(list(specs))
    reference_rows = run(unmutated)
    gate = check(reference_rows)
    if not gate.ok:
        raise ReferenceFailed(gate.message())
    mark(reference_rows, gate)
    for note in gate.notes():
        say(note)
    # The second pass finds the references in the cache; they were run (or not) above.
    was_cached = {row["key"]: row.get("cached") for row in reference_rows}
    rows = run(list(specs))
    for row in rows:
        if row["key"] in was_cached:
            row["cached"] = was_cached[row["key"]]
    return rows
