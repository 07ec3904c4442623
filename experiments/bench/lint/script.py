"""The facts every lint rule reads: one parsed file, its calls by kind, its assignments.

The analysis is intra-file and name based: a call's "scope" is its innermost ``for`` /
``while`` loop inside its function (else the function, else the module), and order rules
compare calls within one scope. Local functions are followed by name so that
``for epoch: train_one_epoch(...); evaluate(...)`` is seen as one epoch loop. What torch
names mean (losses, optimizers, grad mode) comes from the shared semantics layer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property

import libcst as cst

from experiments.bench.lint.project import Project
from mutator.context import Context
from mutator.engine import SourceFile
from mutator.semantics import (
    callee_name,
    dotted_name,
    find_arg,
    functional_loss_kind,
    loss_call_kind,
    method_name,
    receiver_kind,
    resolve,
)

Node = cst.CSTNode
Scope = cst.CSTNode  # a For/While loop, a FunctionDef or the Module
CLIP_CALLS = {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm"}


class Script:
    """One parsed file plus the call facts the rules share."""

    def __init__(self, source: str, path: str) -> None:
        self.path = path
        self._units: dict[int, Scope] = {}  # unit() memo, by node id
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
        # By enclosing function (or module), built once: rules that asked each call's or
        # assignment's unit per function or per eval() made linting quadratic.
        self._calls_by_unit: dict[int, list[cst.Call]] = {}
        for call in self.calls:
            self._calls_by_unit.setdefault(id(self.unit(call)), []).append(call)
        self._assignments_by_unit: dict[tuple[str, int], list[tuple[Node, cst.BaseExpression]]] = {}
        for name, assigned in self.assignments.items():
            for where, value in assigned:
                self._assignments_by_unit.setdefault((name, id(self.unit(where))), []).append(
                    (where, value)
                )

    def _bind_constructor_arguments(self) -> None:
        """``self.optimizer = optimizer`` in ``__init__`` takes the value passed at
        ``Trainer(model, torch.optim.SGD(...))``: trainer classes get their optimizer that way."""
        # Indexed once (inits by class, ``self.x = name`` assignments, calls by callee):
        # scanning them all per class made this quadratic in the file.
        inits: dict[int, cst.FunctionDef] = {}
        for function in self.functions.get("__init__", []):
            inits.setdefault(id(self.ctx.parent(self.ctx.parent(function))), function)
        self_names = [
            (target, where, value)
            for target, assigned in self.assignments.items()
            if target.startswith("self.")
            for where, value in assigned
            if isinstance(value, cst.Name)
        ]
        callers: dict[str | None, list[cst.Call]] = {}
        for call in self.calls:
            callers.setdefault(callee_name(call), []).append(call)
        for cls in self.ctx.nodes(cst.ClassDef):
            init = inits.get(id(cls))
            if init is None:
                continue
            params = [p.name.value for p in init.params.params][1:]
            stored = {}
            for target, where, value in self_names:
                if value.value in params and self.ctx.within(init, where):
                    stored[value.value] = target
            for call in callers.get(cls.name.value, []):
                for index, param in enumerate(params):
                    arg = find_arg(call, keyword=param, position=index)
                    if arg is not None and param in stored:
                        self.assignments.setdefault(stored[param], []).append((call, arg.value))
                        if isinstance(arg.value, cst.Name):  # later classes see it, as before
                            self_names.append((stored[param], call, arg.value))

    def _record(self, target: cst.BaseExpression, value: cst.BaseExpression, where: Node) -> None:
        if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple):
            if len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    self._record(t.value, v.value, where)
            return
        name = dotted_name(target)
        if name is not None:
            self.assignments.setdefault(name, []).append((where, value))

    @cached_property
    def project(self) -> Project:
        """The local modules this script imports (``model.py`` beside ``train.py``)."""
        return Project(self.ctx, self.path)

    def qualified(self, node: Node) -> set[str]:
        return set(resolve(node, self.ctx, strict=False).names)

    # -- positions and structure ------------------------------------------------------
    def position(self, node: Node) -> tuple[int, int]:
        start = self.ctx.position(node).start
        return start.line, start.column + 1

    def unit(self, node: Node) -> Scope:
        """The function ``node`` is in (the module outside any function); memoised."""
        found = self._units.get(id(node))
        if found is None:
            found = self._units[id(node)] = self.ctx.enclosing_function(node) or self.ctx.module
        return found

    def calls_in_unit(self, unit: Scope) -> list[cst.Call]:
        """The calls whose ``unit`` is ``unit``, in document order."""
        return self._calls_by_unit.get(id(unit), [])

    def assignments_in_unit(self, name: str, unit: Scope) -> list[tuple[Node, cst.BaseExpression]]:
        """``assignments[name]`` made in ``unit`` itself, in document order."""
        return self._assignments_by_unit.get((name, id(unit)), [])

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
        if within is None:
            return [call for call in self.calls if self._kinds[id(call)] == kind]
        # The calls inside ``within`` by position (bisect), not every call's ancestors:
        # asking that of each loop and function made linting quadratic in script size.
        inside = self.ctx.nodes_within(within, cst.Call)
        return [call for call in inside if self._kinds[id(call)] == kind]

    def direct_calls(self, kind: str, unit: Scope) -> list[cst.Call]:
        """Calls of ``kind`` in ``unit`` itself, not in functions nested inside it."""
        return [call for call in self.calls_of(kind, unit) if self.unit(call) is unit]

    # -- what a call does ----------------------------------------------------------------
    def _classify(self, call: cst.Call) -> str | None:
        method = method_name(call)
        if method == "zero_grad":
            return "zero_grad"
        if method == "backward" or self.qualified(call.func) & {"torch.autograd.backward"}:
            return "backward"
        if method == "step" and isinstance(call.func, cst.Attribute):
            return self._step_kind(call, call.func)
        if method == "eval" and not call.args:
            return "eval"
        if method == "train":
            return self._train_kind(call)
        if callee_name(call) in CLIP_CALLS:
            return "clip"
        if method == "to" or method == "cuda":
            return "to_device"
        return None

    def _step_kind(self, call: cst.Call, func: cst.Attribute) -> str | None:
        """``opt_step`` for an optimizer's (or a GradScaler's) step, ``sched_step`` for an LR
        scheduler's, by what the receiver was built from, else by its name."""
        kind = receiver_kind(func.value, self.ctx)
        if kind == "scheduler":
            return "sched_step"
        if kind in ("optimizer", "scaler") or (kind is None and call.args):
            return "opt_step"  # optimizer.step(closure) of an optimizer we cannot name
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
        for call in self.ctx.nodes_within(root, cst.Call):  # by position, see calls_of
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
            for where, value in self.assignments_in_unit(expr.value, unit)
            if self.before(where, at)
        ]
        return candidates[-1] if candidates else expr

    def loss_kind(self, call: cst.Call) -> str | None:
        """The loss class a call computes (``CrossEntropyLoss`` also for ``F.cross_entropy``)."""
        return loss_call_kind(call, self.ctx)

    def loss_label(self, call: cst.Call) -> str:
        """The loss as the script spells it, for messages: ``cross_entropy`` or ``NLLLoss``."""
        if functional_loss_kind(call, self.ctx) is not None:
            return callee_name(call) or ""
        return self.loss_kind(call) or ""

    def loss_calls(self) -> Iterator[tuple[cst.Call, str]]:
        for call in self.calls:
            kind = self.loss_kind(call)
            if kind is not None and call.args:
                yield call, kind

    def mentions(self, pattern: str) -> bool:
        return re.search(pattern, self.file.source) is not None
