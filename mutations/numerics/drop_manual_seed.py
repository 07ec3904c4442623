"""The ``drop_manual_seed`` operator (DropManualSeed)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import expression_call, resolve

SEEDING = frozenset({"torch.manual_seed", "torch.random.manual_seed"})
# Workers started fresh (``spawn``) import the script without running its ``__main__``.
SPAWNING = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})


class DropManualSeed(Swap):
    """Delete the global ``torch.manual_seed(...)`` call.

    Bug: the random seed is never set (the line lost in a refactor, or seeding left to
    "later"). Impact: initial weights, dropout masks and shuffling differ on every run, so
    two runs of the same configuration disagree, a change cannot be told apart from seed
    noise, and a failure cannot be replayed; a ``--seed`` argument is silently ignored.
    Nothing changes within one run. Under trainwreck's harness, which seeds every run
    itself before the script starts, the mutant is equivalent: it shows only when the
    script is run on its own. One seed among several is no site (the others keep the run
    seeded), nor a seed in a parent that ``mp.spawn``s the workers (they never run it).
    Fix: seed once at start-up (``torch.manual_seed``, and
    ``random``/``numpy`` where used; a seeded ``Generator`` for the loaders). Check: run
    twice with the same seed: the first logged losses must be identical.
    """

    name = "drop_manual_seed"
    category = "numerics"
    summary = "Remove torch.manual_seed(...): runs are not reproducible, --seed is ignored."
    expected = "silent"
    witness = "differential", "different numbers: other random draws (the harness seeds every run)"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="""
                import torch
                torch.manual_seed(args.seed)
                model = Net()
            """,
            after="""
                import torch
                model = Net()
            """,
        ),
        Example(
            before="""
                from torch import manual_seed
                manual_seed(1337)
            """,
            after="""
                from torch import manual_seed
            """,
        ),
        # A sampling Generator's own seed is not the global one (issue 29).
        Example(
            before="""
                import torch
                torch.manual_seed(0)
                g = torch.Generator()
                g.manual_seed(1234)
            """,
            after="""
                import torch
                g = torch.Generator()
                g.manual_seed(1234)
            """,
        ),
    )
    non_examples = (
        # A local generator for one loader: seeds that stream only.
        """
            import torch
            g = torch.Generator().manual_seed(0)
        """,
        # Kept for its return value: the generator is used.
        """
            import torch
            gen = torch.manual_seed(0)
        """,
        """
            import numpy as np
            np.random.seed(0)
        """,
        # Two seeds: removing either leaves the run seeded (issue 22, LLMs-from-scratch).
        """
            import torch
            torch.manual_seed(123)
            loader = make_loader()
            torch.manual_seed(123)
            model = Net()
        """,
        """
            import torch
            import torch.multiprocessing as mp
            if __name__ == "__main__":
                torch.manual_seed(123)
                mp.spawn(main, args=(world_size,), nprocs=world_size)
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        call = expression_call(node)
        if call is None or not _seeds(call, ctx):
            return None
        others = [c for c in ctx.nodes(cst.Call) if c is not call and _seeds(c, ctx)]  # type: ignore[arg-type]
        if others:
            line = ctx.position(others[0]).start.line
            return NonSite(f"equivalent: the seed at line {line} keeps the run seeded")
        if any(
            resolve(c.func, ctx, strict=False).matches(SPAWNING)  # type: ignore[attr-defined]
            for c in ctx.nodes(cst.Call)
        ):
            return NonSite("equivalent: the workers mp.spawn starts never run this line")
        return cst.RemoveFromParent()


def _seeds(call: cst.Call, ctx: Context) -> bool:
    """``torch.manual_seed(...)`` as the script imports it; a ``Generator``'s own
    ``g.manual_seed(...)`` seeds that generator only (issue 29), so the name must resolve."""
    resolved = resolve(call.func, ctx, strict=False)
    return bool(resolved.names) and resolved.matches(SEEDING)
