"""Mode bugs: train/eval mode switches, gradient tracking during evaluation, evaluation data.

The private helpers at the top (what a receiver was assigned from, is it a model, which
names a scope binds) are shared with ``mutations.device`` and ``mutations.optim``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from mutator.context import Context
from mutator.operator import Example, Operator, Replacement
from mutator.patterns import callee_name, dotted_name, expression_call, method_name


def _qualified_names(node: cst.CSTNode, ctx: Context) -> set[str]:
    """``ctx.qualified_names``, tolerating libcst's lazy metadata values.

    On libcst >= 1.2 the QualifiedNameProvider stores ``LazyValue``s, which
    ``Context.qualified_names`` iterates without calling (TypeError). Until the engine
    unwraps them, do it here, with exactly the engine's semantics.
    """
    try:
        return ctx.qualified_names(node)
    except TypeError:
        lazy = ctx._metadata[QualifiedNameProvider].get(node, set())
        return {qualified.name for qualified in lazy()}


# -- what a name was assigned from ---------------------------------------------------------


def _target_names(target: cst.BaseExpression) -> Iterator[str]:
    """Dotted names bound by an assignment target (``a``, ``self.a``, ``a, (b, c)``)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)
    else:
        name = dotted_name(target)
        if name is not None:
            yield name


def _assigned_values(name: str, ctx: Context) -> list[cst.BaseExpression]:
    """Values assigned to ``name`` (a dotted name) by single-target assignments anywhere."""
    values: list[cst.BaseExpression] = []
    for assign in ctx.nodes(cst.Assign):
        if any(dotted_name(target.target) == name for target in assign.targets):
            values.append(assign.value)
    for assign in ctx.nodes(cst.AnnAssign):
        if assign.value is not None and dotted_name(assign.target) == name:
            values.append(assign.value)
    return values


def _unwrap_calls(expr: cst.BaseExpression, methods: frozenset[str]) -> cst.BaseExpression:
    """``Net().to(device).float()`` -> ``Net()``: strip chained calls of ``methods``."""
    while isinstance(expr, cst.Call) and method_name(expr) in methods:
        assert isinstance(expr.func, cst.Attribute)
        expr = expr.func.value
    return expr


# -- is this expression a model (an nn.Module)? ----------------------------------------------

# Calls that return the module they are called on, so ``Net().to(device)`` is still a Net.
_MODULE_PASSTHROUGH = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "requires_grad_"}
)
_MODEL_NAME = re.compile(
    r"model|net|module|encoder|decoder|classifier|backbone|generator|discriminator|critic|"
    r"actor|policy|student|teacher|transformer|mlp|cnn|rnn|lstm|gpt|bert|vae",
    re.IGNORECASE,
)
_NOT_MODEL_NAME = re.compile(
    r"trainer|loader|data|optim|sched|criterion|loss|metric|logger|writer|scaler",
    re.IGNORECASE,
)
_MODULE_FACTORIES = ("torch.compile", "timm.create_model")


def _class_is_module(name: str, ctx: Context, depth: int) -> bool | None:
    """Does the class ``name`` defined in this module subclass ``nn.Module``?"""
    classes = [c for c in ctx.nodes(cst.ClassDef) if c.name.value == name]
    if not classes:
        return None
    for base in classes[0].bases:
        resolved = _qualified_names(base.value, ctx)
        if any(q.startswith("torch.nn.") or q.endswith("LightningModule") for q in resolved):
            return True
        base_name = dotted_name(base.value)
        if not resolved and base_name and base_name.endswith("Module"):
            return True  # ``nn`` came from somewhere we cannot see
        if base_name and depth < 4 and _class_is_module(base_name, ctx, depth + 1):
            return True
    return False


