"""The ``best_state_without_copy`` operator (BestStateWithoutCopy)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    callee_name,
    method_name,
    resolve,
)


class BestStateWithoutCopy(Swap):
    """Keep the "best" weights as ``model.state_dict()`` without copying them.

    Bug: ``best_state = copy.deepcopy(model.state_dict())`` becomes
    ``best_state = model.state_dict()``. A state dict holds references to the live
    parameter tensors, so the saved "best" keeps changing as training continues.
    Impact: restoring or saving ``best_state`` after training yields the final weights,
    not the best epoch's: early stopping and best-checkpoint selection silently do
    nothing; reported test metrics belong to the last epoch (worse when the run
    overfits). Fix: ``copy.deepcopy(model.state_dict())`` or
    ``{k: v.detach().clone() for k, v in model.state_dict().items()}``. Check: compare the
    restored model's validation metric with the best one logged during training; or
    assert that the saved tensors do not share storage with the model's parameters.
    """

    name = "best_state_without_copy"
    category = "checkpoint"
    summary = "best_state = model.state_dict() (no copy): the 'best' weights track training."
    expected = "silent"
    witness = "more self_loads", "load_state_dict restores the model's own live weights"
    node_types = (cst.Call, cst.DictComp)
    examples = (
        Example(
            before="""
                import copy
                best_state = copy.deepcopy(model.state_dict())
            """,
            after="""
                import copy
                best_state = model.state_dict()
            """,
        ),
        Example(
            before="""
                if val_acc > best_acc:
                    self.best = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            """,
            after="""
                if val_acc > best_acc:
                    self.best = self.model.state_dict()
            """,
        ),
        Example(
            before="""
                from copy import deepcopy
                best: dict = deepcopy(net.state_dict())
            """,
            after="""
                from copy import deepcopy
                best: dict = net.state_dict()
            """,
        ),
    )
    non_examples = (
        "best_state = model.state_dict()\n",
        "torch.save(copy.deepcopy(model.state_dict()), path)\n",
        "cpu_state = {k: v.cpu() for k, v in model.state_dict().items()}\n",
        "opts = copy.deepcopy(config)\n",
    )

    def _state_dict_call(self, node: cst.CSTNode, ctx: Context) -> cst.Call | None:
        if isinstance(node, cst.Call):
            names = resolve(node.func, ctx, strict=False).names
            is_deepcopy = "copy.deepcopy" in names or (
                not names and callee_name(node) == "deepcopy"
            )
            if is_deepcopy and len(node.args) == 1:
                inner = node.args[0].value
                if isinstance(inner, cst.Call) and method_name(inner) == "state_dict":
                    return inner
            return None
        assert isinstance(node, cst.DictComp)
        items = node.for_in.iter
        if not (isinstance(items, cst.Call) and method_name(items) == "items"):
            return None
        assert isinstance(items.func, cst.Attribute)
        state = items.func.value
        copies = any(
            method_name(call) == "clone" for call in ctx.nodes_within(node.value, cst.Call)
        )
        if copies and isinstance(state, cst.Call) and method_name(state) == "state_dict":
            return state
        return None

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        # Only a copy kept for later (``best = ...``), not one consumed on the spot.
        if not isinstance(ctx.parent(node), (cst.Assign, cst.AnnAssign)):
            return None
        state = self._state_dict_call(node, ctx)
        if state is None:
            return None
        return state
