"""The ``train_mode_outside_loop`` operator (TrainModeOutsideLoop)."""

from __future__ import annotations

import libcst as cst

from mutations.mode._evaluations import evals_run_in, restored_after
from mutations.mode._shared import mode_blind, model_mode_statement
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Operator
from mutator.semantics import code_of, drives_training, insert_before, loops_around, receiver


class TrainModeOutsideLoop(Operator):
    """Move ``model.train()`` from inside the training loop to before it, where the loop
    also runs an evaluation that calls ``model.eval()``.

    Bug: ``train()`` is called once before training starts, while a periodic evaluation
    inside the loop switches the model to ``eval()`` and nothing switches it back. Real
    fixes: ermongroup/ncsn@8ec8ec4 and @a183b25 (a score network trained in eval mode after
    its first test every 100 steps; both runners moved ``score.train()`` into the batch
    loop). Impact: after the first evaluation every training forward runs in eval mode:
    dropout is off and batch norm normalises with running statistics that no longer update,
    so training silently degrades from that step on; the first evaluation interval looks
    healthy. A loop whose every ``eval()`` is undone by a later ``train()`` is no site
    (equivalent), nor a model without layers that read the mode. Fix: call ``model.train()``
    at the top of every epoch (or step) that trains, or restore the mode at the end of the
    evaluation. Check: assert ``model.training`` in the training step, or a forward hook
    counting training forwards run in eval mode.
    """

    name = "train_mode_outside_loop"
    category = "mode"
    summary = "model.train() hoisted out of the loop whose evaluation calls eval()."
    expected = "degrades"
    witness = "more train_mode_off", "a training forward runs dropout/batch norm in eval mode"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                for epoch in range(3):
                    model.train()
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        loss.backward()
                        optimizer.step()
                    model.eval()
                    test(model)
            """,
            after="""
                model.train()
                for epoch in range(3):
                    for x, y in loader:
                        loss = criterion(model(x), y)
                        loss.backward()
                        optimizer.step()
                    model.eval()
                    test(model)
            """,
        ),
        Example(  # the evaluation in a helper the inner loop calls every n steps
            before="""
                def validate(net):
                    net.eval()

                step = 0
                for epoch in range(3):
                    for x in loader:
                        step += 1
                        net.train()
                        net(x).sum().backward()
                        opt.step()
                        if step % 100 == 0:
                            validate(net)
            """,
            after="""
                def validate(net):
                    net.eval()

                step = 0
                net.train()
                for epoch in range(3):
                    for x in loader:
                        step += 1
                        net(x).sum().backward()
                        opt.step()
                        if step % 100 == 0:
                            validate(net)
            """,
        ),
    )
    non_examples = (
        # Already outside the loop (the bug itself).
        """
            model.train()
            for epoch in range(3):
                fit(model)
                model.eval()
        """,
        # The only eval() runs after the loop: train() once is the same.
        """
            for epoch in range(3):
                model.train()
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
            model.eval()
        """,
        # The evaluation helper switches back to train() itself: equivalent.
        """
            def evaluate(model):
                model.eval()
                score = model(x_val)
                model.train()
                return score

            for epoch in range(3):
                model.train()
                model(x).sum().backward()
                optimizer.step()
                evaluate(model)
        """,
        # No layer of the model reads the mode: equivalent.
        """
            import torch.nn as nn
            model = nn.Linear(4, 2)
            for epoch in range(3):
                model.train()
                model(x).sum().backward()
                optimizer.step()
                model.eval()
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        call = model_mode_statement(node, ctx, "train")
        if call is None:
            return None
        function = ctx.enclosing_function(node)
        loops = [
            loop for loop in loops_around(node, ctx) if ctx.enclosing_function(loop) is function
        ]
        body = loops[0].body if loops else None
        if not isinstance(body, cst.IndentedBlock) or node not in body.body:
            return None  # not a statement of the loop itself (inside an if, a with)
        outer = loops[-1]
        if not drives_training(outer, ctx):
            return None
        model = code_of(receiver(call))  # type: ignore[arg-type]
        evals = evals_run_in(outer, model, ctx)
        if not evals:
            return None
        blind = mode_blind(call, ctx)
        if blind is not None:
            return blind
        if all(restored_after(evaluation, model, ctx) for evaluation in evals):
            return NonSite("equivalent: every eval() the loop runs is undone by a later train()")
        # The moved line sits inside its anchor: the loop is rebuilt without it.
        moved = node.with_changes(leading_lines=())  # type: ignore[attr-defined]
        return insert_before(outer, moved, anchor_becomes=outer.deep_remove(node))  # type: ignore[arg-type]
