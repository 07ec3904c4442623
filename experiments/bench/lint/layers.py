"""The layer analysis behind TW607: which weight layers meet with nothing nonlinear between.

A layer table per model class (``self.fc1 = nn.Linear(...)``, ``self.features =
nn.Sequential(...)``) and a small data flow through each of its methods: which value was
last produced by a Linear/Conv with only shape changes, dropout, BatchNorm or pooling after
it. Anything the table does not know (a custom block, an ``act`` looked up in a dict, a
residual sum, a matmul) ends the chain: the analysis stays silent where it cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst

from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, find_arg, method_name, number_value, unwrap_calls
from mutator.semantics.models import MODULE_PASSTHROUGH

AFFINE = frozenset(
    {"Linear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d"}
    | {"ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d"}
)
# Layers that keep a value affine in its input (at inference) and are never the "activation"
# of a correct network. Spacers (dropout, BatchNorm, plain pooling) sit where a hidden
# layer's activation belongs: a weight layer, spacers, a weight layer is a hidden layer
# that lost its activation. Shape changes (flatten, view) pass a value through unchanged.
# LayerNorm, adaptive pooling, PixelShuffle and Upsample end a chain (they sit between
# weight layers on purpose).
SPACER_MODULES = frozenset(
    {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"}
    | {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "MaxPool1d", "MaxPool2d", "MaxPool3d"}
    | {"AvgPool1d", "AvgPool2d", "AvgPool3d"}
)
SHAPE_MODULES = frozenset({"Flatten", "Identity"})
SPACER_FUNCTIONS = frozenset(
    {"dropout", "dropout1d", "dropout2d", "dropout3d", "batch_norm"}
    | {"max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"}
)
SHAPE_METHODS = frozenset({"view", "reshape", "flatten", "squeeze", "unsqueeze", "contiguous"})


@dataclass(frozen=True)
class Layer:
    """One weight layer: where it is built and whether it is a deliberate linear factor."""

    node: cst.Call
    planned: bool  # Linear(bias=False) (a low-rank/LoRA factor), grouped or 1xk conv
    at: cst.CSTNode | None = None  # where its output is made, when not at ``node``


@dataclass(frozen=True)
class Block:
    """What a module does to the chain: its first and last weight layer when only neutral
    layers stand before/after them, whether spacers stand there (``head_gap``,
    ``tail_gap``), and whether the module is neutral as a whole."""

    head: Layer | None
    tail: Layer | None
    neutral: bool = False
    head_gap: bool = False
    tail_gap: bool = False


OPAQUE = Block(None, None)
SPACER = Block(None, None, neutral=True, head_gap=True, tail_gap=True)
SHAPE = Block(None, None, neutral=True)
Pair = tuple[Layer, Layer]
# A value in a forward: the weight layer that made it, and whether a spacer came after it.
Out = tuple[Layer, bool] | None


def _layer(call: cst.Call) -> Layer:
    if callee_name(call) in {"Linear", "LazyLinear"}:
        bias = find_arg(call, keyword="bias", position=2)
        planned = (
            bias is not None and isinstance(bias.value, cst.Name) and bias.value.value == "False"
        )
    else:
        groups = find_arg(call, keyword="groups")
        kernel = find_arg(call, keyword="kernel_size", position=2)
        planned = (groups is not None and number_value(groups.value) != 1) or (
            kernel is not None and isinstance(kernel.value, (cst.Tuple, cst.List))
        )
    return Layer(call, planned)


def _layers_of_sequential(call: cst.Call) -> list[cst.BaseExpression] | None:
    """The layer expressions of ``nn.Sequential(a, b)`` or ``nn.Sequential(OrderedDict([...]))``."""
    args = call.args
    if len(args) == 1 and isinstance(args[0].value, cst.Call):
        inner = args[0].value
        if callee_name(inner) == "OrderedDict" and inner.args:
            items = inner.args[0].value
            if not isinstance(items, (cst.List, cst.Tuple)):
                return None
            values = []
            for element in items.elements:
                if not isinstance(element.value, cst.Tuple) or len(element.value.elements) != 2:
                    return None
                values.append(element.value.elements[1].value)
            return values
    if any(arg.star or arg.keyword is not None for arg in args):
        return None  # nn.Sequential(*layers): built elsewhere
    return [arg.value for arg in args]


class Layers:
    """Reads layer constructors into Blocks and records adjacent weight-layer pairs."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.pairs: list[Pair] = []
        self._local = set(script.functions) | {
            cls.name.value for cls in script.ctx.nodes(cst.ClassDef)
        }

    def block(self, expr: cst.BaseExpression) -> Block:
        expr = unwrap_calls(expr, MODULE_PASSTHROUGH)  # nn.Linear(4, 8).to(device)
        if not isinstance(expr, cst.Call):
            return OPAQUE
        name = callee_name(expr)
        if name is None or name in self._local:
            return OPAQUE  # a class of this file named Linear is not nn.Linear
        if name in AFFINE:
            layer = _layer(expr)
            return Block(layer, layer)
        if name in SPACER_MODULES:
            return SPACER
        if name in SHAPE_MODULES:
            return SHAPE
        if name == "Sequential":
            layers = _layers_of_sequential(expr)
            return OPAQUE if layers is None else self.chain([self.block(e) for e in layers])
        return OPAQUE

    def chain(self, blocks: list[Block]) -> Block:
        """Compose blocks in order, recording weight layers that meet: across spacers, or
        side by side in one Sequential (``nn.Sequential(nn.Linear(), nn.Linear())``). Two
        modules that meet with nothing between (``nn.Sequential(encoder, decoder)`` of an
        autoencoder, a projection before a classifier) are a deliberate bottleneck."""
        head: Layer | None = None
        tail: Layer | None = None
        started = lead_gap = head_gap = gap = single = False
        for block in blocks:
            if block.neutral:
                gap = gap or block.tail_gap
                lead_gap = lead_gap or block.head_gap
                continue
            if block.head is not None and tail is not None:
                side_by_side = single and block.head is block.tail
                self.meet(tail, block.head, gap or block.head_gap or side_by_side)
            if not started:
                head, head_gap, started = block.head, lead_gap or block.head_gap, True
            tail, gap = block.tail, block.tail_gap
            single = block.tail is not None and block.head is block.tail
        return Block(head, tail, not started, head_gap, gap)

    def meet(self, first: Layer, second: Layer, report: bool) -> None:
        if report and not (first.planned or second.planned):
            self.pairs.append((first, second))


