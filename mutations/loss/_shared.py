"""Analyses the loss operators share (private to this package)."""

from __future__ import annotations

from collections.abc import Collection

import libcst as cst

from mutator.semantics import closed_args


def keep_keywords(call: cst.Call, keep: Collection[str]) -> list[cst.Arg]:
    """The arguments of a swapped loss that the new loss accepts too."""
    return closed_args(
        [arg for arg in call.args if arg.keyword is not None and arg.keyword.value in keep]
    )
