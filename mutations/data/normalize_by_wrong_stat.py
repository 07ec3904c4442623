"""The ``normalize_by_wrong_stat`` operator (NormalizeByWrongStat)."""

from __future__ import annotations

import libcst as cst

from mutations.data._pipelines import pipeline_role, transform_list
from mutations.data._shared import normalization_group
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator, Replacement
from mutator.semantics import code_of, find_arg, identifier_words, reaches_model

_CENTRE = frozenset({"mean", "mu", "avg", "center"})
_SPREAD = frozenset({"std", "sigma", "stdev", "scale", "var"})


def _divided_by_spread(node: cst.BinaryOperation) -> bool:
    """``(x - mean) / std`` or ``(x - mean) / (std + eps)``."""
    left, spread = node.left, node.right
    if not isinstance(left, cst.BinaryOperation) or not isinstance(left.operator, cst.Subtract):
        return False
    if isinstance(spread, cst.BinaryOperation) and isinstance(spread.operator, cst.Add):
        spread = spread.left
    return bool(
        identifier_words(code_of(left.right)) & _CENTRE
        and identifier_words(code_of(spread)) & _SPREAD
        and not isinstance(spread, cst.BinaryOperation)
    )


def _by_centre(node: cst.BinaryOperation) -> cst.BinaryOperation:
    """The same division with the centre in place of the spread (an epsilon stays)."""
    centre = node.left.right.with_changes(lpar=(), rpar=())  # type: ignore[attr-defined]
    spread = node.right
    if isinstance(spread, cst.BinaryOperation) and isinstance(spread.operator, cst.Add):
        return node.with_changes(right=spread.with_changes(left=centre))
    return node.with_changes(right=centre.with_changes(lpar=spread.lpar, rpar=spread.rpar))


class NormalizeByWrongStat(Operator):
    """Divide by the mean instead of the standard deviation: ``(x - mean) / std`` ->
    ``(x - mean) / mean``, ``Normalize(mean, std)`` -> ``Normalize(mean, mean)``.

    Bug: a copy-paste slip in the standardisation of the inputs puts the mean where the
    spread belongs. Real fix: XiaLiPKU/EMANet@f2afd7f (images divided by
    ``settings.MEAN``, issue 7). Impact: the inputs are centred but scaled by the wrong
    number: for ImageNet statistics (mean ~0.45, std ~0.225) they come out about half as
    large as intended, and per channel in different proportions; a pretrained backbone
    sees inputs off its training distribution and fine-tuning degrades, a model trained
    from scratch mostly adapts. A ``Normalize`` whose mean and std are the same numbers is
    no site (equivalent), nor a normalisation of the test split only or of values no model
    reads. Fix: divide by the standard deviation. Check: print the per-channel mean and std
    of a normalised batch (they should be about 0 and 1).
    """

    name = "normalize_by_wrong_stat"
    category = "data"
    summary = "Standardise by the mean instead of the std: (x - mean) / mean."
    expected = "degrades"
    witness = (
        "differs train_inputs|eval_inputs",
        "the forwards see inputs normalised by another statistic",
    )
    node_types = (cst.BinaryOperation, cst.Call)
    # Loading images with PIL reads as plotting code to ``site_context`` (EMANet's
    # ``fetch``); a standardisation of inputs is data preparation wherever it sits.
    contexts = frozenset({"train", "eval", "setup", "plot", "unknown"})
    examples = (
        Example(
            before="""
                def fetch(path):
                    image = load(path) / 255
                    image = (image - settings.MEAN) / settings.STD
                    return model(image)
            """,
            after="""
                def fetch(path):
                    image = load(path) / 255
                    image = (image - settings.MEAN) / settings.MEAN
                    return model(image)
            """,
        ),
        Example(
            before="""
                import torchvision.transforms as T
                train_tf = T.Compose([T.ToTensor(), T.Normalize((0.49, 0.48, 0.45), (0.25, 0.24, 0.26))])
            """,
            after="""
                import torchvision.transforms as T
                train_tf = T.Compose([T.ToTensor(), T.Normalize((0.49, 0.48, 0.45), (0.49, 0.48, 0.45))])
            """,
        ),
    )
    non_examples = (
        # Mean and std are the same numbers: dividing by either is the same (equivalent).
        """
            import torchvision.transforms as T
            tf = T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.5,))])
        """,
        "y_train = (y_train - y_mean) / y_std\n",  # regression targets, not inputs
        "x = (x - x.min()) / (x.max() - x.min())\n",  # min-max scaling: no mean to misuse
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        if isinstance(node, cst.Call):
            replaced = self._transform(node, ctx)
            return replaced if not isinstance(replaced, cst.CSTNode) else {node: replaced}
        # One site per set of statistics, every use rewritten: the slip is in the numbers.
        group = [m for m in normalization_group(node, ctx) if _divided_by_spread(m)]
        if not group or group[0] is not node or pipeline_role(node, ctx) == "eval":
            return None
        if all(reaches_model(member, ctx) is False for member in group):
            return NonSite(f"`{code_of(node)}` normalises a value no model reads")
        return {member: _by_centre(member) for member in group}

    def _transform(self, node: cst.Call, ctx: Context) -> Replacement | NonSite | None:
        holder = transform_list(node, ctx)
        if holder is None or pipeline_role(holder, ctx) == "eval":
            return None
        mean = find_arg(node, "mean", 0)
        std = find_arg(node, "std", 1)
        if mean is None or std is None:
            return None
        if code_of(mean.value) == code_of(std.value):
            return NonSite("equivalent: the mean and std are the same numbers")
        replaced = std.with_changes(value=mean.value)
        return node.with_changes(args=[replaced if arg is std else arg for arg in node.args])
