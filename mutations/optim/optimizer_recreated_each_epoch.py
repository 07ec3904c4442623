"""The ``optimizer_recreated_each_epoch`` operator (OptimizerRecreatedEachEpoch)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator, Replacement
from mutator.semantics import (
    constructor_kind,
    dotted_name,
    enclosing_function,
    find_arg,
    is_parameter,
    mentions,
    number_value,
    optimizer_class,
    single_assignment,
)
from mutator.semantics.loops import iterations
from mutator.semantics.scope import functions_by_name


def _is_stateful(call: cst.Call, optimizer: str) -> bool:
    """Plain SGD keeps no state: recreating it changes nothing."""
    if optimizer != "SGD":
        return True
    momentum = find_arg(call, "momentum", 2)
    return momentum is not None and number_value(momentum.value) != 0


def _schedulers(statements: list[cst.CSTNode], optimizer: str, ctx: Context) -> list[str]:
    """Names of LR schedulers built from ``optimizer`` by these statements."""
    names = []
    for statement in statements:
        assign = single_assignment(statement)
        if assign is None or not isinstance(assign.value, cst.Call):
            continue
        target = dotted_name(assign.targets[0].target)
        if (
            target is not None
            and constructor_kind(assign.value, ctx) == "scheduler"
            and mentions(assign.value, optimizer, ctx)
        ):
            names.append(target)
    return names


def _reattach(optimizer: str, previous: str, schedulers: list[str]) -> list[cst.CSTNode]:
    """Carry the old optimizer's LR settings over and point its schedulers at the new one,
    so the mutant loses only the optimizer state, not the LR schedule."""
    code = [
        f"for group, old in zip({optimizer}.param_groups, {previous}.param_groups):\n"
        "    group.update({key: value for key, value in old.items() if key != 'params'})\n",
        *(f"{scheduler}.optimizer = {optimizer}\n" for scheduler in schedulers),
    ]
    return [cst.parse_statement(text) for text in code]


def _is_epoch_loop(loop: cst.CSTNode, ctx: Context) -> bool:
    """``for epoch in range(...)`` or any loop holding another loop (the batch loop); not
    one that runs once (``EPOCH = 1``: the optimizer would be built once either way)."""
    if iterations(loop, ctx) == 1:
        return False
    if isinstance(loop, cst.For) and "epoch" in ctx.code(loop.target).lower():
        return True
    if not isinstance(loop, (cst.For, cst.While)):
        return False
    return bool(ctx.nodes_within(loop.body, cst.For) or ctx.nodes_within(loop.body, cst.While))


def _unguarded(statements) -> list[cst.CSTNode]:
    """The statements, with the body of ``if __name__ == "__main__":`` in place of the guard."""
    found: list[cst.CSTNode] = []
    for statement in statements:
        test = statement.test if isinstance(statement, cst.If) else None
        guard = isinstance(test, cst.Comparison) and dotted_name(test.left) == "__name__"
        if guard and isinstance(statement.body, cst.IndentedBlock):
            found.extend(statement.body.body)
        else:
            found.append(statement)
    return found


def _uses(loop: cst.CSTNode, name: str, built: cst.CSTNode, ctx: Context) -> bool:
    """Does the loop use the optimizer: by name, or, for one built at module level, through
    a module-level function of the script it calls (``train(epoch)`` stepping the global
    ``optimizer``, issue 29)? The recreated global is then the one the function reads."""
    if mentions(loop, name, ctx):
        return True
    if enclosing_function(built, ctx) is not None or enclosing_function(loop, ctx) is not None:
        return False
    for call in ctx.nodes_within(loop, cst.Call):
        if not isinstance(call.func, cst.Name):  # type: ignore[attr-defined]
            continue
        functions = functions_by_name(ctx).get(call.func.value, [])  # type: ignore[attr-defined]
        if len(functions) == 1 and enclosing_function(functions[0], ctx) is None:
            function = functions[0]
            if ctx.enclosing(function, cst.ClassDef) is None and mentions(function, name, ctx):
                return not is_parameter(function, name)
    return False


class OptimizerRecreatedEachEpoch(Operator):
    """Construct the optimizer at the top of every epoch (moved into the epoch loop, or
    copied there when code before the loop, such as a scheduler, needs it).

    Bug: ``optimizer = Adam(model.parameters(), ...)`` inside the epoch loop. Impact: the
    optimizer state is thrown away every epoch: Adam's moment estimates and bias
    correction restart (large, noisy first steps each epoch), SGD momentum restarts from
    zero. Loss curves show a bump at each epoch boundary. An LR scheduler built before
    the loop is kept attached (the new optimizer takes the old one's LR settings and the
    scheduler is pointed at it), so the mutant measures the lost state alone, not a
    schedule that silently stops (that is ``drop_scheduler_step``'s bug). Plain SGD
    without momentum has no state and is not a site. Fix: build the
    optimizer (and scheduler) once, before the loop; reload its ``state_dict`` when
    resuming. Check: assert ``id(optimizer)`` is constant across epochs; plot per-step loss
    (spikes at epoch starts) and the LR actually used.
    """

    name = "optimizer_recreated_each_epoch"
    category = "optim"
    summary = (
        "Build the optimizer inside the epoch loop: its state (moments, momentum) resets; "
        "a scheduler stays attached."
    )
    expected = "degrades"
    witness = "more optimizers", "more optimizers step (a new one each epoch)"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                import torch
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)

                for epoch in range(10):
                    # one pass
                    train_one_epoch(model, loader, opt)
            """,
            after="""
                import torch

                for epoch in range(10):
                    # one pass
                    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
                    train_one_epoch(model, loader, opt)
            """,
        ),
        Example(
            before="""
                import torch
                def main(model, loader):
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 5)
                    for epoch in range(10):
                        for x, y in loader:
                            step(model, optimizer, x, y)
                        scheduler.step()
            """,
            after="""
                import torch
                def main(model, loader):
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 5)
                    for epoch in range(10):
                        previous_optimizer = optimizer
                        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                        for group, old in zip(optimizer.param_groups, previous_optimizer.param_groups):
                            group.update({key: value for key, value in old.items() if key != 'params'})
                        scheduler.optimizer = optimizer
                        for x, y in loader:
                            step(model, optimizer, x, y)
                        scheduler.step()
            """,
        ),
        # A global optimizer stepped by train(), the epoch loop under __main__ (issue 29).
        Example(
            before="""
                import torch
                optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                def train(epoch):
                    for x, y in loader:
                        step(model, optimizer, x, y)
                if __name__ == "__main__":
                    for epoch in range(1, 11):
                        train(epoch)
            """,
            after="""
                import torch
                def train(epoch):
                    for x, y in loader:
                        step(model, optimizer, x, y)
                if __name__ == "__main__":
                    for epoch in range(1, 11):
                        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
                        train(epoch)
            """,
        ),
    )
    non_examples = (
        # Plain SGD has no state to lose.
        """
            import torch
            opt = torch.optim.SGD(ps, lr=0.1)
            for epoch in range(3):
                fit(opt)
        """,
        # The loop never uses this optimizer (a trainer holds it).
        """
            import torch
            opt = torch.optim.Adam(ps)
            trainer = T(opt)
            for epoch in range(3):
                trainer.fit()
        """,
        # A batch loop is not an epoch loop.
        """
            import torch
            opt = torch.optim.Adam(ps)
            for x, y in loader:
                step(opt, x, y)
        """,
        # One epoch: built once either way (issue 22, a notebook's EPOCH = 1).
        """
            import torch
            EPOCH = 1
            opt = torch.optim.Adam(ps)
            for epoch in range(EPOCH):
                for x, y in loader:
                    step(opt, x, y)
        """,
    )

    def _plan(
        self, node: cst.CSTNode, ctx: Context
    ) -> tuple[str, cst.CSTNode, bool, list[str]] | None:
        """(optimizer name, epoch loop, whether code before the loop still needs the
        original, the schedulers built from it there)."""
        assign = single_assignment(node)
        if assign is None:
            return None
        name = dotted_name(assign.targets[0].target)
        optimizer = optimizer_class(assign.value, ctx)
        if name is None or optimizer is None:
            return None
        assert isinstance(assign.value, cst.Call)
        if not _is_stateful(assign.value, optimizer):
            return None
        between: list[cst.CSTNode] = []
        for statement in _unguarded(ctx.following_statements(node)):
            if isinstance(statement, (cst.For, cst.While)) and _uses(statement, name, node, ctx):
                if not _is_epoch_loop(statement, ctx) or not isinstance(
                    statement.body, cst.IndentedBlock
                ):
                    return None
                needed = any(  # a definition runs nothing before the loop
                    mentions(other, name, ctx)
                    for other in between
                    if not isinstance(other, (cst.FunctionDef, cst.ClassDef))
                )
                return name, statement, needed, _schedulers(between, name, ctx)
            between.append(statement)
        return None

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        plan = self._plan(node, ctx)
        if plan is None:
            return None
        name, loop, needed, schedulers = plan
        assert isinstance(loop, (cst.For, cst.While)) and isinstance(loop.body, cst.IndentedBlock)
        first = loop.body.body[0]
        inserted: list[cst.CSTNode] = [node]
        if schedulers:
            previous = "previous_" + name.rsplit(".", 1)[-1]
            inserted = [
                cst.parse_statement(f"{previous} = {name}\n"),
                node,
                *_reattach(name, previous, schedulers),
            ]
        inserted[0] = inserted[0].with_changes(leading_lines=first.leading_lines)
        edits: dict[cst.CSTNode, Replacement] = {
            first: cst.FlattenSentinel([*inserted, first.with_changes(leading_lines=())])
        }
        if not needed:
            edits[node] = cst.RemoveFromParent()
        return edits