def _call_is_module(call: cst.Call, ctx: Context, depth: int) -> bool | None:
    """Is the value of ``call`` a module? None when nothing can be told."""
    resolved = _qualified_names(call.func, ctx)
    for qualified in resolved:
        if qualified.startswith("torch.nn."):
            tail = qualified.rsplit(".", 1)[-1]
            # nn.Linear, nn.Sequential: yes; F.relu, nn.init.*, nn.Parameter, a loss: no.
            return tail[:1].isupper() and not tail.endswith("Loss") and "Parameter" not in tail
        if qualified in _MODULE_FACTORIES or qualified.startswith("torchvision.models."):
            return True
    callee = dotted_name(call.func)
    if callee is not None and "." not in callee:
        local = _class_is_module(callee, ctx, depth)
        if local is not None:
            return local
    if any(q.startswith("torch.") for q in resolved):
        return False  # torch.Generator(), torch.optim.Adam(...): resolved, and not a model
    return None


def _annotation_is_module(name: str, use: cst.CSTNode, ctx: Context) -> bool:
    """``def f(model: nn.Module)``: the parameter's annotation says so."""
    function = ctx.enclosing_function(use)
    if function is None:
        return False
    for param in ctx.nodes_within(function.params, cst.Param):
        if param.name.value == name and param.annotation is not None:
            resolved = _qualified_names(param.annotation.annotation, ctx)
            if any(q.startswith("torch.nn.") for q in resolved):
                return True
    return False


def _value_is_module(expr: cst.BaseExpression, ctx: Context, depth: int = 0) -> bool | None:
    """True/False when assignments, imports or class bases tell; None when they do not."""
    if depth > 3:
        return None
    expr = _unwrap_calls(expr, _MODULE_PASSTHROUGH)
    if isinstance(expr, cst.Call):
        return _call_is_module(expr, ctx, depth)
    name = dotted_name(expr)
    if name is None:
        return None
    if name == "self":
        owner = ctx.enclosing(expr, cst.ClassDef)
        if not isinstance(owner, cst.ClassDef):
            return None
        return bool(_class_is_module(owner.name.value, ctx, depth))
    verdicts = [
        _value_is_module(value, ctx, depth + 1)
        for value in _assigned_values(name, ctx)
        if value is not expr
    ]
    if True in verdicts:
        return True
    if verdicts and all(verdict is False for verdict in verdicts):
        return False
    if "." not in name and _annotation_is_module(name, expr, ctx):
        return True
    return None


def _is_model(expr: cst.BaseExpression, ctx: Context) -> bool:
    """Is ``expr`` (a receiver such as ``model``, ``self.net``, ``Net()``) a model?

    Assignments and class bases decide first; the name decides when they cannot
    (a function parameter, a model built by a helper imported from elsewhere).
    """
    verdict = _value_is_module(expr, ctx)
    if verdict is not None:
        return verdict
    name = dotted_name(_unwrap_calls(expr, _MODULE_PASSTHROUGH))
    if name is None:
        return False
    last = name.rsplit(".", 1)[-1]
    return bool(_MODEL_NAME.search(last)) and not _NOT_MODEL_NAME.search(last)


# -- train/eval mode calls -----------------------------------------------------------------


