"""A switch whose mode no forward reads, in a trainer class (private to the mode package;
issue 29: fit() libraries such as TabNet's).

When every method of a class that runs its model (``self.network(x)``, a helper given
``self.network``, a name bound from such a call) first switches the model's mode itself,
or is only called after a switch of its caller, the mode a method leaves the model in at
its end is never read: the next forward is preceded by a switch. A switch at the end of a
method (nothing in the method runs the model after it), whose every call in the class is
followed by no such forward in its caller (nor anywhere in a loop around the call), is
then equivalent. The class's methods are read with those of its bases the project holds
and of its subclasses in the same folder. Not seen: a forward by the class's user after the
method returns, or by a callback the class hands itself to. A class whose model is run by
a method that sets no mode (a ``summary``, a hook registered on it) keeps every switch a
site.
"""

from __future__ import annotations

import posixpath

import libcst as cst

from mutations.mode._final import _INERT, _SAVERS
from mutator.context import Context
from mutator.semantics import dotted_name, loops_around, starts_before
from mutator.semantics.models import class_named
from mutator.semantics.modules import imported_definition

_NO_FORWARD = _INERT | {"load_state_dict", "named_modules", "named_children", "zero_grad"}
_MAX_DEPTH = 3
# Methods of the library bases skipped above that never run a model.
_LIBRARY_METHODS = frozenset({"get_params", "set_params"})
UNREAD = (
    "equivalent: no method of the class runs the model after this switch before a method "
    "that sets the mode itself"
)


Method = tuple[str, cst.FunctionDef, Context]


def _own_methods(cls: cst.ClassDef, ctx: Context) -> list[Method]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return [(s.name.value, s, ctx) for s in body if isinstance(s, cst.FunctionDef)]


def _family(cls: cst.ClassDef, ctx: Context) -> list[Method] | None:
    """The methods of ``cls``, of its bases the project holds, and of its subclasses in the
    files of its folder (``TabNetClassifier(TabModel)`` in ``tab_model.py``); None when a
    base is neither ``object``, a torch or sklearn class, nor one the project holds."""
    found = _own_methods(cls, ctx)
    for base in cls.bases:
        name = dotted_name(base.value) or ""
        if name in ("object", "ABC") or name.startswith(("nn.", "torch.", "BaseEstimator")):
            continue
        local = class_named(ctx, name)
        held = (local, ctx) if local is not None else imported_definition(base.value, ctx)
        if held is None or not isinstance(held[0], cst.ClassDef):
            return None
        found += _own_methods(held[0], held[1])  # one level: a base's bases are not read
    project = ctx.project
    if project is not None:
        for path in project.files_in(posixpath.dirname(ctx.path)):
            other = project.context(path) if path.endswith(".py") else None
            for sub in other.nodes(cst.ClassDef) if other is not None else ():
                if any(
                    (dotted_name(b.value) or "").rsplit(".", 1)[-1] == cls.name.value
                    for b in sub.bases  # type: ignore[attr-defined]
                ):
                    found += _own_methods(sub, other)  # type: ignore[arg-type]
    return found


def _runs_model(node: cst.CSTNode, ctx: Context) -> bool:
    """Is ``node`` (an occurrence of the model's code) a forward, or a hand-off of it?"""
    chain = node
    while isinstance(ctx.parent(chain), cst.Attribute) and ctx.parent(chain).value is chain:  # type: ignore[union-attr]
        chain = ctx.parent(chain)  # type: ignore[assignment]
    parent = ctx.parent(chain)
    if isinstance(parent, cst.Call) and parent.func is chain:
        return chain is node or chain.attr.value not in _NO_FORWARD  # type: ignore[attr-defined]
    if isinstance(parent, cst.Arg):
        if chain is not node:
            return False  # ``self.network.input_dim``: a setting read, not the model
        call = ctx.parent(parent)
        name = dotted_name(call.func) if isinstance(call, cst.Call) else None  # type: ignore[union-attr]
        return name is None or name.rsplit(".", 1)[-1] not in _SAVERS
    return isinstance(parent, (cst.Assign, cst.AnnAssign, cst.Return, cst.Element, cst.Yield))


def _uses(function: cst.FunctionDef, model: str, ctx: Context) -> list[cst.CSTNode]:
    """The nodes of ``function`` that run the model: direct uses, then the names bound
    from them (``forward_fn = helper.partial_forward(self.model)``)."""
    direct = [
        n
        for n in ctx.nodes_within(function, cst.Attribute)
        if ctx.code(n) == model and _runs_model(n, ctx)
    ]
    aliases = set()
    for use in direct:
        if isinstance(ctx.parent(use), cst.Call):
            continue  # a forward's result, or a method's: outputs, not the model
        statement = ctx.statement_of(use)
        for assign in ctx.nodes_within(statement, cst.Assign) if statement is not None else ():
            aliases |= {
                t.target.value  # type: ignore[attr-defined]
                for t in assign.targets  # type: ignore[attr-defined]
                if isinstance(t.target, cst.Name)
            }
    named = [
        n
        for n in ctx.nodes_within(function, cst.Name)
        if n.value in aliases and not isinstance(ctx.parent(n), cst.AssignTarget)  # type: ignore[attr-defined]
    ]
    return direct + named


