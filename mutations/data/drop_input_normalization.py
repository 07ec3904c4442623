"""The ``drop_input_normalization`` operator (DropInputNormalization)."""

from __future__ import annotations

import libcst as cst

from mutations.data._shared import drop_normalizations, normalization_group, normalized_operand
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    code_of,
    reaches_model,
    resolve,
    without_list_element,
)

_NORMALIZE_TRANSFORM = (
    "torchvision.transforms.Normalize",
    "torchvision.transforms.v2.Normalize",
    "torchvision.transforms.transforms.Normalize",
)


class DropInputNormalization(Operator):
    """Remove the normalization of the inputs, leaving them at raw scale.

    Bug: the standardization ``x = (x - mean) / std`` (every occurrence using the same
    statistics, train and validation alike), a pixel scaling ``x / 255`` or a
    ``transforms.Normalize`` is deleted. Impact: features on large or uneven scales
    make the loss surface ill-conditioned: a larger initial loss, slower and noisier
    convergence, sometimes divergence at a learning rate tuned for normalized inputs.
    How much depends on the raw scale: features spanning 0.001..1000 hurt badly, while
    BatchNorm after the first layer or pixels in 0..16 with Adam absorb it. A
    normalisation whose result no model reads (returns, advantages, targets) is no site.
    Fix: standardize inputs with training-set statistics. Check: print input
    statistics of the first batch (mean far from 0, std far from 1); an init-loss
    check and the loss curve against the reference.
    """

    name = "drop_input_normalization"
    category = "data"
    summary = "Delete the input standardization/scaling: the model sees raw-scale inputs."
    expected = "degrades"
    node_types = (cst.BinaryOperation, cst.Call)
    examples = (
        Example(
            before="""
                mean, std = X_train.mean(0), X_train.std(0) + 1e-8
                X_train = (X_train - mean) / std
                X_val = (X_val - mean) / std
                ds = TensorDataset(X_train, y_train)
            """,
            after="""
                mean, std = X_train.mean(0), X_train.std(0) + 1e-8
                ds = TensorDataset(X_train, y_train)
            """,
        ),
        Example(
            before="""
                import torch
                X = torch.tensor(data.data, dtype=torch.float32) / 16.0
            """,
            after="""
                import torch
                X = torch.tensor(data.data, dtype=torch.float32)
            """,
        ),
        Example(
            before="""
                def step(x):
                    return model((x.float() / 255 - mu) / sigma)
            """,
            after="""
                def step(x):
                    return model(x.float() / 255)
            """,
        ),
        Example(
            before="""
                from torchvision import transforms
                tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
            """,
            after="""
                from torchvision import transforms
                tf = transforms.Compose([transforms.ToTensor()])
            """,
        ),
    )
    non_examples = (
        "y_train = (y_train - y_mean) / y_std\n",  # regression targets, not inputs
        "change = (loss - prev_loss) / prev_loss\n",
        "lr = base_lr / 10\n",
        "progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))\n",
        "avg = total / 16\n",
        # REINFORCE: the returns weight the log-probabilities; no model reads them.
        """
            import torch

            def finish_episode(policy, optimizer, rewards, log_probs, gamma=0.99, eps=1e-8):
                returns, R = [], 0.0
                for r in reversed(rewards):
                    R = r + gamma * R
                    returns.insert(0, R)
                returns = torch.tensor(returns)
                returns = (returns - returns.mean()) / (returns.std() + eps)
                losses = []
                for log_prob, ret in zip(log_probs, returns):
                    losses.append(-log_prob * ret)
                optimizer.zero_grad()
                torch.stack(losses).sum().backward()
                optimizer.step()
        """,
    )

    def _outermost(self, node: cst.CSTNode, ctx: Context) -> bool:
        return not any(
            normalized_operand(a, ctx) is not None
            for a in ctx.ancestors(node)
            if isinstance(a, cst.BinaryOperation)
        )

    def _transform_list(self, node: cst.Call, ctx: Context) -> cst.List | None:
        element = ctx.parent(node)
        holder = ctx.parent(element) if element is not None else None
        if (
            resolve(node, ctx, strict=False).matches(_NORMALIZE_TRANSFORM)
            and isinstance(element, cst.Element)
            and isinstance(holder, cst.List)
        ):
            return holder
        return None

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        if isinstance(node, cst.Call):
            holder = self._transform_list(node, ctx)
            return None if holder is None else {holder: without_list_element(holder, node)}
        group = normalization_group(node, ctx)
        # One site per set of statistics: dropping only some would be a train/val mismatch.
        if not group or group[0] is not node or not self._outermost(node, ctx):
            return None
        members = [m for m in group if self._outermost(m, ctx)]
        if all(reaches_model(member, ctx) is False for member in members):
            return NonSite(
                f"`{code_of(node)}` normalises a value no model reads (a return, a target): "
                "not the model's inputs"
            )
        return drop_normalizations(members, ctx)
