"""The ``detach_hidden`` operator (DetachHidden)."""

from __future__ import annotations

import libcst as cst

from mutations.gradient._forward_flow import ForwardFlow, forward_of, splits, tensor_valued
from mutator.context import Context
from mutator.operator import Edits, Example, NonSite, Replacement, Swap
from mutator.semantics import identifiers_in, method_call, starts_before


class DetachHidden(Swap):
    """Add ``.detach()`` to an intermediate activation inside a module's ``forward``.

    Bug: ``x = self.fc1(x)`` becomes ``x = self.fc1(x).detach()`` (a leftover from
    logging, a stop-gradient in the wrong place, a truncated-BPTT idiom misapplied).
    Impact: the gradient stops at the detached tensor, so every layer before it keeps its
    initial weights while the layers after it still train: the loss falls, but only as far
    as a model on frozen random features allows (a worse plateau, lower val accuracy).
    Sites are assignments in ``forward`` that take a layer's output and feed another
    layer, so each cut is distinct and the output keeps requiring grad (no crash). Not told
    apart: a cut inside a residual branch (``x = attn(x) + x``), where the skip connection
    still carries the gradient to earlier layers and only the branch's own layers freeze (3
    of 52 corpus mutants, a diffusion U-Net's attention blocks, issue 22). Fix: remove the
    ``.detach()``.
    Check: a params-changed check per layer after one step (early layers do not move),
    or per-layer gradient norms (exactly zero before the cut).
    """

    name = "detach_hidden"
    category = "gradient"
    summary = "Detach an intermediate activation in forward(): earlier layers stop learning."
    expected = "degrades"
    witness = "more no_grad_params", "parameters of the model get no gradient at step 1"
    node_types = (cst.Assign,)
    examples = (
        Example(
            before="""
                class Net(nn.Module):
                    def forward(self, x):
                        x = self.fc1(x)
                        return self.fc2(x)
            """,
            after="""
                class Net(nn.Module):
                    def forward(self, x):
                        x = self.fc1(x).detach()
                        return self.fc2(x)
            """,
        ),
        Example(
            before="""
                class Block(torch.nn.Module):
                    def forward(self, x):
                        h = x + self.attn(x)
                        return self.proj(h)
            """,
            after="""
                class Block(torch.nn.Module):
                    def forward(self, x):
                        h = (x + self.attn(x)).detach()
                        return self.proj(h)
            """,
        ),
        Example(
            before="""
                class RNN(nn.Module):
                    def forward(self, x):
                        out, _ = self.lstm(self.embed(x))
                        last = out[:, -1]
                        return self.head(last)
            """,
            after="""
                class RNN(nn.Module):
                    def forward(self, x):
                        out, _ = self.lstm(self.embed(x))
                        last = out[:, -1].detach()
                        return self.head(last)
            """,
        ),
        # A recurrent layer's outputs unpacked and read by the head directly: the part a
        # layer reads is cut after the unpacking (issue 29); a helper's zero state is no
        # site (issue 22: detaching it changes nothing).
        Example(
            before="""
                import torch
                from torch import nn
                class RNNClassifier(nn.Module):
                    def __init__(self):
                        self.gru = nn.GRU(8, 8)
                        self.fc = nn.Linear(8, 2)
                    def forward(self, x):
                        hidden = self._init_hidden(x.size(1))
                        out, hidden = self.gru(x, hidden)
                        return self.fc(hidden[-1])
                    def _init_hidden(self, n):
                        return torch.zeros(1, n, 8)
            """,
            after="""
                import torch
                from torch import nn
                class RNNClassifier(nn.Module):
                    def __init__(self):
                        self.gru = nn.GRU(8, 8)
                        self.fc = nn.Linear(8, 2)
                    def forward(self, x):
                        hidden = self._init_hidden(x.size(1))
                        out, hidden = self.gru(x, hidden)
                        hidden = hidden.detach()
                        return self.fc(hidden[-1])
                    def _init_hidden(self, n):
                        return torch.zeros(1, n, 8)
            """,
        ),
    )
    non_examples = (
        """
            from torch import nn
            def identity(t):
                return t
            class Diffusion(nn.Module):
                def __init__(self, model):
                    self.model = model
                    self.normalize = identity
                def forward(self, img):
                    img = self.normalize(img)
                    return self.model(img)
        """,
        # The last layer's output: detaching it would leave nothing to train (a crash).
        """
            class Net(nn.Module):
                def forward(self, x):
                    x = self.fc(x)
                    return x
        """,
        # The input: detaching it cuts no layer.
        """
            class Net(nn.Module):
                def forward(self, x):
                    x = x.flatten(1)
                    return self.fc(x)
        """,
        # A parameter-free module on the input cuts nothing either.
        """
            class Net(nn.Module):
                def __init__(self):
                    self.drop = nn.Dropout(0.1)
                def forward(self, x):
                    x = self.drop(x)
                    return self.fc(x)
        """,
        # Not an nn.Module.
        """
            class Helper:
                def forward(self, x):
                    x = self.fc1(x)
                    return self.fc2(x)
        """,
        # Not a tensor: sizes and an LSTM's (output, state) tuple have no .detach().
        """
            class Net(nn.Module):
                def __init__(self):
                    self.lstm = nn.LSTM(4, 4)
                def forward(self, x):
                    n = x.size(0)
                    out = self.lstm(x)
                    return self.fc(out[0])[:n]
        """,
        # One part of a split output: the layer still learns through the other parts.
        """
            class Attention(nn.Module):
                def forward(self, x):
                    q, k, v = self.c_attn(x).split(8, dim=2)
                    k = k.transpose(1, 2)
                    return self.proj(q @ k @ v)
        """,
        # The model's output itself (collected and returned): nothing left to learn.
        """
            class Sequence(nn.Module):
                def forward(self, input, future=0):
                    outputs = []
                    for input_t in input.split(1, dim=1):
                        h, c = self.cell(input_t, (h, c))
                        output = self.linear(h)
                        outputs += [output]
                    for i in range(future):
                        h, c = self.cell(output, (h, c))
                        output = self.linear(h)
                        outputs += [output]
                    return torch.cat(outputs, dim=1)
        """,
        # Only a parameter-free module after the cut.
        """
            class Net(nn.Module):
                def __init__(self):
                    self.act = nn.ReLU()
                def forward(self, x):
                    x = self.fc(x)
                    return self.act(x)
        """,
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> Edits | NonSite | None:
        assert isinstance(node, cst.Assign)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, (cst.Tuple, cst.List)):
            return _unpacked_site(node, ctx)
        return super().plan(node, ctx)

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        assert isinstance(node, cst.Assign)
        forward = forward_of(node, ctx)
        if forward is None or len(node.targets) != 1:
            return None
        target = node.targets[0].target
        if not isinstance(target, cst.Name) or not tensor_valued(node.value, forward, ctx):
            return None
        flow = ForwardFlow(forward, ctx)
        if not (flow.at_layer_output(node) and flow.feeds_a_layer(node, target.value)):
            return None
        if flow.is_model_output(node, target.value):
            return NonSite("the model's output itself: the loss would have nothing to learn from")
        assert isinstance(node, cst.Assign)
        return node.with_changes(value=method_call(node.value, "detach"))


