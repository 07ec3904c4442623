"""Is a mutant the bug it claims, or a rewrite that cannot run (a *stillborn* mutant)?

A mutant that dies with a Python-level error raised at one of its changed lines (a name
its rewrite left unbound, a keyword the callee does not take, an import that no longer
resolves) never exercised the bug its operator names: whatever notices it (a test, a
crash row in the catalog) noticed a broken rewrite. mutmut and Stryker call these
incompetent mutants. They are counted apart, never as killed or as a symptom, unless
the operator declares that its bug is such a crash (``expected == "crash"``: passing
targets to the loss in the wrong order is meant to raise).

One rule, shared by ``trainwreck test`` (collection, import and test failures) and the
harness's runs: ``is_stillborn(raised, changed, declares_crash)``. The rule needs the
standard library only, so it runs in any process.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

# Errors of the program's text, not of its numbers: a bug's effect (a shape mismatch, a
# NaN, a dtype clash inside torch) is a RuntimeError/ValueError and never counts.
PYTHON_LEVEL = frozenset(
    {
        "NameError",  # UnboundLocalError is one
        "AttributeError",
        "ImportError",  # ModuleNotFoundError is one
        "SyntaxError",  # IndentationError is one
    }
)
# A TypeError counts only when it is about the call's shape (arity, keywords), not about
# the values passed (``unsupported operand type(s)``: that can be the bug's effect).
_CALL_SHAPE = re.compile(
    r"unexpected keyword argument|positional argument|required (positional|keyword)"
    r"|got multiple values for|takes no (keyword )?arguments|keyword arguments? (is|are) not"
)


@dataclass(frozen=True)
class Raised:
    """An exception as the rule needs it: its class and base classes' names, message, and
    the traceback's frames, outermost first, as (file, line)."""

    types: tuple[str, ...]
    message: str
    frames: tuple[tuple[str, int], ...]

    @property
    def name(self) -> str:
        return self.types[0] if self.types else "?"


def from_exception(error: BaseException, file_of=lambda path: path) -> Raised:
    """``Raised`` of ``error``: when it wraps another (``raise X from error``, pytest's
    ``CollectError`` around an import failure), the innermost cause. ``file_of`` maps each
    frame's filename (e.g. a private copy's path to the mutated file's name)."""
    seen: set[int] = set()
    while error.__cause__ is not None and id(error) not in seen:
        seen.add(id(error))
        error = error.__cause__
    frames = tuple((file_of(path), line) for path, line in _frames(error.__traceback__))
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        frames = (*frames, (file_of(error.filename), int(error.lineno)))
    types = tuple(cls.__name__ for cls in type(error).__mro__ if cls not in (object,))
    return Raised(types, str(error), frames)


def _frames(tb: TracebackType | None) -> Iterable[tuple[str, int]]:
    while tb is not None:
        yield tb.tb_frame.f_code.co_filename, tb.tb_lineno
        tb = tb.tb_next


def is_python_level(raised: Raised) -> bool:
    if PYTHON_LEVEL.intersection(raised.types):
        return True
    return "TypeError" in raised.types and bool(_CALL_SHAPE.search(raised.message))


def raised_at(frames: Sequence[tuple[str, int]], changed: Mapping[str, Collection[int]]) -> bool:
    """Whether the deepest frame in a mutated file is at one of its changed lines (what
    that line called may have raised it, in a library: ``criterion(x, y, reduction=...)``
    fails inside torch's module call)."""
    for path, line in reversed(frames):
        if path in changed:
            return line in changed[path]
    return False


def is_stillborn(
    raised: Raised, changed: Mapping[str, Collection[int]], declares_crash: bool
) -> bool:
    """The rule (module docstring). ``changed``: each mutated file (named as in
    ``raised.frames``) -> its changed lines, numbered in the mutant."""
    return not declares_crash and is_python_level(raised) and raised_at(raised.frames, changed)


def declares_crash(operators: Iterable[object]) -> bool:
    """Whether any of a mutant's operators (instances or classes) says its bug is a crash."""
    return any(getattr(operator, "expected", None) == "crash" for operator in operators)


def crash_declared(operators: Iterable[object], raised: Raised) -> bool:
    """Whether ``raised`` is a crash one of the operators declares as its bug's own symptom
    (its witness's ``crashes``, ``mutator.witness``): matched on ``"Type: message"``. The
    witness rule (``experiments.witness``) counts any other crash before the witness fired
    as stillborn, wherever it was raised."""
    text = f"{raised.name}: {raised.message}"
    return any(
        witness.declares(text)
        for witness in (getattr(operator, "witness", None) for operator in operators)
        if hasattr(witness, "declares")
    )
