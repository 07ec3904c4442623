"""Recurrent state carried from one training batch into the next with its graph."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import binds, retains_graph
from experiments.bench.lint.gradient_graph import forward_call
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Script
from mutator.semantics import dotted_name, method_name, receiver

_CUTS = re.compile(r"detach|repackage")


class HiddenNotDetached(LintRule):
    """A training loop feeds a model the state it returned on the previous batch (``out,
    hidden = model(x, hidden)``) and never cuts its graph (``hidden = hidden.detach()``,
    ``repackage_hidden(hidden)``): the second ``backward()`` runs into the first batch's
    freed graph and raises, or (with retain_graph) backpropagates through every batch so far.

    Silent when the state is rebuilt in the loop before the call (a fresh state per batch),
    when the backward keeps the graph (TW114's question), and when a ``forward`` of the file
    detaches (the model cuts its own state)."""

    code = "TW121"
    category = "gradient"
    summary = "recurrent state carried without detach"
    operators = ("drop_hidden_detach",)
    invalid = (
        in_training_script(
            """
            hidden = model.init_hidden(32)
            for x, y in batches:
                opt.zero_grad()
                out, hidden = model(x, hidden)  # <-
                criterion(out, y).backward()
                opt.step()
            """
        ),
    )
    valid = (
        in_training_script(
            """
            hidden = model.init_hidden(32)
            for x, y in batches:
                hidden = tuple(h.detach() for h in hidden)
                opt.zero_grad()
                out, hidden = model(x, hidden)
                criterion(out, y).backward()
                opt.step()
            """
        ),
        in_training_script(
            """
            for x, y in batches:
                hidden = model.init_hidden(32)
                opt.zero_grad()
                out, hidden = model(x, hidden)
                criterion(out, y).backward()
                opt.step()
            """
        ),
        in_training_script(
            """
            hidden = None
            with torch.no_grad():
                for x in stream:
                    out, hidden = model(x, hidden)
            """
        ),
    )

    def check(self, script: Script) -> Report:
        if any(
            _CUTS.search(script.ctx.code(function))
            for function in script.functions.get("forward", [])
        ):
            return
        for loop in [*script.ctx.nodes(cst.For), *script.ctx.nodes(cst.While)]:
            backwards = [b for b in script.calls_of("backward", loop) if script.scope(b) is loop]
            if not backwards or any(retains_graph(b) for b in backwards):
                continue
            assigns = [
                a for a in script.ctx.nodes_within(loop, cst.Assign) if script.scope(a) is loop
            ]
            cut_in_place = {
                dotted_name(receiver(call))
                for call in script.ctx.nodes_within(loop, cst.Call)
                if method_name(call) == "detach_"
            }
            for assign in assigns:
                name = self._carried(script, assign, assigns)
                if name in cut_in_place:
                    continue  # hidden.detach_()
                if name is not None and script.before(assign, backwards[-1]):
                    yield assign, f"{name} keeps the previous batch's graph: detach it each batch"

    @staticmethod
    def _carried(script: Script, assign: cst.Assign, assigns: list[cst.Assign]) -> str | None:
        """The name ``assign`` feeds back into its own forward, when nothing in the loop
        rebinds or cuts it first."""
        value = assign.value
        if not (isinstance(value, cst.Call) and forward_call(script, value)):
            return None
        bound = binds(assign)
        for arg in value.args:
            name = arg.value.value if isinstance(arg.value, cst.Name) else None
            if name is None or name not in bound:
                continue
            others = [a for a in assigns if a is not assign and name in binds(a)]
            if any(script.before(a, assign) or _CUTS.search(script.ctx.code(a)) for a in others):
                continue  # a fresh state, or a detached one, before the forward
            return name
        return None
