"""Hyperparameters written as module-level constants (``learning_rate = 6e-4``,
``batch_size = 12``, ``dropout = 0.0``): the nanoGPT/config-file style, where no
constructor call spells the value."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.semantics.cache import per_module
from mutator.semantics.data import identifier_words
from mutator.semantics.scope import names_read
from mutator.semantics.syntax import number_value

# Kind -> the word sets a constant's name may consist of.
_NAMES = {
    "batch_size": ({"batch", "size"}, {"bsz"}, {"bs"}),
    "lr": ({"lr"}, {"learning", "rate"}),
    "dropout": ({"dropout"}, {"drop", "rate"}, {"dropout", "rate"}),
    "weight_decay": ({"weight", "decay"}, {"wd"}),
}
KINDS = tuple(_NAMES)


def kind_of(name: str) -> str | None:
    words = identifier_words(name)
    for kind, spellings in _NAMES.items():
        if any(words == spelling for spelling in spellings):
            return kind
    return None


@per_module
def _constants(ctx: Context) -> dict[str, list[cst.Assign]]:
    found: dict[str, list[cst.Assign]] = {}
    read = names_read(ctx)
    for statement in ctx.module.body:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        assign = statement.body[0]
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            continue
        target = assign.targets[0].target
        if not isinstance(target, cst.Name) or number_value(assign.value) is None:
            continue
        kind = kind_of(target.value)
        if kind is not None and target.value in read:  # a constant nothing reads is no setting
            found.setdefault(kind, []).append(assign)
    return found


def hyperparameter_constants(ctx: Context, kind: str) -> list[cst.Assign]:
    """Module-level ``NAME = <number>`` assignments of hyperparameter ``kind`` (one of
    ``KINDS``) whose name the script reads."""
    return _constants(ctx).get(kind, [])
