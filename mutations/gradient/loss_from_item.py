"""The ``loss_from_item`` operator (LossFromItem)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import backward_calls
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Replacement, Swap
from mutator.semantics import (
    dotted_name,
    dotted_names_in,
    in_no_grad,
    is_model,
    looks_like_loss_call,
    module_alias,
    parse_statement,
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
    # A term of a summed loss (a value loss beside a policy loss) leaves the other terms'
    # gradients: then the parameters only it reaches get none (no_grad_params).
    witness = "more empty_steps|no_grad_params", "no gradient from the loss reaches the model"
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
        # The forward returns (logits, loss), bound to a trainer attribute (issue 29): the
        # loss is rebuilt on the next line.
        Example(
            before="""
                import torch
                logits, self.loss = model(x, y)
                self.loss.backward()
            """,
            after="""
                import torch
                logits, self.loss = model(x, y)
                self.loss = torch.tensor(self.loss.item(), requires_grad=True)
                self.loss.backward()
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
        # A loss *function* built by a helper is no loss: only its result per batch is
        # (issue 29: torchsample's ``get_partial_loss_fn``).
        Example(
            before="""
                import torch
                loss_fn = helper.get_partial_loss_fn(criterion)
                for x, y in loader:
                    loss = loss_fn(model(x), y)
                    loss.backward()
            """,
            after="""
                import torch
                loss_fn = helper.get_partial_loss_fn(criterion)
                for x, y in loader:
                    loss = torch.tensor(loss_fn(model(x), y).item(), requires_grad=True)
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

    def _assignment(self, node: cst.Call, ctx: Context) -> tuple[cst.Assign, str, bool] | None:
        """(assignment, the loss name it binds, whether the call's value is a tuple whose
        loss is one element: ``logits, self.loss = model(x, y)``)."""
        parent = ctx.parent(node)
        if (
            isinstance(parent, cst.BinaryOperation)
            and parent.left is node
            and isinstance(parent.operator, cst.Divide)
        ):
            parent = ctx.parent(parent)
        if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
            return None
        target = parent.targets[0].target
        if isinstance(target, (cst.Name, cst.Attribute)):
            name = dotted_name(target)
            return (parent, name, False) if name is not None else None
        if not isinstance(target, cst.Tuple) or parent.value is not node:
            return None
        losses = [
            name
            for element in target.elements
            if (name := dotted_name(element.value)) is not None
            and "loss" in name.rsplit(".", 1)[-1].lower()
        ]
        return (parent, losses[0], True) if len(losses) == 1 else None

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        found = self._assignment(node, ctx) if isinstance(node, cst.Call) else None
        if found is None or not found[2]:
            return super().plan(node, ctx)
        # The forward returns (logits, loss): the loss is rebuilt on the next line (issue 29).
        assign, name, _ = found
        if not self._is_site(node, assign, name, ctx):  # type: ignore[arg-type]
            return None
        statement = ctx.parent(assign)
        torch_name = module_alias(ctx, "torch", at=node)
        if torch_name is None or not isinstance(statement, cst.SimpleStatementLine):
            return None
        rebuilt = parse_statement(
            f"{name} = {torch_name}.tensor({name}.item(), requires_grad=True)"
        )
        return {statement: cst.FlattenSentinel([statement, rebuilt])}

    def _is_site(self, node: cst.Call, assign: cst.Assign, name: str, ctx: Context) -> bool:
        if in_no_grad(node, ctx):
            return False
        returned = is_model(node.func, ctx) and "loss" in name.rsplit(".", 1)[-1].lower()
        if not (looks_like_loss_call(node, ctx) or returned):
            return False  # a criterion, or a model whose forward returns the loss
        return _reaches_backward(ctx, assign, name)

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assert isinstance(node, cst.Call)
        found = self._assignment(node, ctx)
        if found is None or not self._is_site(node, found[0], found[1], ctx):
            return None
        if _called_later(ctx, found[0], found[1]):
            return NonSite(f"`{found[1]}` holds a loss function (it is called later), not a loss")
        assign, name, _ = found
        torch_name = module_alias(ctx, "torch", at=node)
        code = ctx.code(node)
        # A leaf cannot take the script's own ``loss += ...``: a copy of it can.
        copy = ".clone()" if _augmented(ctx, assign, name) else ""
        if torch_name is None:
            # Without a torch import in scope, the same bug spelled with tensor methods.
            return cst.parse_expression(f"{code}.detach().requires_grad_(){copy}")
        return cst.parse_expression(f"{torch_name}.tensor({code}.item(), requires_grad=True){copy}")


def _augmented(ctx: Context, assign: cst.Assign, name: str) -> bool:
    """Is ``name`` updated in place (``loss += reg``) after ``assign``, in the same scope?"""
    return any(
        dotted_name(aug.target) == name  # type: ignore[attr-defined]
        and same_scope(aug, assign, ctx)
        and starts_before(assign, aug, ctx)
        for aug in ctx.nodes(cst.AugAssign)
    )


def _called_later(ctx: Context, assign: cst.Assign, name: str) -> bool:
    """Is ``name`` called after ``assign`` in its scope (it holds a function)?"""
    return any(
        dotted_name(call.func) == name  # type: ignore[attr-defined]
        and same_scope(call, assign, ctx)
        and starts_before(assign, call, ctx)
        for call in ctx.nodes(cst.Call)
    )


def _reaches_backward(ctx: Context, assign: cst.Assign, name: str) -> bool:
    """Does the value bound to ``name`` flow (through later assignments) into ``backward()``?"""
    flow = {name}
    for later in ctx.nodes(cst.Assign):
        if later is assign or not same_scope(later, assign, ctx):
            continue
        if starts_before(assign, later, ctx) and dotted_names_in(later.value, ctx) & flow:
            for target in later.targets:
                if (bound := dotted_name(target.target)) is not None:
                    flow.add(bound)
    return any(
        starts_before(assign, call, ctx) and dotted_names_in(call, ctx) & flow
        for call in backward_calls(ctx, assign)
    )
