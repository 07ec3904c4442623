"""The ``loss_weight_applied_twice`` operator (LossWeightAppliedTwice)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._loss_flow import feeds_loss
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    callee_name,
    code_of,
    identifier_words,
    parenthesized,
    single_assignment,
)


def _weights_at_callers(function: cst.FunctionDef, ctx: Context) -> set[str]:
    """The names that multiply every call of ``function`` in the loss (``lambda_gp *
    compute_gradient_penalty(...)``, directly or through the name it is bound to)."""
    weights: set[str] = set()
    for call in ctx.nodes(cst.Call):
        if callee_name(call) != function.name.value or ctx.within(function, call):  # type: ignore[arg-type]
            continue
        statement = ctx.statement_of(call)
        assign = single_assignment(statement) if statement is not None else None
        uses: list[cst.CSTNode] = [call]
        if assign is not None and assign.value is call and len(assign.targets) == 1:
            bound = assign.targets[0].target
            if isinstance(bound, cst.Name):
                scope = ctx.enclosing_function(call)
                uses = [
                    n
                    for n in ctx.nodes(cst.Name)
                    if n.value == bound.value  # type: ignore[attr-defined]
                    and ctx.enclosing_function(n) is scope
                    and not ctx.within(statement, n)  # type: ignore[arg-type]
                ]
        for use in uses:
            product = ctx.parent(use)
            if not isinstance(product, cst.BinaryOperation) or not isinstance(
                product.operator, cst.Multiply
            ):
                continue
            other = product.right if product.left is use else product.left
            holder = ctx.statement_of(product)
            if isinstance(other, cst.Name) and holder is not None and feeds_loss(holder, ctx):
                weights.add(other.value)
    return weights


_WEIGHT_WORDS = frozenset({"lambda", "lam", "weight", "coef", "coeff", "w", "alpha", "beta"})


def _model_method(function: cst.FunctionDef, ctx: Context) -> bool:
    """A method of an ``nn.Module`` class: the model's computation, not a loss helper."""
    owner = ctx.enclosing(function, cst.ClassDef)
    return owner is not None and any("Module" in code_of(base.value) for base in owner.bases)  # type: ignore[attr-defined]


def _global(name: str, function: cst.FunctionDef, ctx: Context) -> bool:
    """Is ``name`` a module-level name ``function`` can read (not one of its own)?"""
    local = {p.name.value for p in function.params.params} | {
        t.target.value  # type: ignore[attr-defined]
        for t in ctx.nodes_within(function, cst.AssignTarget)
        if isinstance(t.target, cst.Name)  # type: ignore[attr-defined]
    }
    if name in local:
        return False
    return any(
        isinstance(t.target, cst.Name)
        and t.target.value == name
        and ctx.enclosing_function(t) is None  # type: ignore[attr-defined]
        for t in ctx.nodes(cst.AssignTarget)
    )


class LossWeightAppliedTwice(Swap):
    """Multiply a loss helper's result by the weight its caller already applies.

    Bug: a loss term's weight (``lambda_gp``, ``kl_weight``) is applied inside the helper
    that computes the term and again where the term is added to the loss. Real fix:
    eriklindernoren/PyTorch-GAN@bfae5fc (DualGAN's ``compute_gradient_penalty`` returned
    ``lambda_gp * ...`` and the critic loss added ``lambda_gp * gp`` again). Impact: the
    term weighs ``w`` squared instead of ``w``: a gradient penalty of weight 10 becomes 100
    and dominates the critic's loss (the critic is held flat, the generator learns
    little); a small weight such as 0.01 nearly removes its term instead. Only a helper
    whose every weighted call uses the same module-level weight is a site. Fix: weight the
    term in one place. Check: log each term of the loss separately with its weight;
    compare the helper's output against the formula.
    """

    name = "loss_weight_applied_twice"
    category = "loss"
    summary = "A loss helper multiplies its term by the weight its caller applies again."
    expected = "degrades"
    witness = "differential", "different numbers: a loss term is weighted twice"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                lambda_gp = 10

                def compute_gradient_penalty(D, real, fake):
                    gradients = grad_of(D, real, fake)
                    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
                    return gradient_penalty

                for real in loader:
                    gp = compute_gradient_penalty(D, real, G(z))
                    d_loss = -D(real).mean() + D(G(z)).mean() + lambda_gp * gp
                    d_loss.backward()
            """,
            after="""
                lambda_gp = 10

                def compute_gradient_penalty(D, real, fake):
                    gradients = grad_of(D, real, fake)
                    gradient_penalty = lambda_gp * ((gradients.norm(2, dim=1) - 1) ** 2).mean()
                    return gradient_penalty

                for real in loader:
                    gp = compute_gradient_penalty(D, real, G(z))
                    d_loss = -D(real).mean() + D(G(z)).mean() + lambda_gp * gp
                    d_loss.backward()
            """,
        ),
    )
    non_examples = (
        # A discount on the model's value, not a loss weight.
        """
            gamma = 0.98

            class Critic(nn.Module):
                def v(self, x):
                    v = self.fc_v(x)
                    return v

            td_target = r + gamma * model.v(s_prime)
            loss = F.smooth_l1_loss(model.v(s), td_target.detach())
            loss.backward()
        """,
        # The caller adds the term unweighted: no weight to apply twice.
        """
            def penalty(w):
                value = (w ** 2).sum()
                return value

            loss = criterion(out, y) + penalty(w)
            loss.backward()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        function = ctx.enclosing_function(node)
        if function is None or not isinstance(function.body, cst.IndentedBlock):
            return None
        body = list(function.body.body)
        last = body[-1]
        small = (
            last.body[0]
            if isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1
            else None
        )
        if not isinstance(small, cst.Return) or small.value is None:
            return None
        returned = small.value
        if isinstance(returned, cst.Name):
            assign = single_assignment(node)
            bound = (
                assign.targets[0].target
                if assign is not None and len(assign.targets) == 1
                else None
            )
            if node not in body or not isinstance(bound, cst.Name) or bound.value != returned.value:
                return None
            value = assign.value  # type: ignore[union-attr]
        elif node is last:
            value = returned
        else:
            return None
        weights = _weights_at_callers(function, ctx)
        if len(weights) != 1 or _model_method(function, ctx):
            return None
        weight = next(iter(weights))
        if not identifier_words(weight) & _WEIGHT_WORDS or not _global(weight, function, ctx):
            return None  # ``gamma * self.v(s)``: a discount, not a loss weight
        if isinstance(value, cst.BinaryOperation) and not value.lpar:
            value = parenthesized(value)
        weighted = cst.BinaryOperation(
            left=cst.Name(next(iter(weights))), operator=cst.Multiply(), right=value
        )
        if isinstance(returned, cst.Name):
            return node.with_changes(body=[assign.with_changes(value=weighted)])  # type: ignore[union-attr]
        return node.with_changes(body=[small.with_changes(value=weighted)])
