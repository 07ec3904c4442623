"""The ``loss_from_item`` operator (LossFromItem)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import backward_calls
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    identifiers_in,
    in_no_grad,
    is_model,
    looks_like_loss_call,
    module_alias,
    same_scope,
    starts_before,
)


class LossFromItem(Swap):
    """Rebuild the loss from its Python value: ``torch.tensor(loss.item(), requires_grad=True)``.

    Bug: someone converts the loss to a number (for logging, or to "fix" a dtype/device
    complaint) and wraps it back into a fresh tensor so that ``backward()`` still runs.
    Impact: the new tensor is a leaf with no history, so ``backward()`` succeeds but no
    gradient reaches the model; ``step()`` skips every parameter, the loss curve is flat
    at its initial value and nothing crashes. Fix: call ``backward()`` on the loss tensor
    the criterion returned; take ``.item()`` only for logging. Sites: a criterion's result,
    or a model forward that returns the loss (``loss = model(src, tgt)``). Check: a params-changed
    check after one step, or the gradient-norm log (model gradients are ``None``).
    """

    name = "loss_from_item"
    category = "gradient"
    summary = (
        "Rebuild the loss from loss.item(): backward() runs but no gradient reaches the model."
    )
    expected = "breaks_training"
    witness = "more empty_steps", "the optimizer steps without any gradient (no graph)"
    crashes = ("NoneType",)
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                import torch
                loss = criterion(logits, y)
                loss.backward()
            """,
            after="""
                import torch
                loss = torch.tensor(criterion(logits, y).item(), requires_grad=True)
                loss.backward()
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.cross_entropy(out, y) / accum_steps
                scaler.scale(loss).backward()
            """,
            after="""
                import torch.nn.functional as F
                loss = F.cross_entropy(out, y).detach().requires_grad_() / accum_steps
                scaler.scale(loss).backward()
            """,
        ),
        # The model's forward returns the loss (issue 22: x-transformers, a diffusion Trainer).
        Example(
            before="""
                import torch
                loss = model(src, tgt, mask=src_mask)
                loss.backward()
            """,
            after="""
                import torch
                loss = torch.tensor(model(src, tgt, mask=src_mask).item(), requires_grad=True)
                loss.backward()
            """,
        ),
        # A regulariser added in place afterwards: the rebuilt leaf is copied so that the
        # script's own ``+=`` runs (image captioning with attention).
        Example(
            before="""
                import torch
                loss = criterion(scores, targets)
                loss += alpha_c * ((1.0 - alphas.sum(dim=1)) ** 2).mean()
                loss.backward()
            """,
            after="""
                import torch
                loss = torch.tensor(criterion(scores, targets).item(), requires_grad=True).clone()
                loss += alpha_c * ((1.0 - alphas.sum(dim=1)) ** 2).mean()
                loss.backward()
            """,
        ),
    )
    non_examples = (
        # A model call whose result is no loss by its name.
        """
            features = model(x)
            features.sum().backward()
        """,
        # Validation loss: never back-propagated.
        """
            val_loss = criterion(model(x), y)
            total += val_loss.item()
        """,
        """
            with torch.no_grad():
                loss = criterion(out, y)
            loss.backward()
        """,
        """
            out = model(x)
            out.backward()
        """,
    )

    def _assignment(self, node: cst.Call, ctx: Context) -> cst.Assign | None:
        parent = ctx.parent(node)
        if (
            isinstance(parent, cst.BinaryOperation)
            and parent.left is node
            and isinstance(parent.operator, cst.Divide)
        ):
            parent = ctx.parent(parent)
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            return parent
        return None

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        if in_no_grad(node, ctx):
            return None
        assign = self._assignment(node, ctx)
        if assign is None:
            return None
        target = assign.targets[0].target
        assert isinstance(target, cst.Name)
        returned = is_model(node.func, ctx) and "loss" in target.value.lower()
        if not (looks_like_loss_call(node, ctx) or returned):
            return None  # a criterion, or a model whose forward returns the loss
        if not _reaches_backward(ctx, assign, target.value):
            return None
        torch_name = module_alias(ctx, "torch", at=node)
        code = ctx.code(node)
        # A leaf cannot take the script's own ``loss += ...``: a copy of it can.
        copy = ".clone()" if _augmented(ctx, assign, target.value) else ""
        if torch_name is None:
            # Without a torch import in scope, the same bug spelled with tensor methods.
            return cst.parse_expression(f"{code}.detach().requires_grad_(){copy}")
        return cst.parse_expression(f"{torch_name}.tensor({code}.item(), requires_grad=True){copy}")


def _augmented(ctx: Context, assign: cst.Assign, name: str) -> bool:
    """Is ``name`` updated in place (``loss += reg``) after ``assign``, in the same scope?"""
    return any(
        isinstance(aug.target, cst.Name)  # type: ignore[attr-defined]
        and aug.target.value == name  # type: ignore[attr-defined]
        and same_scope(aug, assign, ctx)
        and starts_before(assign, aug, ctx)
        for aug in ctx.nodes(cst.AugAssign)
    )


def _reaches_backward(ctx: Context, assign: cst.Assign, name: str) -> bool:
    """Does the value bound to ``name`` flow (through later assignments) into ``backward()``?"""
    flow = {name}
    for later in ctx.nodes(cst.Assign):
        if later is assign or not same_scope(later, assign, ctx):
            continue
        if starts_before(assign, later, ctx) and identifiers_in(later.value, ctx) & flow:
            for target in later.targets:
                if isinstance(target.target, cst.Name):
                    flow.add(target.target.value)
    return any(
        starts_before(assign, call, ctx) and identifiers_in(call, ctx) & flow
        for call in backward_calls(ctx, assign)
    )
