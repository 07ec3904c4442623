"""The ``stale_fake_in_generator_loss`` operator (StaleFakeInGeneratorLoss)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._loss_flow import feeds_loss
from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    MODULE_PASSTHROUGH,
    TRAINING_CONTEXTS,
    code_of,
    is_model,
    single_assignment,
    starts_before,
    unwrap_calls,
)


def _generated_by(statement: cst.CSTNode, ctx: Context) -> tuple[str, str] | None:
    """``(name, generator)`` for ``name = G(z)`` or ``name = G(z).detach()``."""
    assign = single_assignment(statement)
    if assign is None or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    value = unwrap_calls(assign.value, MODULE_PASSTHROUGH | {"detach"})
    if not isinstance(target, cst.Name) or not isinstance(value, cst.Call):
        return None
    if not is_model(value.func, ctx):
        return None
    return target.value, code_of(value.func)


class StaleFakeInGeneratorLoss(Swap):
    """Score the generator with the batch the discriminator step generated, not the
    batch the generator step just made.

    Bug: a GAN loop generates twice per iteration (``fake_imgs = generator(z)`` for the
    critic, ``gen_imgs = generator(z)`` for the generator) and the generator's loss reads
    the first one. Real fixes: eriklindernoren/PyTorch-GAN@48e84ef and @954065f (WGAN and
    WGAN-GP: ``discriminator(fake_imgs)`` in the generator step, issue 6). Impact: the
    critic's ``backward()`` already went through that batch's generator graph and freed it,
    so the generator's ``backward()`` fails ("Trying to backward through the graph a second
    time"); when the stale batch was made with ``.detach()`` the generator gets no gradient
    and never learns; otherwise it learns from a batch made before the critic's update.
    Fix: pass the batch generated in the generator step. Check: after the generator's
    ``backward()`` its parameters must have fresh, non-zero gradients.
    """

    name = "stale_fake_in_generator_loss"
    category = "gradient"
    summary = "The generator's loss scores the critic step's fake batch, not the fresh one."
    expected = "crash"
    witness = (
        "more stale_forward|empty_steps",
        "the generator's loss backwards a fake made before the critic's step",
    )
    crashes = ("backward through the graph a second time",)
    node_types = (cst.Arg,)
    contexts = TRAINING_CONTEXTS
    examples = (
        Example(
            before="""
                for imgs in loader:
                    fake_imgs = generator(z)
                    d_loss = -discriminator(imgs).mean() + discriminator(fake_imgs).mean()
                    d_loss.backward()
                    optimizer_D.step()
                    gen_imgs = generator(z)
                    g_loss = -discriminator(gen_imgs).mean()
                    g_loss.backward()
                    optimizer_G.step()
            """,
            after="""
                for imgs in loader:
                    fake_imgs = generator(z)
                    d_loss = -discriminator(imgs).mean() + discriminator(fake_imgs).mean()
                    d_loss.backward()
                    optimizer_D.step()
                    gen_imgs = generator(z)
                    g_loss = -discriminator(fake_imgs).mean()
                    g_loss.backward()
                    optimizer_G.step()
            """,
        ),
    )
    non_examples = (
        # One batch per iteration (detached for the critic): nothing stale to read.
        """
            for imgs in loader:
                fake = netG(noise)
                errD = criterion(netD(fake.detach()), zeros)
                errD.backward()
                errG = criterion(netD(fake), ones)
                errG.backward()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Arg)
        call = ctx.parent(node)
        if not isinstance(node.value, cst.Name) or node.keyword is not None:
            return None
        if not isinstance(call, cst.Call) or not is_model(call.func, ctx):
            return None
        statement = ctx.statement_of(node)
        if statement is None or not feeds_loss(statement, ctx):
            return None
        scope = ctx.enclosing_function(node)
        made = [
            (line, found)
            for line in ctx.nodes(cst.SimpleStatementLine)
            if ctx.enclosing_function(line) is scope
            and starts_before(line, statement, ctx)
            and (found := _generated_by(line, ctx)) is not None
        ]
        fresh = [(line, found) for line, found in made if found[0] == node.value.value]
        if not fresh:
            return None
        latest, (name, generator) = fresh[-1]
        earlier = [
            found[0]
            for line, found in made
            if found[1] == generator and found[0] != name and starts_before(line, latest, ctx)
        ]
        if not earlier:
            return None
        return node.with_changes(value=cst.Name(earlier[-1]))