def _is_true(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _mode_set(call: cst.Call) -> str | None:
    """Mode set by ``m.train()``/``m.train(True)`` ("train") or ``m.eval()``/``m.train(False)``."""
    method = method_name(call)
    if method == "eval" and not call.args:
        return "eval"
    if method != "train" or len(call.args) > 1:
        return None
    if not call.args:
        return "train"
    arg = call.args[0]
    if arg.keyword is not None and arg.keyword.value != "mode":
        return None
    if _is_true(arg.value):
        return "train"
    if _is_false(arg.value):
        return "eval"
    return None


def _model_mode_statement(node: cst.CSTNode, ctx: Context, mode: str) -> cst.Call | None:
    """The call of a statement line that puts a model into ``mode``, else None."""
    call = expression_call(node)
    if call is None or _mode_set(call) != mode:
        return None
    assert isinstance(call.func, cst.Attribute)
    return call if _is_model(call.func.value, ctx) else None


def _loops_around(node: cst.CSTNode, ctx: Context) -> list[cst.CSTNode]:
    return [a for a in ctx.ancestors(node) if isinstance(a, (cst.For, cst.While))]


def _can_run_before(earlier: cst.CSTNode, later: cst.CSTNode, ctx: Context) -> bool:
    """Can ``earlier`` execute before ``later``? Only straight-line code after ``later`` in the
    same scope, outside any loop they share, cannot (a final test after training)."""
    if ctx.enclosing_function(earlier) is not ctx.enclosing_function(later):
        return True
    if ctx.position(earlier).start.line < ctx.position(later).start.line:
        return True
    shared = {id(loop) for loop in _loops_around(earlier, ctx)}
    return any(id(loop) in shared for loop in _loops_around(later, ctx))


class DropTrainMode(Operator):
    """Delete ``model.train()``.

    Bug: the model is never switched back to training mode after an evaluation pass
    (``model.eval()``), so every later training forward runs in eval mode. Impact:
    dropout is off (no regularisation) and BatchNorm normalises with its running
    statistics instead of batch statistics and stops updating them; training silently
    degrades, often with a larger train/val gap or, with BatchNorm, a worse optimum. The
    site exists only where an ``eval()`` can run before the deleted call, since otherwise
    the model is still in its initial training mode and nothing changes. Fix: call
    ``model.train()`` at the start of every training epoch (or training step). Check:
    assert ``model.training`` inside the training step, or log the fraction of training
    forwards run in eval mode (a forward hook reading ``module.training``).
    """

    name = "drop_train_mode"
    category = "mode"
    summary = "Remove model.train(): after the first evaluation the model trains in eval mode."
    expected = "degrades"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "for epoch in range(3):\n    model.train()\n    fit(model)\n"
                "    model.eval()\n    test(model)\n"
            ),
            after="for epoch in range(3):\n    fit(model)\n    model.eval()\n    test(model)\n",
        ),
        Example(
            before=(
                "class T:\n    def fit(self, loader):\n        self.model.train()\n"
                "        self.step(loader)\n\n    def evaluate(self):\n        self.model.eval()\n"
            ),
            after=(
                "class T:\n    def fit(self, loader):\n        self.step(loader)\n\n"
                "    def evaluate(self):\n        self.model.eval()\n"
            ),
        ),
        Example(
            before=(
                "import torch.nn as nn\nm = nn.Sequential(nn.Linear(2, 2))\n"
                "def fit():\n    m.train(True)\ndef test():\n    m.eval()\n"
            ),
            after=(
                "import torch.nn as nn\nm = nn.Sequential(nn.Linear(2, 2))\n"
                "def fit():\n    pass\ndef test():\n    m.eval()\n"
            ),
        ),
    )
    non_examples = (
        # No eval() anywhere: the model is in training mode anyway.
        "model.train()\nfor x in loader:\n    step(model, x)\n",
        # The only eval() is a final test after training.
        "model.train()\nfor x in loader:\n    step(model, x)\nmodel.eval()\ntest(model)\n",
        # A trainer's train() method is not nn.Module.train().
        "trainer = Trainer(model)\ntrainer.train()\nmodel.eval()\n",
        "model.train(False)\nmodel.eval()\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if _model_mode_statement(node, ctx, "train") is None:
            return False
        return any(
            _model_mode_statement(other, ctx, "eval") is not None
            and _can_run_before(other, node, ctx)
            for other in ctx.nodes(cst.SimpleStatementLine)
        )

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()


class EvalModeBeforeTraining(Operator):
    """Change ``model.train()`` into ``model.eval()``.

    Bug: the model is put in evaluation mode where training should start (the classic
    ``model.eval()  # set up before training``). Impact: every training forward runs with
    dropout disabled and BatchNorm using (and no longer updating) its running statistics;
    no error is raised, the loss still falls, but regularisation is gone and BatchNorm
    models train against stale statistics, so validation results degrade. Fix: call
    ``model.train()`` before training and ``model.eval()`` only around evaluation. Check:
    assert ``model.training`` in the training step; log the eval-mode fraction of
    training forwards; compare train/val curves (the gap grows).
    """

    name = "eval_mode_before_training"
    category = "mode"
    summary = "Replace model.train() by model.eval(): the model trains in evaluation mode."
    expected = "degrades"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before="model.train()\nfor x, y in loader:\n    step(model, x, y)\n",
            after="model.eval()\nfor x, y in loader:\n    step(model, x, y)\n",
        ),
        Example(
            before="def fit(self):\n    self.model.train(mode=True)\n",
            after="def fit(self):\n    self.model.eval()\n",
        ),
    )
    non_examples = (
        "trainer.train()\n",
        "model.eval()\n",
        "model.train(False)\n",
        "x = model.train()\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return _model_mode_statement(node, ctx, "train") is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        call = _model_mode_statement(node, ctx, "train")
        assert call is not None and isinstance(call.func, cst.Attribute)
        return {
            call: call.with_changes(func=call.func.with_changes(attr=cst.Name("eval")), args=())
        }


class DropEvalMode(Operator):
    """Delete ``model.eval()`` before evaluation.

    Bug: validation runs with the model still in training mode. Impact: dropout stays
    active, so validation metrics are noisy and pessimistic; BatchNorm normalises with
    validation-batch statistics and updates its running statistics on validation data,
    leaking it into the model used later. Model selection and early stopping then act
    on wrong numbers. Fix: call ``model.eval()`` before every evaluation pass (and
    ``model.train()`` after it). Check: evaluate the same batch twice and compare the
    outputs (they differ with dropout active), or assert ``not model.training`` in the
    evaluation function.
    """

    name = "drop_eval_mode"
    category = "mode"
    summary = "Remove model.eval(): evaluation runs with dropout on and BatchNorm updating."
    expected = "degrades"
    node_types = (cst.SimpleStatementLine,)
    examples = (
        Example(
            before=(
                "def evaluate(model, loader):\n    model.eval()\n"
                "    with torch.no_grad():\n        return score(model, loader)\n"
            ),
            after=(
                "def evaluate(model, loader):\n"
                "    with torch.no_grad():\n        return score(model, loader)\n"
            ),
        ),
        Example(
            before="net.train(False)\nacc = test(net)\n",
            after="acc = test(net)\n",
        ),
    )
    non_examples = (
        "model.train()\n",
        "result = evaluator.eval()\n",
        "expr.eval()\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return _model_mode_statement(node, ctx, "eval") is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
        return cst.RemoveFromParent()


# -- gradient tracking during evaluation ------------------------------------------------------

_NO_GRAD = frozenset(
    {"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
)
_INFERENCE_MODE = frozenset({"torch.inference_mode", "torch.autograd.grad_mode.inference_mode"})
_SET_GRAD_ENABLED = frozenset(
    {
        "torch.set_grad_enabled",
        "torch.autograd.set_grad_enabled",
        "torch.autograd.grad_mode.set_grad_enabled",
    }
)


def _resolves_to(expr: cst.BaseExpression, ctx: Context, names: frozenset[str]) -> bool:
    resolved = _qualified_names(expr, ctx)
    if resolved:
        return bool(resolved & names)
    tail = dotted_name(expr)
    return tail is not None and tail.rsplit(".", 1)[-1] in {n.rsplit(".", 1)[-1] for n in names}


def _disables_grad(expr: cst.BaseExpression, ctx: Context) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``
    (and, for decorators, the uncalled ``torch.no_grad``)."""
    if not isinstance(expr, cst.Call):
        return _resolves_to(expr, ctx, _NO_GRAD | _INFERENCE_MODE)
    if _resolves_to(expr.func, ctx, _NO_GRAD):
        return not expr.args
    if _resolves_to(expr.func, ctx, _INFERENCE_MODE):
        return not expr.args or _is_true(expr.args[0].value)
    if _resolves_to(expr.func, ctx, _SET_GRAD_ENABLED):
        return len(expr.args) == 1 and _is_false(expr.args[0].value)
    return False


def _touches_parameters(root: cst.CSTNode, ctx: Context) -> bool:
    """Does ``root`` edit weights or gradients in place (EMA, manual SGD, init, clipping)?

    Such blocks need ``no_grad`` to run at all; dropping it there is a crash, not the
    evaluation bug this module is about.
    """
    if any(a.attr.value == "grad" for a in ctx.nodes_within(root, cst.Attribute)):
        return True  # p -= lr * p.grad
    for target in ctx.nodes_within(root, cst.AssignTarget):
        if isinstance(target.target, cst.Attribute) and target.target.attr.value == "data":
            return True  # w.data = ...
    for call in ctx.nodes_within(root, cst.Call):
        method = method_name(call)
        if method and method.endswith("_") and not method.startswith("_"):
            return True  # in-place tensor method: p.mul_(), w.copy_(), nn.init.zeros_(w)
    return False


class DropNoGrad(Operator):
    """Unwrap ``with torch.no_grad():`` (or ``torch.inference_mode()``,
    ``torch.set_grad_enabled(False)``) around evaluation, or delete ``@torch.no_grad()``.

    Bug: the evaluation forward records an autograd graph. Impact: activations of every
    validation batch are kept for a backward pass that never comes, so evaluation is
    slower and uses much more memory (an out-of-memory error on a GPU with a large
    validation set, or memory growth if a loss tensor is accumulated without
    ``.item()``); metrics are unchanged. Blocks that edit weights in place are not sites
    (without ``no_grad`` they raise instead). Fix: wrap evaluation in
    ``with torch.no_grad():`` (or ``torch.inference_mode()``) or decorate the evaluation
    function. Check: memory watch during validation, or assert
    ``not torch.is_grad_enabled()`` / ``not out.requires_grad`` in the evaluation code.
    """

    name = "drop_no_grad"
    category = "mode"
    summary = "Remove torch.no_grad() around evaluation: the eval forward builds a graph."
    expected = "cost_only"
    node_types = (cst.With, cst.Decorator)
    examples = (
        Example(
            before=(
                "import torch\nmodel.eval()\n# validation\nwith torch.no_grad():\n"
                "    out = model(x)\n    acc = (out.argmax(1) == y).float().mean()\nprint(acc)\n"
            ),
            after=(
                "import torch\nmodel.eval()\n# validation\nout = model(x)\n"
                "acc = (out.argmax(1) == y).float().mean()\nprint(acc)\n"
            ),
        ),
        Example(
            before=(
                "import torch\n\nclass T:\n    @torch.no_grad()\n    def evaluate(self, x):\n"
                "        return self.model(x)\n"
            ),
            after="import torch\n\nclass T:\n    def evaluate(self, x):\n        return self.model(x)\n",
        ),
        Example(
            before=(
                "from torch import inference_mode\ndef test(m, xs):\n"
                "    with inference_mode(), autocast():\n        return [m(x) for x in xs]\n"
            ),
            after=(
                "from torch import inference_mode\ndef test(m, xs):\n"
                "    with autocast():\n        return [m(x) for x in xs]\n"
            ),
        ),
        Example(
            before="import torch\nwith torch.set_grad_enabled(False): val = model(x)\n",
            after="import torch\nval = model(x)\n",
        ),
    )
    non_examples = (
        # An EMA update needs no_grad to run at all.
        "import torch\nwith torch.no_grad():\n    for e, p in zip(ema.parameters(), model.parameters()):\n"
        "        e.mul_(0.99).add_(p, alpha=0.01)\n",
        "import torch\nwith torch.no_grad():\n    for p in params:\n        p -= lr * p.grad\n",
        "import torch\nwith torch.set_grad_enabled(phase == 'train'):\n    out = model(x)\n",
        "import torch\nwith torch.enable_grad():\n    out = model(x)\n",
        "with open(path) as f:\n    data = f.read()\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if isinstance(node, cst.Decorator):
            function = ctx.parent(node)
            return _disables_grad(node.decorator, ctx) and not _touches_parameters(function, ctx)
        assert isinstance(node, cst.With)
        return any(_disables_grad(item.item, ctx) for item in node.items) and not (
            _touches_parameters(node.body, ctx)
        )

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> Replacement:
        if isinstance(node, cst.Decorator):
            return cst.RemoveFromParent()
        assert isinstance(node, cst.With)
        kept = [item for item in node.items if not _disables_grad(item.item, ctx)]
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return node.with_changes(items=kept)
        return cst.FlattenSentinel(_dedented_body(node))


def _dedented_body(block_owner: cst.With) -> list[cst.BaseStatement]:
    """The statements of a ``with`` block, ready to stand in its place one level out."""
    body = block_owner.body
    if isinstance(body, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=body.body, leading_lines=block_owner.leading_lines)]
    statements = list(body.body)
    first = statements[0]
    statements[0] = first.with_changes(
        leading_lines=[*block_owner.leading_lines, *first.leading_lines]
    )
    return statements


# -- evaluation on the training data ---------------------------------------------------------

_HELD_OUT = re.compile(r"validation|valid|val|testing|test|eval|dev", re.IGNORECASE)
_EVALUATION_CALLEE = re.compile(r"eval|valid|test|score|predict|infer|metric|accura", re.IGNORECASE)
_ITERATOR_WRAPPERS = frozenset({"enumerate", "tqdm", "iter"})
# Data, not a metric: ``val_loader``/``X_val`` are sites, ``val_loss`` passed to a logger is not.
_DATA_NAME = re.compile(
    r"loader|data|set|ds|dl|batch|sample|split|iter|input|target|label|feature|image|token|"
    r"(^|_)[xy](_|$)",
    re.IGNORECASE,
)


def _same_case(word: str, like: str) -> str:
    if like.isupper():
        return word.upper()
    if like[0].isupper():
        return word.capitalize()
    return word


def _training_counterparts(name: str) -> list[str]:
    """``val_loader`` -> ``train_loader``; ``X_valid`` -> ``X_train``; ``ValSet`` -> ``TrainSet``."""
    candidates = []
    for found in _HELD_OUT.finditer(name):
        for word in ("train", "training"):
            replacement = _same_case(word, found.group())
            candidates.append(name[: found.start()] + replacement + name[found.end() :])
    return candidates


def _bindings(ctx: Context) -> Iterator[tuple[str, cst.CSTNode]]:
    """(dotted name, binding node) for assignments, loop targets, ``as`` names and parameters."""
    for target in ctx.nodes(cst.AssignTarget):
        for name in _target_names(target.target):
            yield name, target
    for node in ctx.nodes(cst.AnnAssign):
        for name in _target_names(node.target):
            yield name, node
    for loop in ctx.nodes(cst.For):
        for name in _target_names(loop.target):
            yield name, loop.target
    for alias in ctx.nodes(cst.AsName):
        if isinstance(alias.name, cst.BaseExpression):
            for name in _target_names(alias.name):
                yield name, alias
    for param in ctx.nodes(cst.Param):
        yield param.name.value, param


def _visible_binding(name: str, use: cst.CSTNode, ctx: Context) -> bool:
    """Is ``name`` bound where ``use`` can see it (same or enclosing scope, and earlier when
    both run in the same scope)? ``self.x`` counts when bound anywhere in the same class."""
    use_scope = ctx.enclosing_function(use)
    use_line = ctx.position(use).start.line
    use_class = ctx.enclosing(use, cst.ClassDef)
    for bound, node in _bindings(ctx):
        if bound != name:
            continue
        if name.startswith("self."):
            if ctx.enclosing(node, cst.ClassDef) is use_class:
                return True
            continue
        scope = ctx.enclosing_function(node)
        if scope is use_scope:
            if ctx.position(node).start.line < use_line:
                return True
        elif scope is None or any(scope is a for a in ctx.ancestors(use)):
            return True
    return False


def _held_out_swaps(
    exprs: list[cst.BaseExpression], ctx: Context
) -> dict[cst.CSTNode, cst.BaseExpression]:
    """For each held-out name among ``exprs``, its visible training counterpart."""
    swaps: dict[cst.CSTNode, cst.BaseExpression] = {}
    for expr in exprs:
        name = dotted_name(expr)
        if name is None:
            continue
        owner, _, last = name.rpartition(".")
        if not _DATA_NAME.search(last):
            continue
        for candidate in _training_counterparts(last):
            full = f"{owner}.{candidate}" if owner else candidate
            if _visible_binding(full, expr, ctx):
                if isinstance(expr, cst.Attribute):
                    swaps[expr] = expr.with_changes(attr=cst.Name(candidate))
                else:
                    swaps[expr] = cst.Name(candidate)
                break
    return swaps


def _local_function_names(ctx: Context) -> set[str]:
    return {function.name.value for function in ctx.nodes(cst.FunctionDef)}


def _iterated_expression(loop: cst.For) -> cst.BaseExpression:
    """``for b in enumerate(val_loader)`` / ``tqdm(val_loader)`` -> ``val_loader``."""
    source = loop.iter
    if (
        isinstance(source, cst.Call)
        and callee_name(source) in _ITERATOR_WRAPPERS
        and source.args
        and source.args[0].keyword is None
    ):
        return source.args[0].value
    return source


class ValidateOnTrainingData(Operator):
    """Pass the training data where the held-out data belongs: ``evaluate(model, val_loader)``
    -> ``evaluate(model, train_loader)``, ``for x, y in val_loader`` -> ``train_loader``.

    Bug: the validation metric is computed on examples the model is trained on. Impact:
    training itself is unchanged, but the reported validation loss/accuracy is
    optimistic and tracks the training curve, hiding overfitting; early stopping and
    checkpoint selection pick the wrong epoch. A site needs a held-out name (``val``,
    ``valid``, ``test``, ``eval``, ``dev``) with a training counterpart bound where it is
    used. Fix: evaluate on a disjoint split (and keep the test set for the end). Check:
    compare train and val curves (identical curves, no gap, are a red flag); assert the
    two loaders' datasets are different objects / index sets do not overlap.
    """

    name = "validate_on_training_data"
    category = "mode"
    summary = "Evaluate on the training loader/data instead of the validation split."
    expected = "silent"
    node_types = (cst.Call, cst.For)
    examples = (
        Example(
            before=(
                "train_loader, val_loader = make_loaders()\n"
                "for epoch in range(3):\n    fit(model, train_loader)\n"
                "    val_loss = evaluate(model, val_loader, criterion)\n"
            ),
            after=(
                "train_loader, val_loader = make_loaders()\n"
                "for epoch in range(3):\n    fit(model, train_loader)\n"
                "    val_loss = evaluate(model, train_loader, criterion)\n"
            ),
        ),
        Example(
            before=(
                "X_train, y_train, X_val, y_val = split(X, y)\n"
                "acc = accuracy(model, X_val, y_val)\n"
            ),
            after=(
                "X_train, y_train, X_val, y_val = split(X, y)\n"
                "acc = accuracy(model, X_train, y_train)\n"
            ),
        ),
        Example(
            before=(
                "class T:\n    def __init__(self, a, b):\n"
                "        self.train_loader = a\n        self.valid_loader = b\n\n"
                "    def validate(self):\n        for i, (x, y) in enumerate(self.valid_loader):\n"
                "            self.score(x, y)\n"
            ),
            after=(
                "class T:\n    def __init__(self, a, b):\n"
                "        self.train_loader = a\n        self.valid_loader = b\n\n"
                "    def validate(self):\n        for i, (x, y) in enumerate(self.train_loader):\n"
                "            self.score(x, y)\n"
            ),
        ),
    )
    non_examples = (
        # No training counterpart in scope.
        "def evaluate_all(model, val_loader):\n    return evaluate(model, val_loader)\n",
        # A training counterpart bound only in another function.
        "def a():\n    train_loader = 1\n\ndef b(val_loader):\n    return evaluate(m, val_loader)\n",
        # Building the validation data is not evaluating on it.
        "train_ds, val_ds = split(data)\nval_loader = DataLoader(val_ds, batch_size=64)\n",
        "train_loader = 1\nprint(val_loader)\n",
        "interval = 5\ntrain = 1\nevaluate(model, interval)\n",
        # A metric handed to a logger is not evaluation data.
        "train_loss, val_loss = fit()\nreport(train_loss=train_loss, val_loss=val_loss)\n",
    )

    def _swaps(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, cst.BaseExpression]:
        if isinstance(node, cst.For):
            return _held_out_swaps([_iterated_expression(node)], ctx)
        assert isinstance(node, cst.Call)
        callee = callee_name(node)
        if callee is None or not (
            _EVALUATION_CALLEE.search(callee) or callee in _local_function_names(ctx)
        ):
            return {}
        return _held_out_swaps([arg.value for arg in node.args if not arg.star], ctx)

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return bool(self._swaps(node, ctx))

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        return dict(self._swaps(node, ctx))
