"""The ``nll_without_log_softmax`` operator (NllWithoutLogSoftmax)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import (
    TRAINING_CONTEXTS,
    log_softmax_input,
    loss_call_kind,
    loss_calls,
    loss_input,
    nn_class,
    uses_loss,
    without_element,
)


class NllWithoutLogSoftmax(Operator):
    """Feed raw logits to ``NLLLoss`` / ``F.nll_loss`` by dropping the log-softmax before it.

    Bug: NLL expects log-probabilities; it just returns minus the target entry. Without
    ``log_softmax`` the loss is minus the raw target logit, unbounded below. Impact: the
    loss goes negative and keeps falling as the model inflates the target logits, the
    weights grow without limit and the loss can reach -inf/NaN; accuracy may rise at
    first, which hides the bug. Fix: apply ``F.log_softmax`` (or ``nn.LogSoftmax``) before
    NLL, or use ``CrossEntropyLoss`` on raw logits. Check: the init-loss check (the first
    loss is near 0 or negative, not ln C) and a loss curve that falls below zero.
    """

    name = "nll_without_log_softmax"
    contexts = TRAINING_CONTEXTS
    category = "loss"
    summary = "log_softmax removed before NLLLoss: raw logits, loss unbounded below."
    expected = "breaks_training"
    witness = "differential", "different numbers: nll_loss gets raw logits"
    node_types = (cst.Call,)
    examples = (
        # log_softmax in forward, nll_loss in the training step
        Example(
            before="""
                import torch.nn.functional as F
                from torch import nn
                class Net(nn.Module):
                    def forward(self, x):
                        output = F.log_softmax(self.fc(x), dim=1)
                        return output
                def train(model, x, y):
                    return F.nll_loss(model(x), y)
            """,
            after="""
                import torch.nn.functional as F
                from torch import nn
                class Net(nn.Module):
                    def forward(self, x):
                        output = self.fc(x)
                        return output
                def train(model, x, y):
                    return F.nll_loss(model(x), y)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                loss = F.nll_loss(F.log_softmax(logits, dim=1), y)
            """,
            after="""
                import torch.nn.functional as F
                loss = F.nll_loss(logits, y)
            """,
        ),
        Example(
            before="""
                import torch.nn.functional as F
                def train(model, x, y):
                    log_probs = F.log_softmax(model(x), dim=1)
                    loss = F.nll_loss(log_probs, y)
            """,
            after="""
                import torch.nn.functional as F
                def train(model, x, y):
                    log_probs = model(x)
                    loss = F.nll_loss(log_probs, y)
            """,
        ),
        Example(
            before="""
                import torch
                import torch.nn.functional as F
                class Net(torch.nn.Module):
                    def forward(self, x):
                        return F.log_softmax(self.fc(x), dim=1)
                def step(model, x, y):
                    return F.nll_loss(model(x), y)
            """,
            after="""
                import torch
                import torch.nn.functional as F
                class Net(torch.nn.Module):
                    def forward(self, x):
                        return self.fc(x)
                def step(model, x, y):
                    return F.nll_loss(model(x), y)
            """,
        ),
        Example(
            before="""
                from torch import nn
                model = nn.Sequential(
                    nn.Linear(4, 3),
                    nn.LogSoftmax(dim=1),
                )
                criterion = nn.NLLLoss()
                loss = criterion(model(x), y)
            """,
            after="""
                from torch import nn
                model = nn.Sequential(
                    nn.Linear(4, 3),
                )
                criterion = nn.NLLLoss()
                loss = criterion(model(x), y)
            """,
        ),
    )
    non_examples = (
        # forward's log_softmax output is what the loss elsewhere gets: that is no site only
        # when the loss is no NLL
        """
            import torch.nn.functional as F
            from torch import nn
            class Net(nn.Module):
                def forward(self, x):
                    output = F.log_softmax(self.fc(x), dim=1)
                    return output
            loss = F.kl_div(model(x), t)
        """,
        # log_softmax feeding something else than NLL
        """
            import torch.nn.functional as F
            import torch
            kl = F.kl_div(F.log_softmax(s, dim=1), t)
        """,
        """
            import torch.nn.functional as F
            loss = F.cross_entropy(logits, y)
        """,
        """
            from torch import nn
            model = nn.Sequential(nn.Linear(4, 3), nn.LogSoftmax(dim=1))
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        if not isinstance(node, cst.Call):
            return None
        parent = ctx.parent(node)
        if nn_class(node, ctx, ("LogSoftmax",)) and isinstance(parent, cst.Arg):
            sequential = ctx.parent(parent)
            if (
                isinstance(sequential, cst.Call)
                and nn_class(sequential, ctx, ("Sequential",))
                and uses_loss(ctx, ("NLLLoss",))
            ):
                return {sequential: without_element(sequential, parent)}
            return None
        found = log_softmax_input(node, ctx)
        if found is None or not self._feeds_nll(node, ctx):
            return None
        return {node: found[1]}

    def _feeds_nll(self, node: cst.Call, ctx: Context) -> bool:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Arg):
            consumer = ctx.parent(parent)
            return (
                isinstance(consumer, cst.Call)
                and loss_input(consumer) is parent
                and loss_call_kind(consumer, ctx) == "NLLLoss"
            )
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if not isinstance(target, cst.Name):
                return False
            function = ctx.enclosing_function(node)
            for call, kind in loss_calls(ctx):
                argument = loss_input(call)
                if (
                    kind == "NLLLoss"
                    and ctx.enclosing_function(call) is function
                    and argument is not None
                    and isinstance(argument.value, cst.Name)
                    and argument.value.value == target.value
                ):
                    return True
            # ``output = F.log_softmax(x, 1)`` then ``return output`` in forward
            return _returned_from_forward(target.value, function, ctx)
        # ``return F.log_softmax(...)`` (or ``return F.log_softmax(...), hidden``) in a
        # model's forward: the model's output goes to NLL in the training step.
        if isinstance(parent, cst.Element) and isinstance(ctx.parent(parent), cst.Tuple):
            first = ctx.parent(parent).elements[0] is parent  # type: ignore[union-attr]
            parent = ctx.parent(ctx.parent(parent)) if first else parent  # type: ignore[arg-type]
        function = ctx.enclosing_function(node)
        return (
            isinstance(parent, cst.Return)
            and function is not None
            and function.name.value == "forward"
            and uses_loss(ctx, ("NLLLoss",))
        )


def _returned_from_forward(name: str, function: cst.FunctionDef | None, ctx: Context) -> bool:
    """Is ``name`` what ``forward`` returns, in a script whose loss is NLL?"""
    if function is None or function.name.value != "forward" or not uses_loss(ctx, ("NLLLoss",)):
        return False
    return any(
        isinstance(r.value, cst.Name) and r.value.value == name  # type: ignore[attr-defined]
        for r in ctx.nodes_within(function, cst.Return)
    )
