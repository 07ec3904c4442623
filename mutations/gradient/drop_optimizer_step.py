"""The ``drop_optimizer_step`` operator (DropOptimizerStep)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import is_optimizer_step


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
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="loss.backward()\noptimizer.step()\nscheduler.step()\n",
            after="loss.backward()\nscheduler.step()\n",
        ),
        Example(
            before=(
                "class Trainer:\n    def train_step(self, loss):\n        loss.backward()\n"
                "        self.optimizer.step()\n        self.scheduler.step()\n"
            ),
            after=(
                "class Trainer:\n    def train_step(self, loss):\n        loss.backward()\n"
                "        self.scheduler.step()\n"
            ),
        ),
        Example(
            before="scaler.scale(loss).backward()\nscaler.step(opt)\nscaler.update()\n",
            after="scaler.scale(loss).backward()\nscaler.update()\n",
        ),
    )
    non_examples = (
        "scheduler.step()\nlr_sched.step()\n",
        "warmup = torch.optim.lr_scheduler.LambdaLR(opt, f)\nwarmup.step()\n",
        "env.step(action)\ntrainer.step()\n",
        "scaler.step(model)\n",
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if not (is_optimizer_step(node, ctx)):
            return None
        return cst.RemoveFromParent()
