"""Mode bugs: train/eval mode switches, gradient tracking during evaluation, evaluation data."""

from __future__ import annotations

import re

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Operator, Replacement
from mutator.semantics import (
    HELD_OUT,
    bound_names,
    callee_name,
    dedented_body,
    disables_grad,
    dotted_name,
    enclosing_function,
    expression_call,
    is_false,
    is_model,
    is_true,
    loops_around,
    method_name,
    per_module,
    receiver,
    same_scope,
)

# -- train/eval mode calls -----------------------------------------------------------------


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
    if is_true(arg.value):
        return "train"
    if is_false(arg.value):
        return "eval"
    return None


def _model_mode_statement(node: cst.CSTNode, ctx: Context, mode: str) -> cst.Call | None:
    """The call of a statement line that puts a model into ``mode``, else None."""
    call = expression_call(node)
    if call is None or _mode_set(call) != mode:
        return None
    return call if is_model(receiver(call), ctx) else None


def _can_run_before(earlier: cst.CSTNode, later: cst.CSTNode, ctx: Context) -> bool:
    """Can ``earlier`` execute before ``later``? Only straight-line code after ``later`` in the
    same scope, outside any loop they share, cannot (a final test after training)."""
    if not same_scope(earlier, later, ctx):
        return True
    if ctx.position(earlier).start.line < ctx.position(later).start.line:
        return True
    shared = {id(loop) for loop in loops_around(earlier, ctx)}
    return any(id(loop) in shared for loop in loops_around(later, ctx))


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
            return disables_grad(node.decorator, ctx) and not _touches_parameters(function, ctx)
        assert isinstance(node, cst.With)
        return any(disables_grad(item.item, ctx) for item in node.items) and not (
            _touches_parameters(node.body, ctx)
        )

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> Replacement:
        if isinstance(node, cst.Decorator):
            return cst.RemoveFromParent()
        assert isinstance(node, cst.With)
        kept = [item for item in node.items if not disables_grad(item.item, ctx)]
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return node.with_changes(items=kept)
        return cst.FlattenSentinel(dedented_body(node))


# -- evaluation on the training data ---------------------------------------------------------

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
    for found in HELD_OUT.finditer(name):
        for word in ("train", "training"):
            replacement = _same_case(word, found.group())
            candidates.append(name[: found.start()] + replacement + name[found.end() :])
    return candidates


@per_module
def _bindings(ctx: Context) -> list[tuple[str, cst.CSTNode]]:
    """(dotted name, binding node) for assignments, loop targets, ``as`` names and parameters."""
    found: list[tuple[str, cst.CSTNode]] = []
    for target in ctx.nodes(cst.AssignTarget):
        found += [(name, target) for name in bound_names(target.target)]  # type: ignore[attr-defined]
    for node in ctx.nodes(cst.AnnAssign):
        found += [(name, node) for name in bound_names(node.target)]  # type: ignore[attr-defined]
    for loop in ctx.nodes(cst.For):
        found += [(name, loop.target) for name in bound_names(loop.target)]  # type: ignore[attr-defined]
    for alias in ctx.nodes(cst.AsName):
        if isinstance(alias.name, cst.BaseExpression):  # type: ignore[attr-defined]
            found += [(name, alias) for name in bound_names(alias.name)]  # type: ignore[attr-defined]
    for param in ctx.nodes(cst.Param):
        found.append((param.name.value, param))  # type: ignore[attr-defined]
    return found


def _visible_binding(name: str, use: cst.CSTNode, ctx: Context) -> bool:
    """Is ``name`` bound where ``use`` can see it (same or enclosing scope, and earlier when
    both run in the same scope)? ``self.x`` counts when bound anywhere in the same class."""
    use_scope = enclosing_function(use, ctx)
    use_line = ctx.position(use).start.line
    use_class = ctx.enclosing(use, cst.ClassDef)
    for bound, node in _bindings(ctx):
        if bound != name:
            continue
        if name.startswith("self."):
            if ctx.enclosing(node, cst.ClassDef) is use_class:
                return True
            continue
        scope = enclosing_function(node, ctx)
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
