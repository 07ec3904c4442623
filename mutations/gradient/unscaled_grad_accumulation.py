"""The ``unscaled_grad_accumulation`` operator (UnscaledGradAccumulation)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import is_backward
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import dotted_name, expression_call, method_name, reads_grad
from mutator.semantics.scope import always_number


def _accumulation_divisor(expr: cst.BaseExpression) -> bool:
    """``accum_steps``, ``self.grad_accum``, ``args.gradient_accumulation_steps``..."""
    name = dotted_name(expr)
    return name is not None and "accum" in name.rsplit(".", 1)[-1].lower()


class UnscaledGradAccumulation(Operator):
    """Drop the ``/ accum_steps`` that scales the loss under gradient accumulation.

    Bug: gradients of ``accum_steps`` micro-batches are summed, not averaged. Impact: the
    accumulated gradient is ``accum_steps`` times too large: with SGD the effective
    learning rate is multiplied by ``accum_steps`` (oscillation or divergence at a tuned
    rate); Adam is nearly scale invariant, so there the bug is mostly silent (gradient
    clipping and weight decay then behave differently). Fix: divide the loss by the
    number of accumulation steps before ``backward()``. A count that is 1 wherever the
    file sets it (a parameter defaulting to 1 that no caller here overrides) is no site:
    dividing by 1 changes nothing. Check: the gradient-norm log
    (``accum_steps`` times the reference), or compare train curves with accumulation 1.
    """

    name = "unscaled_grad_accumulation"
    category = "gradient"
    summary = "Remove loss / accum_steps: accumulated gradients are accum_steps times too large."
    expected = "degrades"
    witness = "differs losses", "the losses reaching backward are not divided"
    node_types = (cst.BinaryOperation, cst.AugAssign, cst.Call)
    examples = (
        Example(
            before="""
                loss = criterion(out, y)
                loss = loss / accum_steps
                loss.backward()
            """,
            after="""
                loss = criterion(out, y)
                loss.backward()
            """,
        ),
        Example(
            before="""
                loss = criterion(out, y) / self.accum_steps
                loss.backward()
            """,
            after="""
                loss = criterion(out, y)
                loss.backward()
            """,
        ),
        Example(
            before="scaler.scale(loss / iters_to_accumulate).backward()\n",
            after="scaler.scale(loss).backward()\n",
        ),
        Example(
            before="""
                class Trainer:
                    def __init__(self, model, grad_accum=1):
                        self.grad_accum = grad_accum

                    def step(self, x):
                        loss = self.loss_fn(self.model(x)) / self.grad_accum
                        loss.backward()

                Trainer(net, grad_accum=4).step(x)
            """,
            after="""
                class Trainer:
                    def __init__(self, model, grad_accum=1):
                        self.grad_accum = grad_accum

                    def step(self, x):
                        loss = self.loss_fn(self.model(x))
                        loss.backward()

                Trainer(net, grad_accum=4).step(x)
            """,
        ),
        Example(
            before="""
                loss /= args.grad_accum
                loss.backward()
            """,
            after="loss.backward()\n",
        ),
        # The accumulated gradients divided before the step (issue 29).
        Example(
            before="""
                loss.backward()
                if (step + 1) % accumulation_steps == 0:
                    for p in model.parameters():
                        p.grad /= accumulation_steps
                    optimizer.step()
            """,
            after="""
                loss.backward()
                if (step + 1) % accumulation_steps == 0:
                    optimizer.step()
            """,
        ),
        # ... in place, with ``div_`` (issue 29).
        Example(
            before="""
                loss.backward()
                if (step + 1) % grad_accum_steps == 0:
                    for p in model.parameters():
                        if p.grad is not None:
                            p.grad.div_(grad_accum_steps)
                    optimizer.step()
            """,
            after="""
                loss.backward()
                if (step + 1) % grad_accum_steps == 0:
                    optimizer.step()
            """,
        ),
    )
    non_examples = (
        "lr = base_lr / accum_steps\n",
        "loss = loss / batch_size\n",
        "loss = loss * accum_steps\n",
        # Equivalent: the count is 1 unless a caller elsewhere sets it (issue 22: a DDPM trainer).
        """
            class Trainer:
                def __init__(self, model, grad_accum=1):
                    self.grad_accum = grad_accum

                def step(self, x):
                    loss = self.loss_fn(self.model(x)) / self.grad_accum
                    loss.backward()
        """,
    )

    def _about_loss(self, expr: cst.CSTNode, ctx: Context) -> bool:
        """The loss, or the accumulated gradients themselves (``p.grad /= accum_steps``
        after the micro-batches, framework-style code: issue 29)."""
        code = ctx.code(expr).lower()
        return "loss" in code or "criterion" in code or reads_grad(expr)

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        edits = self._edits(node, ctx)
        if isinstance(node, cst.Call):
            divisor = node.args[0].value if node.args else node
        else:
            divisor = node.value if isinstance(node, cst.AugAssign) else node.right  # type: ignore[attr-defined]
        if edits is not None and always_number(divisor, ctx, 1):
            return NonSite("equivalent: the accumulation count is 1 on the default path")
        return edits

    def _edits(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if isinstance(node, cst.Call):  # ``p.grad.div_(accum_steps)`` on a line of its own
            divided = (
                method_name(node) == "div_"
                and len(node.args) == 1
                and _accumulation_divisor(node.args[0].value)
                and reads_grad(node.func.value)  # type: ignore[union-attr]
                and expression_call(ctx.statement_of(node)) is node  # type: ignore[arg-type]
            )
            return {_emptied(node, ctx): cst.RemoveFromParent()} if divided else None
        if isinstance(node, cst.AugAssign):
            if (
                isinstance(node.operator, cst.DivideAssign)
                and _accumulation_divisor(node.value)
                and self._about_loss(node.target, ctx)
            ):
                return {_emptied(node, ctx): cst.RemoveFromParent()}
            return None
        assert isinstance(node, cst.BinaryOperation)
        if not isinstance(node.operator, cst.Divide) or not _accumulation_divisor(node.right):
            return None
        statement = ctx.statement_of(node)
        feeds_backward = statement is not None and is_backward(statement)
        if not (self._about_loss(node.left, ctx) or feeds_backward):
            return None
        parent = ctx.parent(node)
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(node.left, cst.Name)
            and dotted_name(parent.targets[0].target) == node.left.value
        ):
            return {
                parent: cst.RemoveFromParent()
            }  # ``loss = loss / n`` would become ``loss = loss``
        return {node: node.left}


def _emptied(node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
    """What removing ``node`` leaves with nothing to do: the loop or ``if`` around it when
    it is all they hold (``for p in params: if p.grad is not None: p.grad /= n``)."""
    removed, statement = node, ctx.statement_of(node)
    while statement is not None:
        block = ctx.parent(statement)
        owner = ctx.parent(block) if isinstance(block, cst.IndentedBlock) else None
        if not (
            isinstance(block, cst.IndentedBlock)
            and len(block.body) == 1
            and isinstance(owner, (cst.For, cst.If))
            and owner.orelse is None
        ):
            break
        removed = statement = owner
    return removed
