"""The ``drop_optimizer_step`` operator (DropOptimizerStep)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import is_manual_step, is_optimizer_step


class DropOptimizerStep(Swap):
    """Delete ``optimizer.step()`` (or ``scaler.step(optimizer)``) from the training step.

    Bug: gradients are computed every step but never applied. Impact: the weights never
    change, the training loss stays at its initial value (only dropout noise moves it)
    and validation metrics stay at chance; nothing crashes. The scheduler still steps,
    which PyTorch warns about ("lr_scheduler.step() before optimizer.step()"). Fix: call
    ``optimizer.step()`` after ``backward()`` in every (accumulation) step. Check: a
    params-changed check after one step, or the update/weight ratio log (exactly zero).
    """

    name = "drop_optimizer_step"
    category = "gradient"
    summary = "Remove optimizer.step(): gradients are computed but never applied."
    expected = "breaks_training"
    witness = "fewer steps|manual_updates", "the optimizer never steps"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        # A hand-written update (no optimizer) is the step.
        Example(
            before="""
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    with torch.no_grad():
                        for p in model.parameters():
                            p.data.add_(p.grad, alpha=-lr)
                            p.grad.zero_()
            """,
            after="""
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    with torch.no_grad():
                        for p in model.parameters():
                            p.grad.zero_()
            """,
        ),
        Example(
            before="""
                loss.backward()
                optimizer.step()
                scheduler.step()
            """,
            after="""
                loss.backward()
                scheduler.step()
            """,
        ),
        Example(
            before="""
                class Trainer:
                    def train_step(self, loss):
                        loss.backward()
                        self.optimizer.step()
                        self.scheduler.step()
            """,
            after="""
                class Trainer:
                    def train_step(self, loss):
                        loss.backward()
                        self.scheduler.step()
            """,
        ),
        Example(
            before="""
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            """,
            after="""
                scaler.scale(loss).backward()
                scaler.update()
            """,
        ),
    )
    non_examples = (
        """
            scheduler.step()
            lr_sched.step()
        """,
        """
            warmup = torch.optim.lr_scheduler.LambdaLR(opt, f)
            warmup.step()
        """,
        """
            env.step(action)
            trainer.step()
        """,
        "scaler.step(model)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        step = is_optimizer_step(node, ctx) or is_manual_step(node, ctx)
        return cst.RemoveFromParent() if step else None
