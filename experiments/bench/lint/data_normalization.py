"""The normalisation rule: statistics from the wrong split, unused, or a split left raw."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, dotted_name, split_role

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
        """
        y_train, y_val = y[train_idx], y[val_idx]
        y_mean, y_std = y.mean(), y.std()  # <-
        y_train = (y_train - y_mean) / y_std
        y_val = (y_val - y_mean) / y_std
        """,
        """
        mean, std = x_train.mean(0), x_train.std(0) + 1e-8
        x_train = (x_train - mean) / std  # <-
        x_val = (x_val - mean) / std
        x_test = x_test
        """,
    )
    valid = (
        """
        mean = x_train.mean(0)
        std = x_train.std(0)
        x_train = (x_train - mean) / std
        x_val = (x_val - mean) / std
        """,
        """
        x_train, x_val, x_test = x[tr], x[va], x[te]
        x_mean, x_std = x_train.mean(0), x_train.std(0) + 1e-8
        x_train = (x_train - x_mean) / x_std
        x_val = (x_val - x_mean) / x_std
        x_test = standardize(x_test, x_mean, x_std)
        """,
        """
        def normalize(x):
            return (x - mean) / std
        mean, std = x_train.mean(0), x_train.std(0) + 1e-8
        loader = DataLoader(TensorDataset(normalize(x_train), y_train))
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
                if not _read_after(script, name, where):
                    yield where, f"normalisation statistic {name} is computed but never applied"
        yield from _statistics_of_the_whole_set(script, normalized)
        for name, assign in normalized.items():
            if "train" not in name:
                continue
            stats = _statistics(script, assign)
            for other in ("val", "valid", "test"):
                sibling = name.replace("train", other)
                if sibling in script.assignments and not _normalized_by(
                    script, sibling, stats, normalized
                ):
                    yield assign, f"{name} is normalised but {sibling} is not"
                    break


def _read_after(script: Script, name: str, where: cst.CSTNode) -> bool:
    """Is the variable ``name`` read after ``where``, or in another function (a helper
    defined earlier that reads it when called)? ``y_val.mean()`` and ``mean=0.0`` are an
    attribute and a keyword, not the variable."""
    after = script.position(where)
    unit = script.unit(where)
    for node in script.ctx.nodes(cst.Name):
        if node.value != name:
            continue
        if script.position(node) <= after and script.unit(node) is unit:
            continue  # read before it is set, in the same function (a closure may read it later)
        parent = script.ctx.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            continue
        if script.ctx.statement_of(node) is script.ctx.statement_of(where):
            continue  # the assignment's own targets
        return True
    return False


def _statistics(script: Script, assign: cst.Assign) -> set[str]:
    """The names ``x_train = (x_train - mean) / std`` normalises with: ``{"mean", "std"}``."""
    match = _NORMALIZED.fullmatch(script.ctx.code(assign.value))
    return {match.group(2), match.group(3)} if match else set()


def _normalized_by(
    script: Script, sibling: str, stats: set[str], normalized: dict[str, cst.CSTNode]
) -> bool:
    """Is ``sibling`` normalised, here or through a helper handed the same statistics
    (``x_test = normalize(x_test, mean, std)``, ``model(to_input(x_test, mean, std))``)?"""
    if sibling in normalized:
        return True
    for call in script.calls:
        names = {dotted_name(arg.value) for arg in call.args}
        if sibling in names and names & stats:
            return True
    return False


def _statistics_of_the_whole_set(script: Script, normalized: dict[str, cst.CSTNode]) -> Report:
    """``y_mean = y.mean()`` normalising ``y_train`` where ``y_train = y[train_idx]``: the
    statistics of the whole set the training split was cut from (any statistic name)."""
    for name, assign in normalized.items():
        if split_role(name) != "train":
            continue
        parents = {
            dotted_name(value.value)
            for _, value in script.assignments.get(name, [])
            if isinstance(value, cst.Subscript)
        }
        for stat in _statistics(script, assign) - {"mean", "std"}:  # those two: see above
            for where, value in script.assignments.get(stat, []):
                if isinstance(value, cst.BinaryOperation):
                    value = value.left
                if (
                    isinstance(value, cst.Call)
                    and callee_name(value) in {"mean", "std"}
                    and isinstance(value.func, cst.Attribute)
                    and dotted_name(value.func.value) in parents
                ):
                    source = dotted_name(value.func.value)
                    yield where, f"{stat} is computed on all of {source}, not on {name}"
