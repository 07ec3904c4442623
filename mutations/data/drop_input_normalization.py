"""The ``drop_input_normalization`` operator (DropInputNormalization)."""

from __future__ import annotations

import libcst as cst

from mutations.data._lambdas import scaling_lambda_list
from mutations.data._pipelines import named_transform_uses, pipeline_role, transform_list
from mutations.data._shared import (
    drop_normalizations,
    normalization_group,
    normalized_operand,
    not_input_statistics,
)
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    code_of,
    reaches_model,
    without_list_element,
)

# Removing what only evaluation inputs get is ``skip_val_normalization``'s train/test mismatch.
_EVAL_ONLY = (
    "only evaluation inputs are normalised here: leaving that out is skip_val_normalization"
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
    normalisation whose result no model reads (returns, advantages, targets) is no site,
    nor one that only the test or validation split gets (removing it is
    ``skip_val_normalization``'s train/test mismatch). Not told apart: a scaled copy of
    training images that only the plots run through the model (an autoencoder's
    ``view_data``: the pictures change, training does not; 1 of 7 corpus mutants, issue 22).
    A ``transforms.Lambda`` that rescales the tensor (``lambda t: t * 2 - 1``, the
    [-1, 1] inputs a diffusion model expects: lucidrains/denoising-diffusion-pytorch@16c9ae7)
    is a normalisation step too. Fix: standardize inputs with training-set statistics. Check: print input
    statistics of the first batch (mean far from 0, std far from 1); an init-loss
    check and the loss curve against the reference.
    """

    name = "drop_input_normalization"
    category = "data"
    summary = "Delete the input standardization/scaling: the model sees raw-scale inputs."
    expected = "degrades"
    witness = "differs train_inputs", "the training forwards see other (unnormalized) inputs"
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
        # One Normalize bound to a name, in every split's pipeline (issue 29).
        Example(
            before="""
                import torchvision.transforms as transforms
                normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
                train_tf = transforms.Compose([transforms.RandomCrop(32), transforms.ToTensor(), normalize])
                val_tf = transforms.Compose([transforms.ToTensor(), normalize])
            """,
            after="""
                import torchvision.transforms as transforms
                normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
                train_tf = transforms.Compose([transforms.RandomCrop(32), transforms.ToTensor()])
                val_tf = transforms.Compose([transforms.ToTensor()])
            """,
        ),
        Example(
            before="""
                from torchvision import transforms
                tf = transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda t: (t * 2) - 1)])
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
        # A schedule's progress and a loss z-score look like a standardisation (issue 29).
        """
            def get_lr(step):
                progress = (step - warmup_steps) / (max_steps - warmup_steps)
                return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))
        """,
        """
            spike = (loss.item() - loss_mean) / (loss_std + 1e-8) > 6
            model_out = model(x)
        """,
        # Only the test inputs (issue 22: CIFAR's transform_test, a notebook's test_x).
        """
            import torchvision.transforms as transforms
            transform_test = transforms.Compose([
                transforms.ToTensor(),
                transforms.Normalize((0.49, 0.48, 0.44), (0.20, 0.19, 0.20)),
            ])
        """,
        """
            import torch
            test_x = torch.unsqueeze(test_data.data, dim=1).type(torch.FloatTensor)[:2000] / 255.
        """,
        # ... also when the test pipeline's Normalize is bound to a name first.
        """
            import torchvision.transforms as transforms
            normalize = transforms.Normalize((0.5,), (0.5,))
            transform_test = transforms.Compose([transforms.ToTensor(), normalize])
        """,
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

    def _named(self, node: cst.Call, ctx: Context) -> Edits | None:
        """``normalize = transforms.Normalize(...)`` used in every split's ``Compose``: out
        of every list (issue 29), unless only evaluation pipelines use it."""
        uses = named_transform_uses(node, ctx)
        if uses is None or all(pipeline_role(holder, ctx) == "eval" for holder, _ in uses):
            return None
        return {holder: without_list_element(holder, element.value) for holder, element in uses}

    def _outermost(self, node: cst.CSTNode, ctx: Context) -> bool:
        return not any(
            normalized_operand(a, ctx) is not None
            for a in ctx.ancestors(node)
            if isinstance(a, cst.BinaryOperation)
        )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        if isinstance(node, cst.Call):
            holder = transform_list(node, ctx) or scaling_lambda_list(node, ctx)
            if holder is None:
                return self._named(node, ctx)
            if pipeline_role(holder, ctx) == "eval":
                return NonSite(_EVAL_ONLY)
            return {holder: without_list_element(holder, node)}
        group = normalization_group(node, ctx)
        # One site per set of statistics: dropping only some would be a train/val mismatch.
        if not group or group[0] is not node or not self._outermost(node, ctx):
            return None
        if all(pipeline_role(member, ctx) == "eval" for member in group):
            return NonSite(_EVAL_ONLY)
        reason = not_input_statistics(node, ctx)
        if reason is not None:
            return NonSite(reason)
        members = [m for m in group if self._outermost(m, ctx)]
        if all(reaches_model(member, ctx) is False for member in members):
            return NonSite(
                f"`{code_of(node)}` normalises a value no model reads (a return, a target): "
                "not the model's inputs"
            )
        return drop_normalizations(members, ctx)
