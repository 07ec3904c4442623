"""Whether a mutant's crash is its bug or a rewrite that cannot run (``stillborn``).

Both halves of one decision, kept together so the record and its reader agree:

- in the run's process, ``describe`` turns the exception the script ended with into the
  end record's ``raised`` field (exception class names, message, and the traceback's
  lines in the mutated file, outermost first) before the traceback is dropped;
- in the parent, ``stillborn`` applies the shared rule (``experiments.stillborn``, the one
  ``trainwreck test`` uses) to a ``crash``: a Python-level error raised at one of the
  mutant's changed lines before the first optimizer step, by a mutant whose operators do
  not declare that their bug is a crash.

A crash after the first optimizer step stays a crash: the mutant ran as a training loop
and its error is what the loop does with the bug. A run without telemetry cannot tell
whether a step happened, so it is never called stillborn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.stillborn import Raised, from_exception, is_stillborn

MUTATED = "<mutated>"  # how the record names the mutated file's frames
MAX_FRAMES = 50  # the innermost ones: deep recursion must not bloat the end record
MAX_MESSAGE = 500


def describe(error: BaseException | None, mutated_file: str) -> dict[str, Any] | None:
    """The end record's ``raised`` field for ``error`` (None for a clean end or an exit).

    Only frames in ``mutated_file`` are kept (as line numbers): the rule looks at the
    deepest of them, and the library frames below it say nothing about the mutant."""
    if error is None or isinstance(error, SystemExit | KeyboardInterrupt):
        return None
    found = from_exception(error, lambda path: MUTATED if path == mutated_file else path)
    lines = [line for path, line in found.frames if path == MUTATED]
    return {
        "types": list(found.types),
        "message": found.message[:MAX_MESSAGE],
        "lines": lines[-MAX_FRAMES:],
    }


def stillborn(mutant: dict[str, Any] | None, end: dict[str, Any] | None, status: str) -> bool:
    """Whether a run that ended ``status`` with the child's ``end`` record is stillborn."""
    if status != "crash" or not mutant or not end or not isinstance(end.get("raised"), dict):
        return False
    if end.get("telemetry") is False or int(end.get("steps") or 0) > 0:
        return False
    declared = declares_crash(mutant.get("operators") or ())
    if declared is None:
        return False  # an operator this installation does not know: no claim either way
    record = end["raised"]
    raised = Raised(
        tuple(record.get("types") or ()),
        str(record.get("message") or ""),
        tuple((MUTATED, int(line)) for line in record.get("lines") or ()),
    )
    changed = {MUTATED: {int(line) for line in mutant.get("mutant_lines") or ()}}
    return is_stillborn(raised, changed, declared)


def declares_crash(names: Sequence[str]) -> bool | None:
    """Whether any of the named operators declares that its bug is a crash; None when one
    is not registered (its declaration cannot be read)."""
    from experiments.stillborn import declares_crash as any_declares
    from mutations.registry import operator_classes

    classes = operator_classes()
    if any(name not in classes for name in names):
        return None
    return any_declares(classes[name] for name in names)
