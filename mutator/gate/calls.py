"""Gate check ``call_keyword``: no keyword added to the call of a module instance whose
``forward`` cannot take it.

``criterion = nn.MSELoss()`` then ``criterion(out, y, reduction="sum")`` raises TypeError at
the first step: a loss setting belongs where the module is built. A keyword the script's
own ``forward`` accepts (or a ``**kwargs``) passes; so does any call of something the
script does not build, since nothing says it cannot take the keyword.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from mutator.context import Context
from mutator.operator import Replacement
from mutator.semantics.edits import compact_code
from mutator.semantics.layers import forward_accepts
from mutator.semantics.syntax import dotted_name


def _keywords(call: cst.Call) -> set[str]:
    return {arg.keyword.value for arg in call.args if arg.keyword is not None}


def unknown_keyword(edits: Sequence[tuple[cst.CSTNode, Replacement]], ctx: Context) -> str | None:
    """Why the mutant would raise TypeError on a module call's keyword, or None."""
    for original, replacement in edits:
        if not isinstance(original, cst.Call) or not isinstance(replacement, cst.Call):
            continue
        if compact_code(replacement.func) != compact_code(original.func):
            continue  # another callee: what the original's could take says nothing
        for keyword in sorted(_keywords(replacement) - _keywords(original)):
            if forward_accepts(original.func, keyword, ctx, original) is False:
                callee = dotted_name(original.func) or "the module"
                return (
                    f"`{callee}` is a module whose forward takes no `{keyword}=`: the mutant "
                    "would raise TypeError (the setting belongs where the module is built)"
                )
    return None
