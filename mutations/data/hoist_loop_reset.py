"""The ``hoist_loop_reset`` operator (HoistLoopReset)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Edits, Example, Operator
from mutator.semantics import bound_names, insert_before, single_assignment

_CONSTANTS = ("True", "False", "None")


def _flag(statement: cst.CSTNode) -> str | None:
    """``done = False``: the name a statement resets to a literal, else None."""
    assign = single_assignment(statement)
    if assign is None or len(assign.targets) != 1:
        return None
    target, value = assign.targets[0].target, assign.value
    literal = isinstance(value, (cst.Integer, cst.Float)) or (
        isinstance(value, cst.Name) and value.value in _CONSTANTS
    )
    return target.value if isinstance(target, cst.Name) and literal else None


def _reads(expr: cst.CSTNode, name: str, ctx: Context) -> bool:
    return any(n.value == name for n in ctx.nodes_within(expr, cst.Name))  # type: ignore[attr-defined]


def _rebinds(root: cst.CSTNode, name: str, ctx: Context) -> bool:
    targets = [t.target for t in ctx.nodes_within(root, cst.AssignTarget)]  # type: ignore[attr-defined]
    return any(name in bound_names(target) for target in targets)


class HoistLoopReset(Operator):
    """Move the per-iteration reset of a loop flag (``done = False``) from the top of the
    loop body to before the loop.

    Bug: the flag that ends an inner loop (an episode's ``done``, a ``converged`` or
    ``stop`` switch) is initialised once for the whole run instead of at the start of every
    outer iteration. Real fix: seungeunrho/minimalRL@7095e0f (REINFORCE set ``done = False``
    once before its 10000 episodes). Impact: after the first inner loop ends the flag stays
    set, so every later outer iteration skips its inner loop: no new episode (no new data)
    is collected and training stops after the first one, or repeats updates on stale data,
    while the outer loop keeps counting and printing. Only flags that an inner ``while``
    tests and its body sets are sites. Fix: reset the flag at the top of each outer
    iteration. Check: count inner iterations per outer iteration (episode lengths), or
    assert the flag is unset when the inner loop starts.
    """

    name = "hoist_loop_reset"
    category = "data"
    summary = "A loop flag (done = False) reset once before the loop, not every iteration."
    expected = "breaks_training"
    witness = "fewer forwards|steps", "the inner loop runs in the first outer iteration only"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                for n_epi in range(10000):
                    s = env.reset()
                    done = False
                    while not done:
                        a = policy(s)
                        s, r, done, info = env.step(a)
                    policy.train_net()
            """,
            after="""
                done = False
                for n_epi in range(10000):
                    s = env.reset()
                    while not done:
                        a = policy(s)
                        s, r, done, info = env.step(a)
                    policy.train_net()
            """,
        ),
    )
    non_examples = (
        # Already set once before the loop (the bug itself).
        """
            done = False
            for n_epi in range(100):
                while not done:
                    s, r, done, info = env.step(a)
        """,
        # The inner loop does not test the flag: an accumulator, not a switch.
        """
            for epoch in range(3):
                total = 0.0
                for x, y in loader:
                    total += step(x, y)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | None:
        flag = _flag(node)
        body = ctx.parent(node)
        loop = ctx.parent(body) if isinstance(body, cst.IndentedBlock) else None
        if flag is None or not isinstance(loop, (cst.For, cst.While)):
            return None
        inner = [
            w
            for w in ctx.nodes_within(loop.body, cst.While)
            if _reads(w.test, flag, ctx) and _rebinds(w.body, flag, ctx)  # type: ignore[attr-defined]
        ]
        if not inner:
            return None
        moved = node.with_changes(leading_lines=())  # type: ignore[attr-defined]
        return insert_before(loop, moved, anchor_becomes=loop.deep_remove(node))  # type: ignore[arg-type]
