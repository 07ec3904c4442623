"""The ``gan_fake_not_detached`` operator (GanFakeNotDetached)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import assigned_values, is_model, method_name, receiver


def _model_output(name: str, ctx: Context) -> bool:
    """Is ``name`` assigned from a call of a model (``fake = netG(noise)``)?"""
    for value in assigned_values(ctx, name):
        if isinstance(value, cst.Call) and is_model(value.func, ctx):
            return True
    return False


class GanFakeNotDetached(Swap):
    """Drop ``.detach()`` from the generated batch fed to the discriminator's step.

    Bug: ``netD(fake.detach())`` becomes ``netD(fake)``, where ``fake`` is another model's
    output (a GAN's generator). Impact: the discriminator loss's ``backward()`` also runs
    through the generator: it computes (and accumulates) generator gradients the
    discriminator step never wanted and frees the generator's part of the graph, so the
    generator step that reuses ``fake`` fails with "Trying to backward through the graph a
    second time"; where the generator's loss recomputes its forward instead, the
    generator's gradients carry the discriminator's objective unless they are zeroed in
    between. Fix: feed ``fake.detach()`` to the discriminator step and keep ``fake`` for
    the generator step. Check: after ``errD.backward()`` the generator's parameters should
    have no gradient (``p.grad is None`` or zero).
    """

    name = "gan_fake_not_detached"
    category = "gradient"
    summary = "netD(fake.detach()) -> netD(fake): the discriminator step backpropagates into G."
    expected = "crash"
    witness = "more foreign_grads", "the discriminator's backward reaches the generator"
    crashes = ("backward through the graph a second time",)
    node_types = (cst.Call,)
    examples = (
        Example(
            before="""
                netG = Generator()
                netD = Discriminator()
                fake = netG(noise)
                output = netD(fake.detach()).view(-1)
            """,
            after="""
                netG = Generator()
                netD = Discriminator()
                fake = netG(noise)
                output = netD(fake).view(-1)
            """,
        ),
        Example(
            before="""
                generator = Generator()
                discriminator = Discriminator()
                gen_imgs = generator(z)
                fake_loss = adversarial_loss(discriminator(gen_imgs.detach()), fake)
            """,
            after="""
                generator = Generator()
                discriminator = Discriminator()
                gen_imgs = generator(z)
                fake_loss = adversarial_loss(discriminator(gen_imgs), fake)
            """,
        ),
    )
    non_examples = (
        # Truncated BPTT: the hidden state is not another model's output fed to a model.
        """
            model = RNN()
            hidden = hidden.detach()
            out, hidden = model(x, hidden)
        """,
        # Plotting: detach before moving to the CPU.
        """
            netG = Generator()
            fake = netG(noise)
            plt.imshow(fake.detach().cpu()[0])
        """,
        # A target network's output used as a label: no model takes it as input.
        """
            target_net = Net()
            q_next = target_net(next_state).detach()
        """,
    )

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        assert isinstance(node, cst.Call)
        if method_name(node) != "detach" or node.args:
            return None
        detached = receiver(node)
        if not isinstance(detached, cst.Name) or not _model_output(detached.value, ctx):
            return None
        argument = ctx.parent(node)
        consumer = ctx.parent(argument) if isinstance(argument, cst.Arg) else None
        # The detached tensor is the input of another model call (the discriminator).
        if not isinstance(consumer, cst.Call) or not is_model(consumer.func, ctx):
            return None
        if not any(a is argument for a in consumer.args):
            return None
        return detached