def _unpacked_site(node: cst.Assign, ctx: Context) -> Edits | None:
    """``r_out, (h_n, h_c) = self.rnn(x)`` read by a layer (``self.out(r_out[:, -1])``):
    the first unpacked name a layer reads is detached on a line of its own after the
    unpacking (issue 29: the head takes the recurrent output directly, so no later
    assignment offers a cut)."""
    forward = forward_of(node, ctx)
    line = ctx.parent(node)
    if forward is None or not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    loop = ctx.enclosing(node, (cst.For, cst.While))
    if loop is not None and ctx.within(forward, loop):
        return None  # a cell stepped in a loop: its state is carried, not a layer's output
    flow = ForwardFlow(forward, ctx)
    if splits(node.value) or not flow.applies_layer(node.value):
        return None
    for name in _unpacked_names(node.targets[0].target):
        if _cut_later(node, name, flow, ctx):
            continue  # ``out = out.reshape(...)`` below is the cut (a site of its own)
        if _read_by_layer(node, name, flow, ctx) and not flow.is_model_output(node, name):
            cut = cst.parse_statement(f"{name} = {name}.detach()\n")
            return {line: cst.FlattenSentinel([line, cut])}
    return None


def _read_by_layer(node: cst.Assign, name: str, flow: ForwardFlow, ctx: Context) -> bool:
    """Does a later layer call take ``name`` in its arguments (``self.fc(hidden[-1])``)? A
    state handed back with the output (``return self.head(out), hidden``) is read by none."""
    for statement in flow.statements:
        if not starts_before(node, statement, ctx) or ctx.within(node, statement):
            continue
        for call in ctx.nodes_within(statement, cst.Call):
            reads = any(name in identifiers_in(arg.value, ctx) for arg in call.args)  # type: ignore[attr-defined]
            if reads and flow.is_layer_call(call):  # type: ignore[arg-type]
                return True
    return False


def _cut_later(node: cst.Assign, name: str, flow: ForwardFlow, ctx: Context) -> bool:
    """Is the first statement reading ``name`` after ``node`` an assignment that is a
    detach_hidden site itself?"""
    for statement in flow.statements:
        if not starts_before(node, statement, ctx) or ctx.within(node, statement):
            continue
        if name not in identifiers_in(getattr(statement, "value", None) or statement, ctx):
            continue
        if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1):
            return False
        target = statement.targets[0].target
        return (
            isinstance(target, cst.Name)
            and flow.feeds_a_layer(statement, target.value)
            and not flow.is_model_output(statement, target.value)
        )
    return False


def _unpacked_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value] if target.value != "_" else []
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _unpacked_names(e.value)]
    return []
