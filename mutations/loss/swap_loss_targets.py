"""The ``swap_loss_targets`` operator (SwapLossTargets)."""

from __future__ import annotations

import re

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    TRAINING_CONTEXTS,
    code_of,
    identifier_words,
    looks_like_loss_call,
    loss_input,
    loss_target,
    single_assignment,
)


def _one_loss(statement: cst.CSTNode, ctx: Context) -> cst.Call | None:
    """The one loss call of an assignment with an input and a target, else None."""
    assign = single_assignment(statement)
    if assign is None:
        return None
    calls = [c for c in ctx.nodes_within(assign.value, cst.Call) if looks_like_loss_call(c, ctx)]  # type: ignore[arg-type]
    if len(calls) != 1:
        return None
    call = calls[0]
    positional = [arg for arg in call.args if arg.keyword is None]  # type: ignore[attr-defined]
    if len(positional) != 2 or len(call.args) != 2:  # type: ignore[attr-defined]
        return None
    return call  # type: ignore[return-value]


# Words that name a branch: ``loss_cycle_A``/``loss_cycle_B``, ``real_loss``/``fake_loss``.
_BRANCH_WORDS = frozenset({"a", "b", "real", "fake", "pos", "neg", "positive", "negative"})


def _parallel(first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """Do the two assigned names differ only by a branch (a digit, A/B, real/fake)?"""
    names = []
    for statement in (first, second):
        assign = single_assignment(statement)
        target = (
            assign.targets[0].target if assign is not None and len(assign.targets) == 1 else None
        )
        if not isinstance(target, cst.Name):
            return False
        names.append(target.value)
    if names[0] == names[1]:
        return False
    stems = [identifier_words(re.sub(r"\d+", "", name)) - _BRANCH_WORDS for name in names]
    return stems[0] == stems[1]


class SwapLossTargets(Operator):
    """Exchange the targets of two parallel loss terms written on consecutive lines.

    Bug: a model with two symmetric branches (two domains, two styles, real and fake)
    computes one loss term per branch with copy-pasted lines, and each term compares its
    prediction with the other branch's target. Real fix: eriklindernoren/PyTorch-GAN@46bbce4
    (MUNIT's style-reconstruction losses compared each recovered style code with the other
    domain's code, pull request 32). Impact: each branch is trained towards the other's
    target: reconstructions and codes cross over, a discriminator's real and fake labels
    trade places; losses still fall for a while, so the runs look plausible while the
    model learns the wrong mapping. Only two adjacent assignments that call the same loss
    with different targets and different inputs are sites. Fix: pair each prediction with
    its own target (name both alike). Check: unit-test each term on a batch where the right
    target gives zero loss.
    """

    name = "swap_loss_targets"
    category = "loss"
    summary = "Two parallel loss terms on consecutive lines exchange their targets."
    expected = "degrades"
    witness = "differs targets|second_inputs", "each loss term gets the other term's targets"
    node_types = (cst.SimpleStatementLine,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                loss_s_1 = lambda_style * criterion_recon(s_code_12, style_1)
                loss_s_2 = lambda_style * criterion_recon(s_code_21, style_2)
            """,
            after="""
                loss_s_1 = lambda_style * criterion_recon(s_code_12, style_2)
                loss_s_2 = lambda_style * criterion_recon(s_code_21, style_1)
            """,
        ),
    )
    non_examples = (
        # Different losses: not parallel terms.
        """
            loss_pixel = criterion_pixel(fake_B, real_B)
            loss_gan = criterion_gan(pred_fake, valid)
        """,
        # Not a pair of branches: a style term next to a content term.
        """
            loss_s_2 = lambda_style * criterion_recon(s_code_21, style_2)
            loss_c_1 = lambda_cont * criterion_recon(c_code_12, c_code_1.detach())
        """,
        # The same target twice: swapping changes nothing.
        """
            loss_a = criterion(out_a, y)
            loss_b = criterion(out_b, y)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        first = _one_loss(node, ctx)
        following = ctx.following_statements(node)
        second = _one_loss(following[0], ctx) if following else None
        if first is None or second is None or not _parallel(node, following[0]):
            return None
        if code_of(first.func) != code_of(second.func):
            return None
        in_1, in_2 = loss_input(first), loss_input(second)
        out_1, out_2 = loss_target(first), loss_target(second)
        if None in (in_1, in_2, out_1, out_2):
            return None
        if code_of(in_1.value) == code_of(in_2.value):  # type: ignore[union-attr]
            return None
        if code_of(out_1.value) == code_of(out_2.value):  # type: ignore[union-attr]
            return None
        return {
            out_1: out_1.with_changes(value=out_2.value),  # type: ignore[union-attr]
            out_2: out_2.with_changes(value=out_1.value),  # type: ignore[union-attr]
        }
