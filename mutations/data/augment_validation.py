"""The ``augment_validation`` operator (AugmentValidation)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import callee_name, code_of, parse_expr, split_role_of, with_arg_value

# Transforms that draw at random: augmentation, meant for the training split only.
_RANDOM = frozenset({"ColorJitter", "RandAugment", "AutoAugment", "TrivialAugmentWide", "AugMix"})


def _pipeline(call: cst.CSTNode) -> cst.List | None:
    """The list of a ``Compose([...])`` call, else None."""
    if not isinstance(call, cst.Call) or callee_name(call) != "Compose" or not call.args:
        return None
    steps = call.args[0].value
    return steps if isinstance(steps, cst.List) else None


def _augments(steps: cst.List) -> bool:
    for element in steps.elements:
        value = element.value
        name = callee_name(value) if isinstance(value, cst.Call) else None
        if name is not None and (name.startswith("Random") or name in _RANDOM):
            return True
    return False


class AugmentValidation(Swap):
    """Give the validation ``Compose`` the training pipeline, random augmentation included.

    Bug: the validation (or test) transform is the training one: one ``transform`` passed
    to both datasets, or the augmented pipeline copied. Impact: training is unchanged, but
    validation images are randomly flipped/cropped/jittered: the metrics are lower and
    noisy from epoch to epoch (early stopping and checkpoint selection read noise), and
    they are not reproducible. Fix: a separate deterministic evaluation pipeline (resize,
    center crop, normalise). Check: evaluate the same checkpoint twice: the numbers must be
    identical; print the validation dataset's transform.
    """

    name = "augment_validation"
    category = "data"
    summary = "Validation transform replaced by the augmenting training pipeline."
    expected = "misleads"
    witness = "differs eval_inputs", "the evaluation forwards see other (augmented) inputs"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                train_tf = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
                val_tf = transforms.Compose([transforms.ToTensor()])
            """,
            after="""
                train_tf = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
                val_tf = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])
            """,
        ),
        Example(
            before="""
                train_ds = ImageFolder(train_dir, T.Compose([T.RandomHorizontalFlip(), normalize]))
                val_ds = ImageFolder(val_dir, T.Compose([T.CenterCrop(224), normalize]))
            """,
            after="""
                train_ds = ImageFolder(train_dir, T.Compose([T.RandomHorizontalFlip(), normalize]))
                val_ds = ImageFolder(val_dir, T.Compose([T.RandomHorizontalFlip(), normalize]))
            """,
        ),
    )
    non_examples = (
        # No augmentation in training: nothing random to leak into validation.
        """
            train_tf = transforms.Compose([transforms.ToTensor(), normalize])
            val_tf = transforms.Compose([transforms.ToTensor()])
        """,
        # The training pipeline itself.
        "train_tf = transforms.Compose([transforms.RandomCrop(32), transforms.ToTensor()])\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        steps = _pipeline(node)
        if steps is None or _augments(steps) or split_role_of(node, ctx) != "eval":
            return None
        training = [
            other
            for other in ctx.nodes(cst.Call)
            if (found := _pipeline(other)) is not None
            and _augments(found)
            and split_role_of(other, ctx) != "eval"
        ]
        if len(training) != 1:
            return NonSite(
                "no training pipeline that augments, or several: which one validation would "
                "copy is unclear"
            )
        assert isinstance(node, cst.Call)
        copied = parse_expr(code_of(_pipeline(training[0])))  # type: ignore[arg-type]
        return with_arg_value(node, node.args[0], copied)
