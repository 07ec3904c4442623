"""GAN rules: the generated batch fed to the discriminator step without ``detach()``."""

from __future__ import annotations

import libcst as cst

from experiments.bench.lint.facts import binds, retains_graph
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import bound_names, dotted_name, in_no_grad, is_model


class GanFakeNotDetached(LintRule):
    """In one loop body a generated batch ``fake = netG(noise)`` is fed bare to a network
    (``netD(fake)``) before a backward(), and fed bare to the same network again after it:
    the first backward (the discriminator's) runs through the generator and frees its
    graph, so the generator's step fails ("backward through the graph a second time") or
    carries the discriminator's gradients. The first call should take ``fake.detach()``.

    Silent when that backward keeps the graph (``retain_graph=True``), when ``fake`` is
    regenerated between the two calls, and when it was made under no_grad."""

    code = "TW119"
    category = "gradient"
    summary = "GAN fake batch not detached for the discriminator"
    operators = ("gan_fake_not_detached",)
    invalid = (
        in_training_script(
            """
            for real in loader:
                optD.zero_grad()
                fake = netG(torch.randn(64, 8))
                errD = criterion(netD(real), ones) + criterion(netD(fake), zeros)  # <-
                errD.backward()
                optD.step()
                optG.zero_grad()
                errG = criterion(netD(fake), ones)
                errG.backward()
                optG.step()
            """
        ),
    )
    valid = (
        in_training_script(
            """
            for real in loader:
                optD.zero_grad()
                fake = netG(torch.randn(64, 8))
                errD = criterion(netD(real), ones) + criterion(netD(fake.detach()), zeros)
                errD.backward()
                optD.step()
                optG.zero_grad()
                errG = criterion(netD(fake), ones)
                errG.backward()
                optG.step()
            """
        ),
        in_training_script(
            """
            for real in loader:
                optD.zero_grad()
                fake = netG(torch.randn(64, 8))
                errD = criterion(netD(real), ones) + criterion(netD(fake), zeros)
                errD.backward()
                optD.step()
                optG.zero_grad()
                fake = netG(torch.randn(64, 8))
                errG = criterion(netD(fake), ones)
                errG.backward()
                optG.step()
            """
        ),
        in_training_script(
            """
            for real in loader:
                optD.zero_grad()
                fake = netG(torch.randn(64, 8))
                errD = criterion(netD(real), ones) + criterion(netD(fake), zeros)
                errD.backward(retain_graph=True)
                optD.step()
                optG.zero_grad()
                errG = criterion(netD(fake), ones)
                errG.backward()
                optG.step()
            """
        ),
        in_training_script(
            """
            for x, y in loader:
                opt.zero_grad()
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                opt.step()
                correct += metric(out, y)
                total += criterion(out, y).item()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        for loop in [*script.ctx.nodes(cst.For), *script.ctx.nodes(cst.While)]:
            backwards = [c for c in script.calls_of("backward", loop) if script.scope(c) is loop]
            for assign in script.ctx.nodes_within(loop.body, cst.Assign):
                found = self._bare_reuse(script, loop, assign, backwards)
                if found is not None:
                    yield found, "generated batch fed to the discriminator step without .detach()"

    @staticmethod
    def _bare_reuse(
        script: Script, loop: Node, assign: cst.Assign, backwards: list[cst.Call]
    ) -> Node | None:
        """The first bare ``D(fake)`` before a backward when ``D(fake)`` follows it too."""
        names = [n for t in assign.targets for n in bound_names(t.target)]
        if len(names) != 1 or not isinstance(assign.value, cst.Call):
            return None
        if script.scope(assign) is not loop or in_no_grad(assign, script.ctx):
            return None
        fake = names[0]
        later = [b for b in backwards if script.before(assign, b)]
        if not later or retains_graph(later[0]):
            return None
        first = later[0]
        rebound = [
            a
            for a in script.ctx.nodes_within(loop.body, cst.Assign)
            if a is not assign and script.before(assign, a) and fake in binds(a)
        ]
        end = rebound[0] if rebound else None
        uses = [
            call
            for call in script.ctx.nodes_within(loop.body, cst.Call)
            if script.before(assign, call)
            and (end is None or script.before(call, end))
            and any(dotted_name(arg.value) == fake for arg in call.args)
            and is_model(call.func, script.ctx)  # a network's forward, not a loss or metric
        ]
        before = [c for c in uses if script.before(c, first)]
        after = {dotted_name(c.func) for c in uses if script.before(first, c)}
        for call in before:
            if dotted_name(call.func) in after:
                return call
        return None
