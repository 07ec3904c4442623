"""The ``step_before_backward`` operator (StepBeforeBackward)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._shared import nearest_preceding_backward
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    is_manual_step_block,
    is_optimizer_step,
    move_before,
)


class StepBeforeBackward(Operator):
    """Move ``optimizer.step()`` above ``loss.backward()`` in the same block.

    Bug: the optimizer steps before the gradients of the current batch exist. Impact:
    with ``zero_grad()`` at the top of the step (``set_to_none=True``, the default) every
    ``step()`` sees ``None`` gradients and skips all parameters, so the weights never
    change; with ``set_to_none=False`` it applies zeros (weight decay only); when
    ``zero_grad()`` comes last, each update uses a stale or empty gradient. Fix: the order
    is ``zero_grad()``, forward, ``backward()``, ``step()``. Check: a params-changed check
    after one step, or the gradient norm logged at ``step()`` (zero/absent).
    """

    name = "step_before_backward"
    category = "gradient"
    summary = "Move optimizer.step() before loss.backward(): it never sees this batch's gradients."
    expected = "breaks_training"
    witness = "more empty_steps", "the optimizer steps before the gradients exist"
    # A hand-written update reads gradients that do not exist yet (None): its TypeError.
    crashes = ("NoneType",)
    node_types = (cst.SimpleStatementLine, cst.With, cst.For)
    examples = (
        # A hand-written update (no optimizer) that skips missing gradients is the step.
        Example(
            before="""
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    with torch.no_grad():
                        for p in model.parameters():
                            if p.grad is not None:
                                p.data.add_(p.grad, alpha=-lr)
                                p.grad.zero_()
            """,
            after="""
                for x, y in loader:
                    loss = criterion(model(x), y)
                    with torch.no_grad():
                        for p in model.parameters():
                            if p.grad is not None:
                                p.data.add_(p.grad, alpha=-lr)
                                p.grad.zero_()
                    loss.backward()
            """,
        ),
        Example(
            before="""
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            after="""
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    optimizer.step()
                    loss.backward()
            """,
        ),
        Example(
            before="""
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                self.optimizer.step()
            """,
            after="""
                self.optimizer.step()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """,
        ),
        # A GAN discriminator backwards two losses before one step: the step goes above
        # both, not between them (issue 29).
        Example(
            before="""
                optimizer_D.zero_grad()
                real_loss = adversarial_loss(D(real), valid)
                real_loss.backward()
                fake_loss = adversarial_loss(D(fake.detach()), fake_labels)
                fake_loss.backward()
                optimizer_D.step()
            """,
            after="""
                optimizer_D.zero_grad()
                real_loss = adversarial_loss(D(real), valid)
                optimizer_D.step()
                real_loss.backward()
                fake_loss = adversarial_loss(D(fake.detach()), fake_labels)
                fake_loss.backward()
            """,
        ),
    )
    non_examples = (
        # A hand-written update that reads ``.grad`` unguarded: above the first backward the
        # gradients are None and the step raises TypeError (issue 29: a crash, no bug).
        """
            for epoch in range(100):
                model.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                with torch.no_grad():
                    for param in model.parameters():
                        param -= 0.1 * param.grad
        """,
        """
            optimizer.step()
            loss.backward()
        """,
        """
            loss.backward()
            scheduler.step()
        """,
        """
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        manual = is_manual_step_block(node, ctx)
        if not (manual or is_optimizer_step(node, ctx)):
            return None
        backward = nearest_preceding_backward(ctx, node)
        if backward is None:
            return None
        if manual and not _skips_missing_grads(node, ctx):
            return NonSite(
                "the hand-written update reads .grad, None before the first backward(): "
                "moved above it, the first step raises TypeError (a crash, not a skipped step)"
            )
        return move_before(node, backward)


def _skips_missing_grads(block: cst.CSTNode, ctx: Context) -> bool:
    """Does the hand-written update test ``x.grad is None`` / ``is not None`` first?"""
    for comparison in ctx.nodes_within(block, cst.Comparison):
        left = comparison.left  # type: ignore[attr-defined]
        if not (isinstance(left, cst.Attribute) and left.attr.value == "grad"):
            continue
        for target in comparison.comparisons:  # type: ignore[attr-defined]
            none = isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
            if isinstance(target.operator, (cst.Is, cst.IsNot)) and none:
                return True
    return False
