"""The normalisation rule: statistics from the wrong split, unused, or a split left raw."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import source_after
from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, dotted_name

_NORMALIZED = re.compile(r"\(\s*(\w+)\s*-\s*(\w+)\s*\)\s*/\s*\(?\s*(\w+)[^)]*\)?")


class NormalizationMismatch(LintRule):
    """Normalisation statistics computed on something other than the training split, or
    never applied, or a training split normalised while its validation sibling is not."""

    code = "TW705"
    category = "data"
    summary = "normalisation mismatch"
    operators = ("normalize_with_full_stats", "skip_val_normalization", "drop_input_normalization")
    confidence = "medium"
    invalid = (
        """
        mean = x_all.mean(0)  # <-
        std = x_train.std(0)
        x_train = (x_train - mean) / std
        x_val = (x_val - mean) / std
        """,
        """
        mean = x_train.mean(0)
        std = x_train.std(0) + 1e-8
        x_train = (x_train - mean) / std  # <-
        x_val = x_val
        """,
        """
        mean = x_train.mean(0)  # <-
        print(x_train)
        """,
    )
    valid = (
        """
        mean = x_train.mean(0)
        std = x_train.std(0)
        x_train = (x_train - mean) / std
        x_val = (x_val - mean) / std
        """,
    )

    def check(self, script: Script) -> Report:
        normalized: dict[str, cst.CSTNode] = {}
        for assign in script.ctx.nodes(cst.Assign):
            name = dotted_name(assign.targets[0].target) or ""
            match = _NORMALIZED.fullmatch(script.ctx.code(assign.value))
            if match and match.group(1) == name:
                normalized[name] = assign
        for name in ("mean", "std"):
            for where, value in script.assignments.get(name, []):
                if isinstance(value, cst.BinaryOperation):
                    value = value.left
                if isinstance(value, cst.Call) and callee_name(value) == name:
                    source = (
                        dotted_name(value.func.value)
                        if isinstance(value.func, cst.Attribute)
                        else None
                    )
                    if (
                        source
                        and "train" not in source.lower()
                        and any("train" in n.lower() for n in normalized)
                    ):
                        yield (
                            where,
                            f"{name} is computed on {source}, not on the training split: validation leaks in",
                        )
                if not re.search(rf"\b{name}\b", source_after(script, where)):
                    yield where, f"normalisation statistic {name} is computed but never applied"
        for name, assign in normalized.items():
            if "train" not in name:
                continue
            sibling = next(
                (
                    name.replace("train", other)
                    for other in ("val", "valid", "test")
                    if name.replace("train", other) in script.assignments
                ),
                None,
            )
            if sibling is not None and sibling not in normalized:
                yield assign, f"{name} is normalised but {sibling} is not"
