"""The ``no_grad_training_step`` operator (NoGradTrainingStep)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import (
    bound_names,
    disables_grad,
    dotted_name,
    expression_call,
    in_no_grad,
    method_name,
    module_alias,
    parse_expr,
    receiver,
    single_assignment,
    start_of,
)


def _assigned(statement: cst.CSTNode, ctx: Context) -> set[str]:
    """Names an assignment (or the assignments inside a ``with`` block) binds."""
    names: set[str] = set()
    for target in ctx.nodes_within(statement, cst.AssignTarget):
        names.update(bound_names(target.target))  # type: ignore[attr-defined]
    for assign in ctx.nodes_within(statement, cst.AugAssign):
        names.update(bound_names(assign.target))  # type: ignore[attr-defined]
    return names


# Wrappers whose ``backward(loss)`` takes the loss as its argument (accelerate, Lightning
# Fabric, DeepSpeed engines).
_BACKWARD_OWNERS = ("accelerator", "fabric", "engine")


def _backwarded(statement: cst.CSTNode) -> str | None:
    """``loss`` for ``loss.backward()``, ``scaler.scale(loss).backward()``,
    ``loss.mean().backward()``, ``(loss / k).backward()`` or ``accelerator.backward(loss)``."""
    call = expression_call(statement)
    if call is None or method_name(call) != "backward":
        return None
    tensor = receiver(call)
    owner = dotted_name(tensor) or ""
    if call.args and owner.rsplit(".", 1)[-1].lower().endswith(_BACKWARD_OWNERS):
        tensor = call.args[0].value
    while True:
        if (
            isinstance(tensor, cst.Call)
            and method_name(tensor) == "scale"
            and len(tensor.args) == 1
        ):
            tensor = tensor.args[0].value
        elif isinstance(tensor, cst.Call) and method_name(tensor) in ("mean", "sum"):
            tensor = receiver(tensor)
        elif isinstance(tensor, cst.BinaryOperation) and isinstance(
            tensor.operator, (cst.Divide, cst.Multiply)
        ):
            tensor = tensor.left
        else:
            break
    return dotted_name(tensor)  # ``self.loss`` too (``logits, self.loss = model(x, y)``)


def _lines(statement: cst.CSTNode, ctx: Context) -> list[cst.CSTNode]:
    """The simple statements of a statement, in order (one-line ``if x: y = z`` bodies too)."""
    if isinstance(statement, cst.SimpleStatementLine):
        return [statement]
    found = [
        *ctx.nodes_within(statement, cst.SimpleStatementLine),
        *ctx.nodes_within(statement, cst.SimpleStatementSuite),
    ]
    return sorted(found, key=lambda line: start_of(line, ctx))


class NoGradTrainingStep(Operator):
    """Wrap the statement that computes the training loss in ``with torch.no_grad():``.

    Bug: the training forward runs with gradients off: a ``with torch.no_grad():`` (or
    ``inference_mode``) copied from the evaluation code, or a context manager left around the
    step. Impact: the loss has no ``grad_fn`` and ``loss.backward()`` raises "element 0 of
    tensors does not require grad and does not have a grad_fn" on the first batch.
    (Written as ``loss.requires_grad_()`` to silence the error, the model would never
    learn.) Fix: compute the forward and the loss with gradients on; keep ``no_grad`` for
    evaluation. Check: ``assert loss.requires_grad`` before ``backward()``.
    """

    name = "no_grad_training_step"
    category = "mode"
    summary = "Compute the training loss under torch.no_grad(): backward() has no graph."
    expected = "crash"
    witness = "more backward_no_graph", "backward() runs on a loss computed without a graph"
    crashes = ("does not require grad",)
    node_types = (cst.SimpleStatementLine, cst.With)
    examples = (
        Example(
            before="""
                import torch
                output = model(x)
                loss = criterion(output, y)
                loss.backward()
            """,
            after="""
                import torch
                output = model(x)
                with torch.no_grad():
                    loss = criterion(output, y)
                loss.backward()
            """,
        ),
        Example(
            before="""
                import torch
                with autocast():
                    logits, loss = model(X, Y)
                    loss = loss / accumulation_steps
                X, Y = get_batch("train")
                scaler.scale(loss).backward()
            """,
            after="""
                import torch
                with torch.no_grad():
                    with autocast():
                        logits, loss = model(X, Y)
                        loss = loss / accumulation_steps
                X, Y = get_batch("train")
                scaler.scale(loss).backward()
            """,
        ),
        # The loss bound to an attribute of a trainer (issue 29).
        Example(
            before="""
                import torch
                logits, self.loss = model(x, y)
                self.loss.backward()
            """,
            after="""
                import torch
                with torch.no_grad():
                    logits, self.loss = model(x, y)
                self.loss.backward()
            """,
        ),
        # The loss is reassigned before backward: only the last assignment is the site.
        Example(
            before="""
                import torch
                loss = criterion(model(x), y)
                loss = loss / accum_steps
                loss.backward()
            """,
            after="""
                import torch
                loss = criterion(model(x), y)
                with torch.no_grad():
                    loss = loss / accum_steps
                loss.backward()
            """,
        ),
        # A forward that returns the loss, backwarded through accelerate (issue 22).
        Example(
            before="""
                import torch
                for _ in range(gradient_accumulate_every):
                    loss = model(next(train_loader))
                    accelerator.backward(loss / gradient_accumulate_every)
            """,
            after="""
                import torch
                for _ in range(gradient_accumulate_every):
                    with torch.no_grad():
                        loss = model(next(train_loader))
                    accelerator.backward(loss / gradient_accumulate_every)
            """,
        ),
        # An RL loss backwarded as its mean (minimalRL).
        Example(
            before="""
                import torch
                loss = -torch.log(pi_a) * delta.detach() + F.smooth_l1_loss(v, td_target)
                optimizer.zero_grad()
                loss.mean().backward()
            """,
            after="""
                import torch
                with torch.no_grad():
                    loss = -torch.log(pi_a) * delta.detach() + F.smooth_l1_loss(v, td_target)
                optimizer.zero_grad()
                loss.mean().backward()
            """,
        ),
        # One function for training and evaluation: the backward sits in a block below.
        Example(
            before="""
                import torch
                def run_epoch(model, loader, optimizer=None):
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        if optimizer is not None:
                            loss.backward()
            """,
            after="""
                import torch
                def run_epoch(model, loader, optimizer=None):
                    for x, y in loader:
                        with torch.no_grad():
                            loss = criterion(model(x), y)
                        if optimizer is not None:
                            loss.backward()
            """,
        ),
    )
    non_examples = (
        # An alias, and a loss completed in one-line ifs (AWD-LSTM): no statement here
        # computes the backwarded tensor alone.
        """
            import torch
            raw_loss = criterion(output, targets)
            loss = raw_loss
            if args.alpha: loss = loss + args.alpha * h.pow(2).mean()
            loss.backward()
        """,
        # An attribute read: the loss object (or a model output's loss) keeps its graph
        # (issue 29: a seq2seq trainer's ``loss = self.loss``).
        """
            import torch
            loss = self.loss
            loss.eval_batch(model(x), y)
            loss.backward()
        """,
        # accelerate's backward takes the loss: the accelerator is no loss (x-transformers).
        """
            import torch
            accelerator = Accelerator(cpu=cpu)
            accelerator.backward(loss)
        """,
        # Evaluation: no backward follows.
        """
            import torch
            loss = criterion(model(x), y)
            total += loss.item()
        """,
        # Already under no_grad (a gradient-free block): not this bug.
        """
            import torch
            with torch.no_grad():
                z = model(x)
            z.backward()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        names = _assigned(node, ctx)
        torch = module_alias(ctx, "torch", node)
        if not names or torch is None or in_no_grad(node, ctx):
            return None
        if isinstance(node, cst.With) and (
            any(disables_grad(item.item, ctx) for item in node.items)
            or ctx.nodes_within(node, cst.FunctionDef)
        ):
            return None  # already gradient-free, or a block defining functions
        assign = single_assignment(node)
        if assign is not None and isinstance(assign.value, cst.Name):
            return None  # ``loss = raw_loss``: an alias, the tensor keeps its graph
        for following in ctx.following_statements(node):
            # The backward may sit in a block below: ``if optimizer is not None: ...``.
            for line in _lines(following, ctx):
                if _backwarded(line) in names and assign is not None and dotted_name(assign.value):
                    return NonSite(  # ``loss = self.loss``, ``loss = outputs.loss`` (issue 29)
                        "an attribute read builds no graph: the value keeps the one it was "
                        "built with"
                    )
                if _backwarded(line) in names:
                    return {node: _wrapped(node, torch)}
                if names & _assigned(line, ctx):
                    return None  # reassigned first: a later statement is the site
        return None


def _wrapped(statement: cst.CSTNode, torch: str) -> cst.With:
    """``with torch.no_grad():`` holding ``statement`` (its leading lines stay outside)."""
    assert isinstance(statement, (cst.SimpleStatementLine, cst.With))
    return cst.With(
        items=[cst.WithItem(item=parse_expr(f"{torch}.no_grad()"))],
        body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=())]),
        leading_lines=statement.leading_lines,
    )