def layer_table(script: Script, cls: cst.ClassDef, layers: Layers) -> dict[str, Block]:
    """``self.NAME`` -> its Block, for names assigned exactly once in the class."""
    assigned: dict[str, list[cst.BaseExpression]] = {}
    for assign in script.ctx.nodes_within(cls, cst.Assign):
        for target in assign.targets:
            node = target.target
            if (
                isinstance(node, cst.Attribute)
                and isinstance(node.value, cst.Name)
                and node.value.value == "self"
            ):
                assigned.setdefault(node.attr.value, []).append(assign.value)
    quiet = Layers(script)  # Sequentials are checked once, from the file's calls
    return {
        name: quiet.block(values[0]) if len(values) == 1 else OPAQUE
        for name, values in assigned.items()
    }


Env = dict[str, Out]


class Flow:
    """Walks one method's statements; ``env`` maps a local name to the weight layer whose
    output it holds (through neutral steps only) and whether a spacer came after it. Only
    layers that meet across a spacer are recorded: ``z = self.enc(x); self.dec(z)`` is an
    autoencoder's bottleneck, ``x = self.fc1(x); x = self.dropout(x); self.fc2(x)`` a
    hidden layer without its activation."""

    def __init__(self, layers: Layers, table: dict[str, Block]) -> None:
        self.layers = layers
        self.table = table

    def run(self, statements: list[cst.BaseStatement] | tuple, env: Env) -> Env:
        for statement in statements:
            env = self.statement(statement, env)
        return env

    def statement(self, node: cst.CSTNode, env: Env) -> Env:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                if isinstance(small, cst.Assign):
                    value = self.value(small.value, env)
                    for target in small.targets:
                        self.bind(target.target, value, env)
                elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                    if small.value is not None:
                        self.value(small.value, env)
                    self.bind(small.target, None, env)
                elif isinstance(small, (cst.Expr, cst.Return)) and small.value is not None:
                    self.value(small.value, env)
            return env
        if isinstance(node, cst.If):
            self.value(node.test, env)
            taken = self.run(node.body.body, dict(env))
            other = self.statement(node.orelse, dict(env)) if node.orelse else dict(env)
            return _merge(taken, other)
        if isinstance(node, cst.Else):
            return self.run(node.body.body, env)
        if isinstance(node, (cst.For, cst.While)):
            inner = dict(env)
            if isinstance(node, cst.For):
                self.value(node.iter, env)
                self.bind(node.target, None, inner)
            return _merge(env, self.run(node.body.body, inner))
        if isinstance(node, cst.With):
            return self.run(node.body.body, env)
        if isinstance(node, cst.Try):
            return _merge(env, self.run(node.body.body, dict(env)))
        return env  # nested functions and classes: not this method's flow

    def bind(self, target: cst.BaseExpression, value: Out, env: Env) -> None:
        if isinstance(target, cst.Name):
            env[target.value] = value
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind(element.value, None, env)

    def value(self, expr: cst.BaseExpression, env: Env) -> Out:
        """The weight layer whose output ``expr`` is, recording layers that meet on the way."""
        if isinstance(expr, cst.Name):
            return env.get(expr.value)
        if isinstance(expr, cst.Call):
            return self.call(expr, env)
        for child in expr.children:  # sums, tuples, subscripts: evaluate, then opaque
            if isinstance(child, cst.BaseExpression):
                self.value(child, env)
            elif isinstance(child, (cst.Element, cst.Arg)):
                self.value(child.value, env)
        return None

    def call(self, call: cst.Call, env: Env) -> Out:
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
            and func.attr.value in self.table
        ):
            block = self.table[func.attr.value]
            source = self.value(positional[0], env) if positional else None
            for extra in call.args[1:]:
                self.value(extra.value, env)
            if block.neutral:
                return (source[0], source[1] or block.tail_gap) if source else None
            if source is not None and block.head is not None:
                gap = source[1] or block.head_gap
                self.layers.meet(source[0], replace(block.head, at=call), gap)
            if block.tail is None:
                return None
            if block.tail is block.head:
                return replace(block.tail, at=call), False  # one layer: its output is here
            return block.tail, block.tail_gap
        if method_name(call) in SHAPE_METHODS and isinstance(func, cst.Attribute):
            for arg in call.args:
                self.value(arg.value, env)
            return self.value(func.value, env)
        name = callee_name(call)
        if (name in SPACER_FUNCTIONS or name == "flatten") and positional:
            for extra in call.args[1:]:
                self.value(extra.value, env)
            source = self.value(positional[0], env)
            return (source[0], source[1] or name != "flatten") if source else None
        if isinstance(func, cst.Attribute):
            self.value(func.value, env)
        for arg in call.args:
            self.value(arg.value, env)
        return None


def _merge(a: Env, b: Env) -> Env:
    """A name holds a layer's output after a branch only if every path says the same layer."""
    return {name: a[name] for name in a.keys() & b.keys() if a[name] is b[name]}
