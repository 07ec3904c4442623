"""``trainwreck-lint``: a static LibCST linter for training-loop bugs.

Every rule is tuned for precision: on the unmutated reference loops and the style
scripts it must report nothing (a test enforces it), so a finding is worth reading.
The analysis is intra-file and name based: a call's "scope" is its innermost ``for`` /
``while`` loop inside its function (else the function, else the module), and order
rules compare calls within one scope. Local functions are followed by name so that
``for epoch: train_one_epoch(...); evaluate(...)`` is seen as one epoch loop.

Output is flake8-style: ``path:line:col TW### message``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from experiments.bench.api import Finding, ScriptInput, StaticDetector, register
from mutator.context import Context
from mutator.engine import SourceFile
from mutator.semantics import callee_name, dotted_name, find_arg, method_name, number_value, resolve

Node = cst.CSTNode
Scope = cst.CSTNode  # a For/While loop, a FunctionDef or the Module

NO_GRAD_CONTEXTS = {"no_grad", "inference_mode"}
CLIP_CALLS = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"}
ADAPTIVE_OPTIMIZERS = {"Adam", "AdamW", "NAdam", "RAdam", "Adamax", "Adagrad", "RMSprop"}
LOGITS_LOSSES = {
    "CrossEntropyLoss",
    "cross_entropy",
    "BCEWithLogitsLoss",
    "binary_cross_entropy_with_logits",
}
PROBABILITY_CALLS = {"softmax", "sigmoid"}
TARGET_NAMES = {"y", "yb", "target", "targets", "label", "labels", "lab", "y_true"}
PREDICTION_NAMES = {"logits", "out", "output", "outputs", "pred", "preds", "prediction", "y_hat"}


@dataclass(frozen=True)
class Rule:
    code: str
    category: str
    summary: str
    operators: tuple[str, ...]
    check: Callable[[Script], Iterator[tuple[Node, str]]]


@dataclass(frozen=True)
class LintFinding:
    path: str
    line: int
    column: int
    rule: Rule
    message: str

    def format(self) -> str:
        return f"{self.path}:{self.line}:{self.column} {self.rule.code} {self.message}"

    def to_finding(self) -> Finding:
        operator = self.rule.operators[0] if len(self.rule.operators) == 1 else None
        return Finding(self.rule.category, operator, self.line, None, self.message, self.rule.code)


# -- the facts every rule reads -----------------------------------------------------------


class Script:
    """One parsed file plus the call facts the rules share."""

    def __init__(self, source: str, path: str) -> None:
        self.path = path
        self.file = SourceFile(source, target=path)  # MutationError on a syntax error
        self.ctx: Context = self.file.context
        self.calls: list[cst.Call] = list(self.ctx.nodes(cst.Call))
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        for function in self.ctx.nodes(cst.FunctionDef):
            self.functions.setdefault(function.name.value, []).append(function)
        self.assignments: dict[str, list[tuple[cst.CSTNode, cst.BaseExpression]]] = {}
        for assign in self.ctx.nodes(cst.Assign):
            for target in assign.targets:
                self._record(target.target, assign.value, assign)
        self._bind_constructor_arguments()
        self._kinds = {id(call): self._classify(call) for call in self.calls}

    def _bind_constructor_arguments(self) -> None:
        """``self.criterion = criterion`` in ``__init__`` takes the value passed at
        ``Trainer(model, opt, nn.BCEWithLogitsLoss())``: trainer classes get their loss
        and optimizer that way."""
        for cls in self.ctx.nodes(cst.ClassDef):
            init = next(
                (
                    f
                    for f in self.functions.get("__init__", [])
                    if self.ctx.parent(self.ctx.parent(f)) is cls
                ),
                None,
            )
            if init is None:
                continue
            params = [p.name.value for p in init.params.params][1:]
            stored = {}
            for target, assigned in list(self.assignments.items()):
                for where, value in assigned:
                    if (
                        target.startswith("self.")
                        and isinstance(value, cst.Name)
                        and value.value in params
                        and self.ctx.within(init, where)
                    ):
                        stored[value.value] = target
            for call in self.calls:
                if callee_name(call) != cls.name.value:
                    continue
                for index, param in enumerate(params):
                    arg = find_arg(call, keyword=param, position=index)
                    if arg is not None and param in stored:
                        self.assignments.setdefault(stored[param], []).append((call, arg.value))

    def _record(self, target: cst.BaseExpression, value: cst.BaseExpression, where: Node) -> None:
        if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple):
            if len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    self._record(t.value, v.value, where)
            return
        name = dotted_name(target)
        if name is not None:
            self.assignments.setdefault(name, []).append((where, value))

    def qualified(self, node: Node) -> set[str]:
        """Qualified names of a callee. ``Context.qualified_names`` fails on the LazyValue
        libcst 1.9 stores (reported to the engine owner), so resolve it here."""
        try:
            return set(resolve(node, self.ctx, strict=False).names)
        except TypeError:
            lazy = self.ctx._metadata[QualifiedNameProvider].get(node, set())
            return {name.name for name in (lazy() if callable(lazy) else lazy)}

    # -- positions and structure ------------------------------------------------------
    def position(self, node: Node) -> tuple[int, int]:
        start = self.ctx.position(node).start
        return start.line, start.column + 1

    def unit(self, node: Node) -> Scope:
        return self.ctx.enclosing_function(node) or self.ctx.module

    def scope(self, node: Node) -> Scope:
        for ancestor in self.ctx.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef)):
                return ancestor
        return self.ctx.module

    def before(self, a: Node, b: Node) -> bool:
        return self.position(a) < self.position(b)

    def kind(self, call: cst.Call) -> str | None:
        return self._kinds.get(id(call))

    def calls_of(self, kind: str, within: Node | None = None) -> list[cst.Call]:
        found = [call for call in self.calls if self._kinds[id(call)] == kind]
        if within is None:
            return found
        return [call for call in found if self.ctx.within(within, call)]

    def direct_calls(self, kind: str, unit: Scope) -> list[cst.Call]:
        """Calls of ``kind`` in ``unit`` itself, not in functions nested inside it."""
        return [call for call in self.calls_of(kind, unit) if self.unit(call) is unit]

    # -- what a call does ----------------------------------------------------------------
    def _classify(self, call: cst.Call) -> str | None:
        method = method_name(call)
        tail = callee_name(call)
        if method == "zero_grad":
            return "zero_grad"
        if method == "backward" or self.qualified(call.func) & {"torch.autograd.backward"}:
            return "backward"
        if method == "step":
            return self._step_kind(call)
        if method == "eval" and not call.args:
            return "eval"
        if method == "train":
            return self._train_kind(call)
        if tail in CLIP_CALLS:
            return "clip"
        if method == "to" or method == "cuda":
            return "to_device"
        return None

    def _step_kind(self, call: cst.Call) -> str | None:
        if call.args:  # scaler.step(optimizer) or optimizer.step(closure)
            return "opt_step"
        assert isinstance(call.func, cst.Attribute)
        receiver = dotted_name(call.func.value) or ""
        for _, value in self.assignments.get(receiver, []):
            if isinstance(value, cst.Call):
                qualified = self.qualified(value.func)
                text = " ".join(qualified) or self.ctx.code(value.func)
                if "lr_scheduler" in text or "Scheduler" in text or text.endswith("LR"):
                    return "sched_step"
                if "optim" in text:
                    return "opt_step"
        last = receiver.rsplit(".", 1)[-1].lower()
        if "sched" in last or last.startswith("lr"):
            return "sched_step"
        if "opt" in last:
            return "opt_step"
        return None

    def _train_kind(self, call: cst.Call) -> str | None:
        if not call.args:
            return "train"
        if len(call.args) == 1 and isinstance(call.args[0].value, cst.Name):
            flag = call.args[0].value.value
            return {"True": "train", "False": "eval"}.get(flag)
        return None

    def local_callees(self, call: cst.Call) -> list[cst.FunctionDef]:
        """Functions of this file a call may run (matched by name)."""
        if self._kinds[id(call)] is not None:
            return []
        tail = callee_name(call)
        return self.functions.get(tail or "", [])

    def effects(self, root: Node, seen: frozenset[int] = frozenset()) -> set[str]:
        """Kinds of calls ``root`` runs, following calls into local functions."""
        kinds: set[str] = set()
        for call in self.calls:
            if not self.ctx.within(root, call):
                continue
            kind = self._kinds[id(call)]
            if kind is not None:
                kinds.add(kind)
            for function in self.local_callees(call):
                if id(function) not in seen and not self.ctx.within(function, call):
                    kinds |= self.effects(function, seen | {id(root), id(function)})
        return kinds

    # -- values -----------------------------------------------------------------------
    def value_of(self, expr: cst.BaseExpression, at: Node) -> cst.BaseExpression:
        """The last value assigned to a plain name before ``at`` in the same function."""
        if not isinstance(expr, cst.Name):
            return expr
        unit = self.unit(at)
        candidates = [
            value
            for where, value in self.assignments.get(expr.value, [])
            if self.unit(where) is unit and self.before(where, at)
        ]
        return candidates[-1] if candidates else expr

    def loss_kind(self, call: cst.Call) -> str | None:
        """``CrossEntropyLoss``/``cross_entropy``... when a call computes a known loss."""
        tail = callee_name(call)
        names = self.qualified(call.func)
        if any(name.startswith("torch.nn.functional.") for name in names) and tail:
            return tail
        if tail in {
            "cross_entropy",
            "nll_loss",
            "mse_loss",
            "binary_cross_entropy",
            "binary_cross_entropy_with_logits",
        }:
            return tail
        if isinstance(call.func, cst.Call):  # nn.CrossEntropyLoss()(logits, y)
            inner = callee_name(call.func)
            return inner if inner and inner.endswith("Loss") else None
        target = dotted_name(call.func)
        if target is None:
            return None
        classes = set()
        for _, value in self.assignments.get(target, []):
            if isinstance(value, cst.Call) and (callee_name(value) or "").endswith("Loss"):
                classes.add(callee_name(value))
        return classes.pop() if len(classes) == 1 else None

    def loss_calls(self) -> Iterator[tuple[cst.Call, str]]:
        for call in self.calls:
            kind = self.loss_kind(call)
            if kind is not None and call.args:
                yield call, kind

    def mentions(self, pattern: str) -> bool:
        return re.search(pattern, self.file.source) is not None


def _strip_casts(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``y.float().unsqueeze(1)`` -> ``y``: shape and dtype calls keep the tensor's meaning."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value
        in {"float", "long", "unsqueeze", "squeeze", "view", "reshape", "to", "double"}
    ):
        expr = expr.func.value
    return expr


def _probability_call(expr: cst.BaseExpression) -> str | None:
    """``softmax``/``sigmoid`` when ``expr`` turns logits into probabilities."""
    if isinstance(expr, cst.Call):
        tail = callee_name(expr)
        if tail in PROBABILITY_CALLS:
            return tail
        if tail in {"squeeze", "view", "reshape", "float"} and isinstance(expr.func, cst.Attribute):
            return _probability_call(expr.func.value)
    return None


def _in_no_grad(script: Script, node: Node) -> bool:
    for ancestor in script.ctx.ancestors(node):
        if isinstance(ancestor, cst.With):
            for item in ancestor.items:
                call = item.item
                if isinstance(call, cst.Call):
                    tail = callee_name(call)
                    if tail in NO_GRAD_CONTEXTS:
                        return True
                    if (
                        tail == "set_grad_enabled"
                        and call.args
                        and script.ctx.code(call.args[0].value) == "False"
                    ):
                        return True
        if isinstance(ancestor, cst.FunctionDef):
            for decorator in ancestor.decorators:
                expr = decorator.decorator
                expr = expr.func if isinstance(expr, cst.Call) else expr
                if (dotted_name(expr) or "").rsplit(".", 1)[-1] in NO_GRAD_CONTEXTS:
                    return True
    return False


# -- gradient rules -------------------------------------------------------------------------


def _training_units(script: Script) -> Iterator[tuple[Scope, dict[str, list[cst.Call]]]]:
    units = [script.ctx.module, *script.ctx.nodes(cst.FunctionDef)]
    for unit in units:
        calls = {
            kind: script.direct_calls(kind, unit)
            for kind in ("zero_grad", "backward", "opt_step", "clip")
        }
        if calls["backward"] or calls["opt_step"]:
            yield unit, calls


def missing_zero_grad(script: Script) -> Iterator[tuple[Node, str]]:
    for _, calls in _training_units(script):
        if calls["backward"] and calls["opt_step"] and not calls["zero_grad"]:
            if script.mentions(r"\.grad\s*=\s*None|\.grad\.zero_\(\)"):
                continue
            yield (
                calls["backward"][0],
                "backward() and step() without zero_grad(): gradients accumulate across steps",
            )


def missing_backward(script: Script) -> Iterator[tuple[Node, str]]:
    for _, calls in _training_units(script):
        if calls["opt_step"] and calls["zero_grad"] and not calls["backward"]:
            yield (
                calls["opt_step"][0],
                "optimizer step without backward(): there are no gradients to apply",
            )


def missing_step(script: Script) -> Iterator[tuple[Node, str]]:
    for _, calls in _training_units(script):
        if calls["backward"] and calls["zero_grad"] and not calls["opt_step"]:
            yield (
                calls["backward"][0],
                "backward() without an optimizer step: the weights never change",
            )


def _by_scope(script: Script, calls: Iterable[cst.Call]) -> dict[int, list[cst.Call]]:
    grouped: dict[int, list[cst.Call]] = {}
    for call in calls:
        grouped.setdefault(id(script.scope(call)), []).append(call)
    return grouped


def _ordered(script: Script, kinds: tuple[str, ...]) -> Iterator[list[tuple[str, cst.Call]]]:
    """Per scope, the calls of ``kinds`` in document order."""
    calls = [call for call in script.calls if script.kind(call) in kinds]
    for group in _by_scope(script, calls).values():
        yield [(script.kind(call) or "", call) for call in group]


def step_before_backward(script: Script) -> Iterator[tuple[Node, str]]:
    for sequence in _ordered(script, ("backward", "opt_step", "zero_grad")):
        kinds = [kind for kind, _ in sequence]
        if "opt_step" not in kinds or "backward" not in kinds:
            continue
        first_step = kinds.index("opt_step")
        first_backward = kinds.index("backward")
        between = kinds[first_step:first_backward]
        if first_step < first_backward and "zero_grad" not in between:
            yield (
                sequence[first_step][1],
                "optimizer step before backward(): it applies stale or no gradients",
            )


def zero_grad_between_backward_and_step(script: Script) -> Iterator[tuple[Node, str]]:
    for sequence in _ordered(script, ("backward", "opt_step", "zero_grad")):
        last_backward = None
        for index, (kind, call) in enumerate(sequence):
            if kind == "backward":
                last_backward = index
            elif kind == "zero_grad" and last_backward is not None:
                rest = [k for k, _ in sequence[index + 1 :]]
                if "opt_step" in rest and "backward" not in rest[: rest.index("opt_step")]:
                    yield (
                        call,
                        "zero_grad() between backward() and step(): the step sees zero gradients",
                    )


def step_outside_backward_loop(script: Script) -> Iterator[tuple[Node, str]]:
    for unit, calls in _training_units(script):
        loops = {id(script.scope(b)): script.scope(b) for b in calls["backward"]}
        for loop in loops.values():
            if loop is unit or any(script.ctx.within(loop, s) for s in calls["opt_step"]):
                continue
            after = [s for s in calls["opt_step"] if script.before(loop, s)]
            if after:
                yield (
                    after[0],
                    "optimizer step outside the loop that calls backward(): one update per loop",
                )


def clip_before_backward(script: Script) -> Iterator[tuple[Node, str]]:
    for sequence in _ordered(script, ("backward", "clip")):
        kinds = [kind for kind, _ in sequence]
        if (
            "clip" in kinds
            and "backward" in kinds
            and kinds.index("clip") < kinds.index("backward")
        ):
            yield (
                sequence[kinds.index("clip")][1],
                "gradient clipping before backward(): it clips stale gradients",
            )


def unused_clip_setting(script: Script) -> Iterator[tuple[Node, str]]:
    """A clipping threshold is configured but nothing clips: the clip call was lost."""
    if script.calls_of("clip"):
        return
    pattern = re.compile(r"(clip|max_grad_norm|grad_norm)", re.IGNORECASE)
    for assign in script.ctx.nodes(cst.Assign):
        for target in assign.targets:
            name = dotted_name(target.target)
            if name and pattern.search(name) and script.unit(assign) is script.ctx.module:
                yield assign, f"{name} is set but gradients are never clipped"
    for call in script.calls:
        if method_name(call) == "add_argument" and call.args:
            flag = call.args[0].value
            if isinstance(flag, cst.SimpleString) and pattern.search(flag.evaluated_value or ""):
                yield (
                    call,
                    f"option {flag.evaluated_value} is parsed but gradients are never clipped",
                )


def detached_loss(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls_of("backward"):
        if not isinstance(call.func, cst.Attribute):
            continue
        receiver = call.func.value
        if isinstance(receiver, cst.Call) and method_name(receiver) == "scale" and receiver.args:
            receiver = receiver.args[0].value  # scaler.scale(loss).backward()
        value = script.value_of(receiver, call)
        code = script.ctx.code(value)
        if re.search(r"\.item\(\)|\.detach\(\)|\.data\b", code):
            yield (
                call,
                "backward() on a loss rebuilt from .item()/.detach(): no gradient reaches the model",
            )


def loss_kept_with_graph(script: Script) -> Iterator[tuple[Node, str]]:
    backwarded = _backwarded_names(script)
    for node in script.ctx.nodes(cst.AugAssign):
        if isinstance(node.operator, cst.AddAssign) and _uses_bare(node.value, backwarded):
            yield (
                node,
                "running total keeps the loss tensor (use loss.item()): every graph stays alive",
            )
    for call in script.calls:
        if (
            method_name(call) == "append"
            and call.args
            and _uses_bare(call.args[0].value, backwarded)
        ):
            yield call, "appending the loss tensor (use loss.item()): every graph stays alive"


def _uses_bare(expr: cst.BaseExpression, names: set[str]) -> bool:
    if isinstance(expr, cst.Name):
        return expr.value in names
    if isinstance(expr, cst.BinaryOperation):
        return _uses_bare(expr.left, names) or _uses_bare(expr.right, names)
    return False


def partial_parameters(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        if "optim" not in " ".join(script.qualified(call.func)) or not call.args:
            continue
        params = find_arg(call, keyword="params", position=0)
        sliced = params is not None and isinstance(params.value, cst.Subscript)
        if sliced and "parameters()" in script.ctx.code(params.value):
            yield call, "optimizer gets a slice of the parameters: the rest never trains"


def detach_in_forward(script: Script) -> Iterator[tuple[Node, str]]:
    for function in script.functions.get("forward", []):
        for call in script.calls:
            if method_name(call) == "detach" and script.ctx.within(function, call):
                yield call, "detach() inside forward(): the layers before it stop learning"


def optimizer_in_loop(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        names = script.qualified(call.func)
        if not any(n.startswith("torch.optim.") and "lr_scheduler" not in n for n in names):
            continue
        scope = script.scope(call)
        if isinstance(scope, (cst.For, cst.While)) and script.calls_of("backward", scope):
            yield call, "optimizer built inside the training loop: its state resets every iteration"


# -- mode rules -------------------------------------------------------------------------------


def eval_without_train_in_loop(script: Script) -> Iterator[tuple[Node, str]]:
    """A loop that trains and calls eval() but never train(): training resumes in eval mode."""
    reported: set[int] = set()
    for loop in [*script.ctx.nodes(cst.For), *script.ctx.nodes(cst.While)]:
        effects = script.effects(loop.body)
        trains = bool({"backward", "opt_step"} & effects)
        if not trains or "eval" not in effects or "train" in effects:
            continue
        culprit = _first_call_with(script, loop.body, "eval")
        if culprit is not None and id(culprit) not in reported:
            reported.add(id(culprit))
            yield (
                culprit,
                "eval() inside the training loop with no later train(): training continues in eval mode",
            )


def _first_call_with(script: Script, root: Node, kind: str) -> cst.Call | None:
    for call in script.calls:
        if script.ctx.within(root, call) and (
            script.kind(call) == kind or kind in script.effects(call)
        ):
            return call
    return None


def eval_before_training(script: Script) -> Iterator[tuple[Node, str]]:
    """eval() and then a training step in the same function with no train() between."""
    for unit, calls in _training_units(script):
        evals = script.direct_calls("eval", unit)
        trains = script.direct_calls("train", unit)
        steps = calls["backward"] or calls["opt_step"]
        for switch in evals:
            later = [s for s in steps if script.before(switch, s)]
            if later and not any(
                script.before(switch, t) and script.before(t, later[0]) for t in trains
            ):
                if isinstance(script.scope(switch), (cst.For, cst.While)) and script.scope(
                    switch
                ) is not script.scope(later[0]):
                    continue
                yield switch, "the model is put in eval() mode before it trains"


def eval_without_no_grad(script: Script) -> Iterator[tuple[Node, str]]:
    """After ``model.eval()``, a forward of that model outside any no_grad region."""
    for switch in script.calls_of("eval"):
        assert isinstance(switch.func, cst.Attribute)
        model = dotted_name(switch.func.value)
        if model is None:
            continue
        unit = script.unit(switch)
        statement = script.ctx.statement_of(switch)
        block = [statement, *script.ctx.following_statements(statement)] if statement else []
        for call in script.calls:
            if dotted_name(call.func) != model or script.unit(call) is not unit:
                continue
            if not any(script.ctx.within(s, call) for s in block[1:]):
                continue
            if _in_no_grad(script, call) or _feeds_backward(script, call):
                continue
            trains = [t for t in script.direct_calls("train", unit) if script.before(switch, t)]
            if trains and script.before(trains[0], call):
                continue
            yield (
                call,
                f"{model}(...) after eval() runs without torch.no_grad(): it builds a graph for nothing",
            )
            break


def _feeds_backward(script: Script, call: cst.Call) -> bool:
    unit = script.unit(call)
    return any(
        script.before(call, b) and script.unit(b) is unit and script.scope(b) is script.scope(call)
        for b in script.calls_of("backward")
    )


def no_grad_without_eval(script: Script) -> Iterator[tuple[Node, str]]:
    """The file switches to train() but never to eval(): evaluation runs with dropout on."""
    if script.calls_of("eval") or not script.calls_of("train"):
        return
    if not script.mentions(r"Dropout|BatchNorm|dropout|batch_norm"):
        return
    for call in script.calls:
        if (
            script.kind(call) is None
            and _in_no_grad(script, call)
            and script.local_callees(call) == []
        ):
            tail = dotted_name(call.func) or ""
            if tail.rsplit(".", 1)[-1] in {"model", "net"}:
                yield (
                    call,
                    "evaluation forward without model.eval(): dropout/batch norm stay in training mode",
                )
                return


def evaluate_on_training_data(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        tail = (callee_name(call) or "").lower()
        if not re.match(r"(evaluate|validate|valid|val|test)\b|evaluate_|validate_", tail):
            continue
        for arg in call.args:
            if isinstance(arg.value, cst.Name) and "train" in arg.value.value.lower():
                yield call, f"{tail}() is given {arg.value.value}: validation runs on training data"
                break


# -- loss rules ---------------------------------------------------------------------------------


def probabilities_into_logits_loss(script: Script) -> Iterator[tuple[Node, str]]:
    for call, kind in script.loss_calls():
        if kind not in LOGITS_LOSSES:
            continue
        value = script.value_of(call.args[0].value, call)
        squashed = _probability_call(value) or _probability_call(call.args[0].value)
        if squashed:
            yield call, f"{squashed} before {kind}, which expects raw logits (double {squashed})"


def nll_without_log_softmax(script: Script) -> Iterator[tuple[Node, str]]:
    for call, kind in script.loss_calls():
        if kind not in {"nll_loss", "NLLLoss"}:
            continue
        value = script.value_of(call.args[0].value, call)
        code = script.ctx.code(value)
        if "log_softmax" in code or "log(" in code or "LogSoftmax" in code:
            continue
        if _probability_call(value) or not script.mentions(r"log_softmax|LogSoftmax"):
            yield call, f"{kind} on values that are not log-probabilities (no log_softmax)"


def _classification_evidence(script: Script) -> bool:
    return script.mentions(r"\.argmax\(|torch\.long|\.long\(\)|one_hot|num_classes|NUM_CLASSES")


def mse_on_classes(script: Script) -> Iterator[tuple[Node, str]]:
    for call, kind in script.loss_calls():
        if kind not in {"MSELoss", "mse_loss"} or len(call.args) < 2:
            continue
        prediction = script.ctx.code(call.args[0].value)
        target = script.ctx.code(call.args[1].value)
        if "one_hot" in target or "logit" in prediction or _classification_evidence(script):
            yield call, "MSE loss on a classification target: use cross-entropy on the logits"


def bce_on_logits(script: Script) -> Iterator[tuple[Node, str]]:
    for call, kind in script.loss_calls():
        if kind not in {"BCELoss", "binary_cross_entropy"}:
            continue
        value = script.value_of(call.args[0].value, call)
        if _probability_call(value) or script.mentions(
            r"Sigmoid\(|\.sigmoid\(|torch\.sigmoid|F\.sigmoid"
        ):
            continue
        yield call, f"{kind} on raw logits (nothing applies sigmoid): use BCEWithLogitsLoss"


def swapped_loss_arguments(script: Script) -> Iterator[tuple[Node, str]]:
    for call, _ in script.loss_calls():
        if len(call.args) < 2 or call.args[0].keyword or call.args[1].keyword:
            continue
        first = _strip_casts(call.args[0].value)
        second = _strip_casts(call.args[1].value)
        first_is_target = isinstance(first, cst.Name) and first.value in TARGET_NAMES
        second_is_prediction = (
            isinstance(second, cst.Name) and second.value in PREDICTION_NAMES
        ) or (
            isinstance(second, cst.Call)
            and (dotted_name(second.func) or "").rsplit(".", 1)[-1] in {"model", "net"}
        )
        if first_is_target and second_is_prediction:
            yield call, "loss called as (target, prediction): the arguments are swapped"


def _backwarded_names(script: Script) -> set[str]:
    names = set()
    for call in script.calls_of("backward"):
        if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name):
            names.add(call.func.value.value)
    return names


def _training_loss_calls(script: Script) -> Iterator[tuple[cst.Call, str]]:
    """Loss calls whose value is assigned to a name that backward() is called on."""
    backwarded = _backwarded_names(script)
    for call, kind in script.loss_calls():
        statement = script.ctx.statement_of(call)
        if isinstance(statement, cst.SimpleStatementLine) and isinstance(
            statement.body[0], cst.Assign
        ):
            target = dotted_name(statement.body[0].targets[0].target)
            if target in backwarded:
                yield call, kind


def reduction_sum(script: Script) -> Iterator[tuple[Node, str]]:
    training = list(_training_loss_calls(script))
    criteria = {dotted_name(call.func) for call, _ in training}
    for call in script.calls:
        arg = find_arg(call, keyword="reduction")
        if (
            arg is None
            or not isinstance(arg.value, cst.SimpleString)
            or arg.value.evaluated_value != "sum"
        ):
            continue
        statement = script.ctx.statement_of(call)
        assigned = None
        if isinstance(statement, cst.SimpleStatementLine) and isinstance(
            statement.body[0], cst.Assign
        ):
            assigned = dotted_name(statement.body[0].targets[0].target)
        if any(call is c for c, _ in training) or (assigned is not None and assigned in criteria):
            yield (
                call,
                'reduction="sum" on the training loss: the gradient scale grows with the batch size',
            )


def wrong_ignore_index(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        arg = find_arg(call, keyword="ignore_index")
        value = number_value(arg.value) if arg is not None else None
        if value is not None and value >= 0:
            yield call, f"ignore_index={int(value)} drops a real class from the loss"


def float_class_targets(script: Script) -> Iterator[tuple[Node, str]]:
    for call, kind in script.loss_calls():
        if (
            kind in {"CrossEntropyLoss", "cross_entropy", "NLLLoss", "nll_loss"}
            and len(call.args) >= 2
            and re.search(r"\.float\(\)|float32", script.ctx.code(call.args[1].value))
        ):
            yield call, f"{kind} with float targets where class indices are expected"
    classes_only = all(
        kind in {"CrossEntropyLoss", "cross_entropy", "NLLLoss", "nll_loss"}
        for _, kind in script.loss_calls()
    )
    if not classes_only or not list(script.loss_calls()):
        return
    for name in TARGET_NAMES:
        for where, value in script.assignments.get(name, []):
            if isinstance(value, cst.Call) and callee_name(value) == "tensor":
                dtype = find_arg(value, keyword="dtype")
                if dtype is not None and "float" in script.ctx.code(dtype.value):
                    yield where, f"class labels {name} built as float for a classification loss"


# -- device rules -----------------------------------------------------------------------------


def _model_moved(script: Script) -> bool:
    for call in script.calls_of("to_device"):
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        if isinstance(receiver, cst.Call) and (callee_name(receiver) or "")[:1].isupper():
            return True  # Net().to(device)
        name = (dotted_name(receiver) or "").rsplit(".", 1)[-1]
        if name in {"model", "net", "module"} or "model" in name:
            return True
    return False


def batch_not_moved(script: Script) -> Iterator[tuple[Node, str]]:
    if not _model_moved(script):
        return
    for loop in script.ctx.nodes(cst.For):
        names = set(_target_names(loop.target))
        moved = script.calls_of("to_device", loop.body)
        if not names:
            continue
        moved_code = " ".join(script.ctx.code(call.func) for call in moved)
        for name in sorted(names & _forward_arguments(script, loop.body)):
            if not re.search(rf"\b{re.escape(name)}\.(to|cuda)\b", moved_code):
                yield loop, f"batch tensor {name} is never moved to the model's device"


def _forward_arguments(script: Script, root: Node) -> set[str]:
    """Plain names passed straight into a model forward or a loss inside ``root``."""
    names = set()
    for call in script.calls:
        if not script.ctx.within(root, call):
            continue
        callee = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        if callee in {"model", "net", "module"} or script.loss_kind(call) is not None:
            names |= {arg.value.value for arg in call.args if isinstance(arg.value, cst.Name)}
    return names


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        names = []
        for element in target.elements:
            names.extend(_target_names(element.value))
        return names
    return []


def model_not_moved(script: Script) -> Iterator[tuple[Node, str]]:
    moves_batches = any(
        isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.args
        and "device" in script.ctx.code(call.args[0].value)
        for call in script.calls_of("to_device")
    )
    if moves_batches and not _model_moved(script) and not script.mentions(r"\.cuda\(\)"):
        for call in script.calls_of("to_device"):
            yield call, "batches are moved to the device but the model never is"
            return


def discarded_to(script: Script) -> Iterator[tuple[Node, str]]:
    loop_names = {name for loop in script.ctx.nodes(cst.For) for name in _target_names(loop.target)}
    for line in script.ctx.nodes(cst.SimpleStatementLine):
        for statement in line.body:
            if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
                call = statement.value
                if script.kind(call) == "to_device" and isinstance(call.func, cst.Attribute):
                    receiver = dotted_name(call.func.value)
                    if receiver in loop_names:
                        yield (
                            call,
                            f"{receiver}.to(...) result is discarded (tensors are not moved in place)",
                        )


# -- optimizer and numerics rules --------------------------------------------------------------


def _resolve_number(script: Script, expr: cst.BaseExpression) -> float | None:
    value = number_value(expr)
    if value is not None:
        return value
    name = dotted_name(expr)
    if name is None:
        return None
    if name.startswith("args."):  # argparse default of --lr / --learning-rate
        option = "--" + name.split(".", 1)[1].replace("_", "-")
        for call in script.calls:
            if method_name(call) == "add_argument" and call.args:
                flag = call.args[0].value
                if isinstance(flag, cst.SimpleString) and flag.evaluated_value == option:
                    default = find_arg(call, keyword="default")
                    return _resolve_number(script, default.value) if default else None
        return None
    values = script.assignments.get(name, [])
    if len(values) == 1:
        return number_value(values[0][1])
    return None


def large_learning_rate(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        tail = callee_name(call)
        names = script.qualified(call.func)
        if not (
            names and any(n.startswith("torch.optim.") for n in names)
        ) and tail not in ADAPTIVE_OPTIMIZERS | {"SGD"}:
            continue
        lr = find_arg(call, keyword="lr", position=1)
        if lr is None:
            continue
        expr = lr.value
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            factor = number_value(expr.right) or number_value(expr.left)
            if factor is not None and factor >= 10:
                yield call, f"learning rate multiplied by {factor:g}"
                continue
        value = _resolve_number(script, expr)
        if value is None:
            continue
        if value <= 0:
            yield call, f"learning rate {value:g}: the optimizer cannot move the weights"
        elif tail in ADAPTIVE_OPTIMIZERS and value >= LintConfig.adaptive_lr_max:
            yield call, f"learning rate {value:g} is very large for {tail} (typical: 1e-4..3e-3)"
        elif tail == "SGD" and value >= LintConfig.sgd_lr_max:
            yield call, f"learning rate {value:g} is very large for SGD"


def scheduler_before_optimizer(script: Script) -> Iterator[tuple[Node, str]]:
    for sequence in _ordered(script, ("opt_step", "sched_step")):
        kinds = [kind for kind, _ in sequence]
        if (
            "opt_step" in kinds
            and "sched_step" in kinds
            and kinds.index("sched_step") < kinds.index("opt_step")
        ):
            yield sequence[kinds.index("sched_step")][1], "scheduler.step() before optimizer.step()"


def tiny_adam_eps(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        arg = find_arg(call, keyword="eps")
        value = number_value(arg.value) if arg is not None else None
        if value is not None and callee_name(call) in ADAPTIVE_OPTIMIZERS and value < 1e-12:
            yield call, f"eps={value:g}: steps explode where the second moment is tiny"


def high_dropout(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        if callee_name(call) not in {"Dropout", "dropout", "Dropout2d", "Dropout1d"}:
            continue
        arg = find_arg(call, keyword="p", position=0)
        value = number_value(arg.value) if arg is not None else None
        if value is not None and value >= LintConfig.dropout_max:
            yield call, f"dropout p={value:g} drops almost every activation"


def naive_log_softmax(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        tail = callee_name(call)
        if tail == "log" and call.args and _probability_call(call.args[0].value) == "softmax":
            yield call, "log(softmax(x)) underflows: use log_softmax"
        elif (
            method_name(call) == "log"
            and isinstance(call.func, cst.Attribute)
            and _probability_call(call.func.value) == "softmax"
        ):
            yield call, "softmax(x).log() underflows: use log_softmax"


def low_precision_loss(script: Script) -> Iterator[tuple[Node, str]]:
    for call, kind in script.loss_calls():
        for arg in call.args[:2]:
            if re.search(r"\.(half|bfloat16)\(\)|float16", script.ctx.code(arg.value)):
                yield call, f"{kind} computed in half precision"
                break


def zero_weight_init(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        if callee_name(call) not in {"zeros_", "constant_"} or not call.args:
            continue
        target = script.ctx.code(call.args[0].value)
        loop = script.ctx.enclosing(call, cst.For)
        over_parameters = loop is not None and "parameters()" in script.ctx.code(loop.iter)
        if target.endswith("weight") or over_parameters:
            yield call, "weights initialised to a constant: units stay symmetric"


def std_without_epsilon(script: Script) -> Iterator[tuple[Node, str]]:
    for node in script.ctx.nodes(cst.BinaryOperation):
        if not isinstance(node.operator, cst.Divide):
            continue
        divisor = script.value_of(node.right, node)
        if isinstance(divisor, cst.Call) and callee_name(divisor) == "std" and divisor.args:
            yield node, "division by a per-feature std with no epsilon: constant features give inf"


def dense_layers_without_activation(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        if callee_name(call) != "Sequential":
            continue
        layers = [
            callee_name(arg.value) if isinstance(arg.value, cst.Call) else None for arg in call.args
        ]
        for a, b in itertools.pairwise(layers):
            if a == "Linear" and b == "Linear":
                yield (
                    call,
                    "two Linear layers in a row: without an activation they collapse into one",
                )
                break


# -- data rules --------------------------------------------------------------------------------


def train_loader_not_shuffled(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        if callee_name(call) != "DataLoader" or not call.args:
            continue
        dataset = script.ctx.code(call.args[0].value).lower()
        statement = script.ctx.statement_of(call)
        assigned = script.ctx.code(statement).split("=", 1)[0].lower() if statement else ""
        if "train" not in dataset and "train" not in assigned:
            continue
        if find_arg(call, keyword="sampler") or find_arg(call, keyword="batch_sampler"):
            continue
        shuffle = find_arg(call, keyword="shuffle", position=2)
        if shuffle is None or script.ctx.code(shuffle.value) == "False":
            yield call, "training DataLoader without shuffle=True"


def identical_inputs_and_targets(script: Script) -> Iterator[tuple[Node, str]]:
    for assign in script.ctx.nodes(cst.Assign):
        target, value = assign.targets[0].target, assign.value
        if (
            isinstance(target, cst.Tuple)
            and isinstance(value, cst.Tuple)
            and len(value.elements) == 2
        ):
            names = [dotted_name(e.value) or "" for e in target.elements]
            codes = [script.ctx.code(e.value) for e in value.elements]
            if names[1] in TARGET_NAMES and codes[0] == codes[1]:
                yield (
                    assign,
                    f"{names[1]} is the same slice as {names[0]}: targets equal the inputs",
                )
    for function in script.ctx.nodes(cst.FunctionDef):
        values = {}
        for name in ("x", "y"):
            found = [
                v for where, v in script.assignments.get(name, []) if script.unit(where) is function
            ]
            if len(found) == 1:
                values[name] = script.ctx.code(found[0])
        if len(values) == 2 and values["x"] == values["y"]:
            yield function, "targets y are built exactly like inputs x: nothing to predict"


def leaky_split(script: Script) -> Iterator[tuple[Node, str]]:
    """``train, val = perm, perm[n:]``: the training part is the whole set."""
    for assign in script.ctx.nodes(cst.Assign):
        target, value = assign.targets[0].target, assign.value
        if not (isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple)):
            continue
        if len(target.elements) != len(value.elements):
            continue
        pairs = {
            dotted_name(t.value) or "": v.value for t, v in zip(target.elements, value.elements)
        }
        for name, expr in pairs.items():
            if "train" not in name.lower() or not isinstance(expr, cst.Name):
                continue
            for other, other_expr in pairs.items():
                if (
                    re.search("val|test", other.lower())
                    and isinstance(other_expr, cst.Subscript)
                    and dotted_name(other_expr.value) == expr.value
                ):
                    yield assign, f"{name} is all of {expr.value} while {other} is a slice of it"


def corrupted_labels(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        if callee_name(call) not in {"TensorDataset"} or len(call.args) < 2:
            continue
        labels = script.ctx.code(call.args[-1].value)
        if ".roll(" in labels:
            yield call, "labels are rolled against their inputs (off by one)"
        elif "randperm" in labels:
            yield call, "labels are permuted separately from their inputs"
        elif "randint_like" in labels or "randint(" in labels:
            yield call, "random labels are mixed into the training labels"
    for function in script.functions.get("__getitem__", []):
        for node in script.ctx.nodes_within(function, cst.Subscript):
            if re.fullmatch(r"self\.\w+\[\w+ [-+] 1\]", script.ctx.code(node)):
                yield node, "__getitem__ pairs an input with a neighbour's label"


def normalization_mismatch(script: Script) -> Iterator[tuple[Node, str]]:
    """Statistics from the full set, unused statistics, or a split left unnormalized."""
    normalized: dict[str, cst.CSTNode] = {}
    for assign in script.ctx.nodes(cst.Assign):
        name = dotted_name(assign.targets[0].target) or ""
        code = script.ctx.code(assign.value)
        match = re.fullmatch(r"\(\s*(\w+)\s*-\s*(\w+)\s*\)\s*/\s*\(?\s*(\w+)[^)]*\)?", code)
        if match and match.group(1) == name:
            normalized[name] = assign
    for name, value_sources in (("mean", "mean"), ("std", "std")):
        for where, value in script.assignments.get(name, []):
            if isinstance(value, cst.BinaryOperation):
                value = value.left
            if isinstance(value, cst.Call) and callee_name(value) == value_sources:
                source = (
                    dotted_name(value.func.value) if isinstance(value.func, cst.Attribute) else None
                )
                if (
                    source
                    and "train" not in source.lower()
                    and any("train" in n.lower() for n in normalized)
                ):
                    yield (
                        where,
                        f"{name} is computed on {source}, not on the training split: validation leaks in",
                    )
            if not re.search(rf"\b{name}\b", _source_after(script, where)):
                yield where, f"normalisation statistic {name} is computed but never applied"
    for name in normalized:
        if "train" not in name:
            continue
        sibling = next(
            (
                name.replace("train", other)
                for other in ("val", "valid", "test")
                if name.replace("train", other) in script.assignments
            ),
            None,
        )
        if sibling is not None and sibling not in normalized:
            yield normalized[name], f"{name} is normalised but {sibling} is not"


def _source_after(script: Script, node: Node) -> str:
    line = script.position(node)[0]
    return "\n".join(script.file.source.splitlines()[line:])


def mixed_batch_dims(script: Script) -> Iterator[tuple[Node, str]]:
    for call in script.calls:
        if method_name(call) not in {"reshape", "view"} or not isinstance(call.func, cst.Attribute):
            continue
        inner = call.func.value
        if isinstance(inner, cst.Call) and method_name(inner) in {
            "movedim",
            "transpose",
            "permute",
        }:
            first = inner.args[0].value if inner.args else None
            if first is not None and number_value(first) == 0:
                yield call, "batch dimension moved before a reshape: samples mix within the batch"


# -- checkpoint rules ----------------------------------------------------------------------------


def checkpoint_not_restored(script: Script) -> Iterator[tuple[Node, str]]:
    if not script.mentions(r"torch\.load\(") or not script.mentions(r"save"):
        return
    loads = " ".join(
        script.ctx.code(call.func)
        for call in script.calls
        if method_name(call) == "load_state_dict"
    )
    for role in ("optimizer", "scheduler", "model"):
        saved = script.mentions(rf"['\"]{role}['\"]\s*:")
        if saved and not re.search(rf"{role[:3]}\w*\.load_state_dict", loads):
            for call in script.calls:
                if callee_name(call) == "load" and "torch" in script.ctx.code(call.func):
                    yield call, f"the checkpoint holds the {role} state but it is never restored"
                    break


def best_state_alias(script: Script) -> Iterator[tuple[Node, str]]:
    for name, assigned in script.assignments.items():
        if "best" not in name.lower():
            continue
        for where, value in assigned:
            if isinstance(value, cst.Call) and method_name(value) == "state_dict":
                yield (
                    where,
                    f"{name} = ...state_dict() without a copy: it keeps tracking the live weights",
                )


@dataclass(frozen=True)
class _Config:
    """Thresholds of the numeric rules."""

    adaptive_lr_max: float = 0.05
    sgd_lr_max: float = 2.0
    dropout_max: float = 0.8


LintConfig = _Config()

RULES: tuple[Rule, ...] = (
    Rule("TW101", "gradient", "missing zero_grad()", ("drop_zero_grad",), missing_zero_grad),
    Rule("TW102", "gradient", "missing backward()", ("drop_backward",), missing_backward),
    Rule("TW103", "gradient", "missing optimizer step", ("drop_optimizer_step",), missing_step),
    Rule(
        "TW104", "gradient", "step before backward", ("step_before_backward",), step_before_backward
    ),
    Rule(
        "TW105",
        "gradient",
        "zero_grad between backward and step",
        ("zero_grad_after_backward",),
        zero_grad_between_backward_and_step,
    ),
    Rule(
        "TW106",
        "gradient",
        "step outside the backward loop",
        ("step_outside_batch_loop",),
        step_outside_backward_loop,
    ),
    Rule(
        "TW107",
        "gradient",
        "clipping before backward",
        ("clip_before_backward",),
        clip_before_backward,
    ),
    Rule(
        "TW108",
        "gradient",
        "clip threshold set but no clipping",
        ("drop_grad_clipping",),
        unused_clip_setting,
    ),
    Rule("TW109", "gradient", "loss detached from the graph", ("loss_from_item",), detached_loss),
    Rule(
        "TW110",
        "gradient",
        "loss tensor kept across steps",
        ("accumulate_loss_graph",),
        loss_kept_with_graph,
    ),
    Rule(
        "TW111",
        "gradient",
        "optimizer on a slice of the parameters",
        ("optimizer_partial_params",),
        partial_parameters,
    ),
    Rule("TW112", "gradient", "detach inside forward", ("detach_hidden",), detach_in_forward),
    Rule("TW113", "optim", "optimizer built inside the loop", (), optimizer_in_loop),
    Rule(
        "TW201",
        "mode",
        "eval() in the training loop without train()",
        ("drop_train_mode",),
        eval_without_train_in_loop,
    ),
    Rule(
        "TW202",
        "mode",
        "eval() before training",
        ("eval_mode_before_training",),
        eval_before_training,
    ),
    Rule("TW203", "mode", "eval forward without no_grad", ("drop_no_grad",), eval_without_no_grad),
    Rule(
        "TW204",
        "mode",
        "no_grad evaluation without eval()",
        ("drop_eval_mode",),
        no_grad_without_eval,
    ),
    Rule(
        "TW205",
        "mode",
        "validation on training data",
        ("validate_on_training_data",),
        evaluate_on_training_data,
    ),
    Rule(
        "TW301",
        "loss",
        "softmax/sigmoid before a logits loss",
        ("softmax_before_cross_entropy", "sigmoid_before_bce_with_logits"),
        probabilities_into_logits_loss,
    ),
    Rule(
        "TW302",
        "loss",
        "NLL without log_softmax",
        ("nll_without_log_softmax",),
        nll_without_log_softmax,
    ),
    Rule(
        "TW303",
        "loss",
        "MSE on a classification target",
        ("mse_for_classification",),
        mse_on_classes,
    ),
    Rule("TW304", "loss", "BCELoss on logits", ("bce_on_logits",), bce_on_logits),
    Rule(
        "TW305", "loss", "loss arguments swapped", ("swap_loss_arguments",), swapped_loss_arguments
    ),
    Rule("TW306", "loss", "reduction='sum'", ("reduction_sum",), reduction_sum),
    Rule(
        "TW307", "loss", "ignore_index on a real class", ("ignore_index_wrong",), wrong_ignore_index
    ),
    Rule("TW308", "loss", "float class targets", ("float_class_targets",), float_class_targets),
    Rule(
        "TW401",
        "device",
        "batch not moved to the device",
        ("drop_input_to_device", "drop_target_to_device"),
        batch_not_moved,
    ),
    Rule(
        "TW402",
        "device",
        "model not moved to the device",
        ("drop_model_to_device",),
        model_not_moved,
    ),
    Rule("TW403", "device", ".to() result discarded", (), discarded_to),
    Rule("TW501", "optim", "suspicious learning rate", ("scale_lr",), large_learning_rate),
    Rule("TW502", "optim", "scheduler step before optimizer step", (), scheduler_before_optimizer),
    Rule("TW601", "numerics", "Adam eps too small", ("adam_eps_too_small",), tiny_adam_eps),
    Rule("TW602", "numerics", "dropout too high", ("dropout_too_high",), high_dropout),
    Rule("TW603", "numerics", "log of softmax", ("naive_log_softmax",), naive_log_softmax),
    Rule(
        "TW604", "numerics", "loss in half precision", ("low_precision_loss",), low_precision_loss
    ),
    Rule("TW605", "numerics", "constant weight init", ("zero_init",), zero_weight_init),
    Rule("TW606", "numerics", "std without epsilon", ("missing_epsilon",), std_without_epsilon),
    Rule(
        "TW607",
        "numerics",
        "Linear after Linear",
        ("drop_activation",),
        dense_layers_without_activation,
    ),
    Rule(
        "TW701", "data", "training loader not shuffled", ("no_shuffle",), train_loader_not_shuffled
    ),
    Rule(
        "TW702",
        "data",
        "targets equal inputs",
        ("unshifted_lm_targets",),
        identical_inputs_and_targets,
    ),
    Rule("TW703", "data", "train split overlaps validation", ("train_val_leakage",), leaky_split),
    Rule(
        "TW704",
        "data",
        "labels corrupted",
        ("shift_labels", "shuffle_labels", "label_noise"),
        corrupted_labels,
    ),
    Rule(
        "TW705",
        "data",
        "normalisation mismatch",
        ("normalize_with_full_stats", "skip_val_normalization", "drop_input_normalization"),
        normalization_mismatch,
    ),
    Rule("TW706", "data", "batch dimension mixed", ("mix_batch_dims",), mixed_batch_dims),
    Rule(
        "TW801",
        "checkpoint",
        "checkpoint state not restored",
        (
            "resume_without_optimizer_state",
            "drop_scheduler_state_on_resume",
            "drop_load_state_dict",
        ),
        checkpoint_not_restored,
    ),
    Rule(
        "TW802",
        "checkpoint",
        "best state without a copy",
        ("best_state_without_copy",),
        best_state_alias,
    ),
)


def lint_source(
    source: str, path: str = "<string>", rules: Iterable[Rule] = RULES
) -> list[LintFinding]:
    """All findings for one file, sorted by position; raises MutationError on bad syntax."""
    script = Script(source, path)
    found: dict[tuple[int, int, str], LintFinding] = {}
    for rule in rules:
        for node, message in rule.check(script):
            line, column = script.position(node)
            found.setdefault(
                (line, column, rule.code), LintFinding(path, line, column, rule, message)
            )
    return [found[key] for key in sorted(found)]


@register
class TrainwreckLint(StaticDetector):
    name = "trainwreck-lint"
    summary = "static LibCST rules for training-loop bugs (flake8-style TW### codes)"
    timeout_s = 30.0

    def check_source(self, script: ScriptInput) -> list[Finding]:
        return [finding.to_finding() for finding in lint_source(script.source, script.path)]
