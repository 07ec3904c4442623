"""The ``drop_manual_seed`` operator (DropManualSeed)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import dotted_name, expression_call, imports, method_name, resolve
from mutator.semantics.modules import module_path

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
        # Lightning's seed_everything seeds the run (issue 29: lit-llama's fabric).
        Example(
            before="""
                import lightning as L
                fabric = L.Fabric()
                fabric.seed_everything(1337)
                train(fabric)
            """,
            after="""
                import lightning as L
                fabric = L.Fabric()
                train(fabric)
            """,
        ),
        # mp.spawn only in a branch (several GPUs): the default run stays in this process.
        Example(
            before="""
                import torch
                import torch.multiprocessing as mp
                def main(gpus):
                    torch.manual_seed(1)
                    if gpus > 1:
                        mp.spawn(train, nprocs=gpus)
                    else:
                        train(0)
            """,
            after="""
                import torch
                import torch.multiprocessing as mp
                def main(gpus):
                    if gpus > 1:
                        mp.spawn(train, nprocs=gpus)
                    else:
                        train(0)
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
            and _main_guard_only(c, ctx)
            for c in ctx.nodes(cst.Call)
        ):
            return NonSite("equivalent: the workers mp.spawn starts never run this line")
        return cst.RemoveFromParent()


def _main_guard_only(call: cst.CSTNode, ctx: Context) -> bool:
    """Is every ``if`` around the spawn the ``__main__`` guard (it runs on every launch)?
    A spawn in another branch (hifi-gan's ``if num_gpus > 1``) leaves the default run in
    this process, seeded by this line (issue 29)."""
    tests = [ctx.code(a.test) for a in ctx.ancestors(call) if isinstance(a, cst.If)]
    return all("__main__" in test for test in tests)


def _seeds(call: cst.Call, ctx: Context) -> bool:
    """``torch.manual_seed(...)`` as the script imports it (also ``torch`` reaching it
    through a star import of a project module that imports it), or Lightning's
    ``seed_everything``; a ``Generator``'s own ``g.manual_seed(...)`` seeds that generator
    only (issue 29), so the name must resolve."""
    if method_name(call) == "seed_everything" or dotted_name(call.func) == "seed_everything":
        return _lightning_seed(call, ctx)
    resolved = resolve(call.func, ctx, strict=False)
    if resolved.names:
        return resolved.matches(SEEDING)
    return dotted_name(call.func) == "torch.manual_seed" and _torch_by_star(ctx)


def _lightning_seed(call: cst.Call, ctx: Context) -> bool:
    """``L.seed_everything``/``fabric.seed_everything``: the script imports Lightning."""
    return any(
        b.qualified.split(".")[0] in ("lightning", "pytorch_lightning", "lightning_fabric")
        for b in imports(ctx).all_bindings
    )


def _torch_by_star(ctx: Context) -> bool:
    """Does ``torch`` come from ``from m import *`` of a project module that imports it
    (deeplab's ``from modeling.deeplab import *``)?"""
    if any(b.local == "torch" for b in imports(ctx).all_bindings):
        return False
    for statement in ctx.nodes(cst.ImportFrom):
        if not isinstance(statement.names, cst.ImportStar) or statement.module is None:  # type: ignore[attr-defined]
            continue
        parts = tuple((dotted_name(statement.module) or "").split("."))  # type: ignore[attr-defined]
        path = module_path(ctx, parts, len(statement.relative))  # type: ignore[attr-defined]
        other = ctx.project.context(path) if path is not None and ctx.project else None
        if other is not None and any(
            b.local == "torch" and b.qualified == "torch" for b in imports(other).all_bindings
        ):
            return True
    return False
