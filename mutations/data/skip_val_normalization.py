"""The ``skip_val_normalization`` operator (SkipValNormalization)."""

from __future__ import annotations

import libcst as cst

from mutations.data._pipelines import (
    NORMALIZE_TRANSFORM,
    named_transform_in,
    pipeline_role,
    training_inputs_scaled,
    transform_list,
)
from mutations.data._shared import drop_normalizations, normalization_group, not_input_statistics
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import resolve, without_list_element


class SkipValNormalization(Operator):
    """Normalize the training inputs but not the validation/test inputs.

    Bug: the validation (or test) split skips the standardization the training split
    gets: a forgotten line or a separate evaluation path (train/serving skew). Impact:
    training looks perfectly healthy, yet the model is evaluated on inputs of another
    scale and distribution: validation loss is high and accuracy low or erratic while
    the training loss keeps falling. Fix: build one preprocessing function and apply
    it to every split with the training statistics. Check: compare train and
    validation curves (a large gap from the first epoch), and print input statistics
    of a training and a validation batch side by side.
    """

    name = "skip_val_normalization"
    category = "data"
    summary = "Leave validation inputs unnormalized while training inputs are normalized."
    expected = "degrades"
    witness = "differs eval_inputs", "the evaluation forwards see other (unnormalized) inputs"
    node_types = (cst.BinaryOperation, cst.Call)
    examples = (
        Example(
            before="""
                X_train = (X_train - mean) / std
                X_val = (X_val - mean) / std
                val_ds = TensorDataset(X_val, y_val)
            """,
            after="""
                X_train = (X_train - mean) / std
                val_ds = TensorDataset(X_val, y_val)
            """,
        ),
        Example(
            before="""
                def train_step(x):
                    return model((x - mu) / sigma)
                def evaluate(x):
                    return model((x - mu) / sigma)
            """,
            after="""
                def train_step(x):
                    return model((x - mu) / sigma)
                def evaluate(x):
                    return model(x)
            """,
        ),
        # The test pipeline's own Normalize (issue 22, kuangliu's CIFAR script).
        Example(
            before="""
                import torchvision.transforms as transforms
                transform_train = transforms.Compose([transforms.ToTensor(), transforms.Normalize(m, s)])
                transform_test = transforms.Compose([transforms.ToTensor(), transforms.Normalize(m, s)])
            """,
            after="""
                import torchvision.transforms as transforms
                transform_train = transforms.Compose([transforms.ToTensor(), transforms.Normalize(m, s)])
                transform_test = transforms.Compose([transforms.ToTensor()])
            """,
        ),
        # Test tensors scaled by hand while ToTensor scales the training images (a notebook).
        Example(
            before="""
                import torch, torchvision
                train_data = torchvision.datasets.MNIST(root, train=True, transform=torchvision.transforms.ToTensor())
                test_x = torch.unsqueeze(test_data.data, dim=1).type(torch.FloatTensor)[:2000] / 255.
            """,
            after="""
                import torch, torchvision
                train_data = torchvision.datasets.MNIST(root, train=True, transform=torchvision.transforms.ToTensor())
                test_x = torch.unsqueeze(test_data.data, dim=1).type(torch.FloatTensor)[:2000]
            """,
        ),
        # One Normalize bound to a name: out of the validation Compose only (issue 29).
        Example(
            before="""
                import torchvision.transforms as transforms
                normalize = transforms.Normalize(mean=[0.5], std=[0.5])
                train_tf = transforms.Compose([transforms.ToTensor(), normalize])
                val_tf = transforms.Compose([transforms.ToTensor(), normalize])
            """,
            after="""
                import torchvision.transforms as transforms
                normalize = transforms.Normalize(mean=[0.5], std=[0.5])
                train_tf = transforms.Compose([transforms.ToTensor(), normalize])
                val_tf = transforms.Compose([transforms.ToTensor()])
            """,
        ),
    )
    non_examples = (
        "X_train = (X_train - mean) / std\n",
        """
            import torchvision.transforms as transforms
            transform_test = transforms.Compose([transforms.ToTensor()])
        """,
        "X_val = (X_val - mean) / std\n",  # nothing normalized for training: not this bug
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        if isinstance(node, cst.Call) and (named := named_transform_in(node, ctx)) is not None:
            # ``Compose([..., normalize])`` of the evaluation split, where a training
            # pipeline uses the same ``normalize`` (issue 29).
            holder, element, uses = named
            if pipeline_role(holder, ctx) != "eval" or all(
                pipeline_role(other, ctx) == "eval" for other, _ in uses
            ):
                return None
            return {holder: without_list_element(holder, element.value)}
        if isinstance(node, cst.Call):
            holder = transform_list(node, ctx)
            if holder is None or pipeline_role(holder, ctx) != "eval":
                return None
            trained = any(
                resolve(c, ctx, strict=False).matches(NORMALIZE_TRANSFORM)
                and pipeline_role(c, ctx) != "eval"
                for c in ctx.nodes(cst.Call)
            )
            return {holder: without_list_element(holder, node)} if trained else None
        group = normalization_group(node, ctx)
        if not group or pipeline_role(node, ctx) != "eval" or not_input_statistics(node, ctx):
            return None
        if not (any(pipeline_role(m, ctx) != "eval" for m in group) or training_inputs_scaled(ctx)):
            return NonSite("nothing normalises the training inputs either: no mismatch to make")
        return drop_normalizations([node], ctx)