def _stored_names(function: cst.FunctionDef, ctx: Context) -> list[cst.Name]:
    """``x`` of every ``self.x = ...`` in ``function`` and of its class's field lines."""
    found = [
        t.target.attr  # type: ignore[attr-defined]
        for t in ctx.nodes_within(function, cst.AssignTarget)
        if isinstance(t.target, cst.Attribute) and dotted_name(t.target.value) == "self"  # type: ignore[attr-defined]
    ]
    cls = ctx.parent(ctx.parent(function))
    body = cls.body.body if isinstance(cls, cst.ClassDef) else ()  # type: ignore[union-attr]
    for line in body:
        for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                found.append(small.target)
    return found


class _Reading:
    """The methods of a class family, read for one model."""

    def __init__(self, methods: list[Method], model: str) -> None:
        from mutations.mode._shared import model_mode_statement, switched_model

        self.methods, self.model = methods, model
        names = {name for name, _, _ in methods}
        self.uses = {id(f): _uses(f, model, ctx) for _, f, ctx in methods}
        self.leading: dict[int, cst.CSTNode | None] = {}
        for _, function, ctx in methods:
            self.leading[id(function)] = None
            body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
            for statement in body:
                switch = model_mode_statement(statement, ctx, "train") or model_mode_statement(
                    statement, ctx, "eval"
                )
                if switch is not None and ctx.code(switched_model(switch, ctx)[0]) == model:
                    self.leading[id(function)] = statement
                    break
                if any(ctx.within(statement, u) for u in self.uses[id(function)]):
                    break
        # attributes the family stores (``self.loss_fn = ...``, dataclass fields): callables
        # the user passes, not methods that could run the model
        stored = {
            t.value  # type: ignore[attr-defined]
            for _, f, ctx in methods
            for t in _stored_names(f, ctx)
        }
        # (caller, call) per method name
        self.calls: dict[str, list[tuple[Method, cst.Call]]] = {name: [] for name in names}
        self.referenced: set[str] = set()
        for entry in methods:
            _, function, ctx = entry
            for attr in ctx.nodes_within(function, cst.Attribute):
                if dotted_name(attr.value) != "self":  # type: ignore[attr-defined]
                    continue
                callee, parent = attr.attr.value, ctx.parent(attr)  # type: ignore[attr-defined]
                called = isinstance(parent, cst.Call) and parent.func is attr  # type: ignore[union-attr]
                if callee in names:
                    if called:
                        self.calls[callee].append((entry, parent))  # type: ignore[arg-type]
                    else:
                        self.referenced.add(callee)  # handed on: called from anywhere
                elif called and callee not in stored and callee not in _LIBRARY_METHODS:
                    self.uses[id(function)].append(parent)  # a method this does not read

    def _named(self, name: str) -> list[Method]:
        return [m for m in self.methods if m[0] == name]

    def _covered(self, method: Method, depth: int = 0) -> bool:
        """Does every forward in ``method`` follow a switch (its own, or its callers')?"""
        name, function, _ = method
        if not self.uses[id(function)] or self.leading[id(function)] is not None:
            return True
        if depth > _MAX_DEPTH or name in self.referenced or not self.calls[name]:
            return False
        return all(
            self.leading[id(owner[1])] is not None
            and starts_before(self.leading[id(owner[1])], call, owner[2])  # type: ignore[arg-type]
            and self._covered(owner, depth + 1)
            for owner, call in self.calls[name]
        )

    def _runs_in(self, scope: cst.CSTNode, owner: Method, after: cst.CSTNode | None) -> bool:
        """Is the model run in ``scope`` of ``owner`` (after ``after``, when given) without a
        switch first: a use, or a call of a method that sets no mode itself?"""
        _, function, ctx = owner
        found = [u for u in self.uses[id(function)] if ctx.within(scope, u)]
        for name, calls in self.calls.items():
            if any(
                self.uses[id(f)] and self.leading[id(f)] is None for _, f, _ in self._named(name)
            ):
                found += [c for o, c in calls if o is owner and ctx.within(scope, c)]
        return any(after is None or starts_before(after, n, ctx) for n in found)

    def unread_after(self, at: cst.CSTNode, owner: Method, depth: int = 0) -> bool:
        """Is the mode at ``at`` (in ``owner``) read by no forward before a switch?"""
        name, function, ctx = owner
        if depth > _MAX_DEPTH or name in self.referenced or self._runs_in(function, owner, at):
            return False
        if any(self._runs_in(loop, owner, None) for loop in loops_around(at, ctx)):
            return False
        return all(self.unread_after(call, caller, depth + 1) for caller, call in self.calls[name])

    def all_covered(self) -> bool:
        return all(self._covered(method) for method in self.methods)


def mode_left_unread(statement: cst.CSTNode, model: cst.BaseExpression, ctx: Context) -> bool:
    """Is ``statement`` (a switch of ``self.<model>`` in a method) one whose mode no forward
    reads (see the module docstring)?"""
    code = ctx.code(model)
    if not code.startswith("self.") or dotted_name(model) is None:
        return False
    function = ctx.enclosing_function(statement)
    cls = ctx.parent(ctx.parent(function)) if function is not None else None
    if not isinstance(cls, cst.ClassDef):
        return False
    if any(ctx.enclosing_function(loop) is function for loop in loops_around(statement, ctx)):
        return False
    methods = _family(cls, ctx)
    if methods is None:
        return False
    reading = _Reading(methods, code)
    owner = next(m for m in methods if m[1] is function)
    return reading.all_covered() and reading.unread_after(statement, owner)
