"""Loss bugs: the wrong loss, the right loss fed the wrong tensors, the wrong reduction.

Which loss a call computes, what a criterion name holds and how to spell ``F`` or
``torch`` in the script at hand are ``mutator.semantics`` recognisers (numerics and
gradient operators ask the same questions).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Operator, Param, Replacement
from mutator.semantics import (
    BINARY_LOSSES,
    CLASS_INDEX_LOSSES,
    LOSS_CLASSES,
    REGRESSION_LOSSES,
    closed_args,
    criterion_calls,
    find_arg,
    fresh_name,
    function_call,
    functional_loss_kind,
    insert_before,
    inside_nested_scope,
    is_label_name,
    is_pure,
    keyword_arg,
    keyword_string,
    last_name,
    log_softmax_input,
    loss_call_kind,
    loss_calls,
    loss_constructor_kind,
    loss_input,
    loss_site_kind,
    loss_target,
    method_call,
    method_name,
    module_alias,
    nn_class,
    number_literal,
    number_value,
    positional_args,
    renamed_callee,
    resolve,
    uses_loss,
    with_arg_value,
    with_keyword,
    without_element,
)


def _keep_keywords(call: cst.Call, keep: Collection[str]) -> list[cst.Arg]:
    """The arguments of a swapped loss that the new loss accepts too."""
    return closed_args(
        [arg for arg in call.args if arg.keyword is not None and arg.keyword.value in keep]
    )


def _overlap(first: Iterable[cst.CSTNode], second: Iterable[cst.CSTNode], ctx: Context) -> bool:
    """Would two sets of edits touch the same code (one node inside another)?"""
    return any(ctx.within(a, b) or ctx.within(b, a) for a in first for b in list(second))


class MseForClassification(Operator):
    """Train a classifier with mean squared error instead of cross-entropy.

    Bug: ``nn.CrossEntropyLoss`` (or ``F.cross_entropy``) is swapped for ``nn.MSELoss``.
    With ``variant=onehot`` the targets are turned into one-hot floats so the script runs:
    MSE then regresses raw logits onto 0/1, with no softmax coupling the classes. Impact:
    the loss starts near 1/C instead of ln C and gradients stay small for confidently
    wrong outputs; with ten classes accuracy can still match the reference, with many
    classes (a character LM) training falls far behind. With ``variant=plain`` only the
    loss is swapped, so
    (N, C) logits meet (N,) class indices: a shape error, or a silent broadcast when C
    happens to match. Fix: use cross-entropy on raw logits and integer class targets.
    Check: the init-loss check (initial loss is not ln C) and comparing train/val curves
    with the reference.
    """

    name = "mse_for_classification"
    category = "loss"
    summary = "CrossEntropy swapped for MSE (one-hot targets so it runs, or plain)."
    expected = "degrades"
    node_types = (cst.Call,)
    parameters = {
        "variant": Param(
            "onehot", "onehot: targets made one-hot floats; plain: swap only", ("onehot", "plain")
        ),
    }
    variants = ({"variant": "plain"},)
    examples = (
        Example(
            before=(
                "import torch.nn as nn\nimport torch.nn.functional as F\n"
                "criterion = nn.CrossEntropyLoss()\nloss = criterion(logits, y)\n"
            ),
            after=(
                "import torch.nn as nn\nimport torch.nn.functional as F\n"
                "criterion = nn.MSELoss()\n"
                "loss = criterion(logits, F.one_hot(y, logits.size(-1)).float())\n"
            ),
        ),
        Example(
            before=(
                "import torch.nn.functional as F\n"
                "loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))\n"
            ),
            after=(
                "import torch.nn.functional as F\n"
                "loss = F.mse_loss(logits.view(-1, logits.size(-1)), "
                "F.one_hot(targets.view(-1), logits.size(-1)).float())\n"
            ),
        ),
        Example(
            before=(
                "import torch\nfrom torch.nn import CrossEntropyLoss\n"
                "class T:\n    def __init__(self, model):\n"
                "        self.model = model\n        self.criterion = CrossEntropyLoss()\n"
                "    def step(self, x, y):\n"
                "        loss = self.criterion(self.model(x), y)\n"
            ),
            after=(
                "import torch\nfrom torch.nn import CrossEntropyLoss, MSELoss\n"
                "class T:\n    def __init__(self, model):\n"
                "        self.model = model\n        self.criterion = MSELoss()\n"
                "    def step(self, x, y):\n"
                "        logits = self.model(x)\n"
                "        loss = self.criterion(logits, torch.nn.functional.one_hot(y, "
                "logits.size(-1)).float())\n"
            ),
        ),
        Example(
            before=(
                "from torch import nn\n"
                "criterion = nn.CrossEntropyLoss(label_smoothing=0.1, reduction='sum')\n"
                "loss = criterion(model(x), y)\n"
            ),
            after=(
                "from torch import nn\ncriterion = nn.MSELoss(reduction='sum')\n"
                "loss = criterion(model(x), y)\n"
            ),
            params={"variant": "plain"},
        ),
    )
    non_examples = (
        "import torch.nn as nn\ncriterion = nn.MSELoss()\nloss = criterion(pred, y)\n",
        # onehot needs the call site, and it is nowhere to be found
        "import torch.nn as nn\nimport torch.nn.functional as F\n"
        "criterion = nn.CrossEntropyLoss()\n",
        # a one-hot target inside a comprehension cannot be hoisted
        "import torch.nn.functional as F\n"
        "losses = [F.cross_entropy(model(x), y) for x, y in batches]\n",
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        if not isinstance(node, cst.Call):
            return None
        if loss_constructor_kind(node, ctx) == "CrossEntropyLoss":
            return self._constructor_edits(node, ctx)
        if functional_loss_kind(node, ctx) == "CrossEntropyLoss":
            return self._functional_edits(node, ctx)
        return None

    def _constructor_edits(
        self, node: cst.Call, ctx: Context
    ) -> dict[cst.CSTNode, Replacement] | None:
        renamed = renamed_callee(node.func, ctx, "MSELoss")
        if renamed is None:
            return None
        func, edits = renamed
        edits[node] = node.with_changes(func=func, args=_keep_keywords(node, ("reduction",)))
        if self.params["variant"] == "plain":
            return edits
        uses = criterion_calls(node, ctx)
        if not uses or isinstance(ctx.parent(node), cst.Call):
            return None
        for use in uses:
            converted = _one_hot_target(use, ctx)
            if converted is None or _overlap(converted, edits, ctx):
                return None
            edits.update(converted)
        return edits

    def _functional_edits(
        self, node: cst.Call, ctx: Context
    ) -> dict[cst.CSTNode, Replacement] | None:
        renamed = renamed_callee(node.func, ctx, "mse_loss")
        if renamed is None:
            return None
        func, edits = renamed
        positional = positional_args(node)[:2]
        args = closed_args([*positional, *_keep_keywords(node, ("input", "target", "reduction"))])
        swapped = node.with_changes(func=func, args=args)
        if self.params["variant"] == "plain":
            edits[node] = swapped
            return edits
        converted = _one_hot_target(swapped, ctx, original=node)
        if converted is None:
            return None
        edits.update(converted)
        return edits


def _one_hot_target(
    call: cst.Call, ctx: Context, original: cst.Call | None = None
) -> dict[cst.CSTNode, Replacement] | None:
    """Edits that make ``call`` pass one-hot float targets sized by its input's last dim.

    ``original`` is the node in the tree when ``call`` is an already-rewritten copy. An
    input that is not cheap to repeat (``model(x)``) is first bound to a new name on the
    line before, as a person would write it.
    """
    original = original or call
    functional = module_alias(ctx, "torch.nn.functional")
    input_arg, target_arg = loss_input(call), loss_target(call)
    if functional is None or input_arg is None or target_arg is None:
        return None

    def one_hot(classes: cst.BaseExpression) -> cst.Call:
        encoded = function_call(
            f"{functional}.one_hot", cst.Arg(target_arg.value), cst.Arg(classes)
        )
        return method_call(encoded, "float")

    if is_pure(input_arg.value):
        rewritten = with_arg_value(call, target_arg, one_hot(_class_count(input_arg.value)))
        return {original: rewritten}
    statement = ctx.statement_of(original)
    if not isinstance(statement, cst.SimpleStatementLine) or inside_nested_scope(
        original, statement, ctx
    ):
        return None
    name = fresh_name(ctx, original, ("logits", "outputs", "output", "scores"))
    if name is None:
        return None
    held = cst.Name(name)
    rewritten = with_arg_value(call, input_arg, held)
    rewritten = with_arg_value(
        rewritten,
        next(a for a in rewritten.args if a.value is target_arg.value),
        one_hot(method_call(held, "size", cst.Arg(number_literal(-1)))),
    )
    hoisted = cst.SimpleStatementLine(
        body=[cst.Assign(targets=[cst.AssignTarget(held)], value=input_arg.value)]
    )
    updated = statement.deep_replace(original, rewritten)
    assert isinstance(updated, cst.SimpleStatementLine)
    return insert_before(statement, hoisted, anchor_becomes=updated)


def _class_count(logits: cst.BaseExpression) -> cst.BaseExpression:
    """The class count of a logits expression: the ``V`` of ``x.view(-1, V)``, else
    ``logits.size(-1)``."""
    if (
        isinstance(logits, cst.Call)
        and method_name(logits) in ("view", "reshape")
        and len(logits.args) >= 2
        and logits.args[-1].keyword is None
    ):
        return logits.args[-1].value
    return method_call(logits, "size", cst.Arg(number_literal(-1)))


class SoftmaxBeforeCrossEntropy(Operator):
    """Apply softmax to the logits before passing them to cross-entropy.

    Bug: ``CrossEntropyLoss`` / ``F.cross_entropy`` already applies log-softmax; feeding it
    probabilities applies softmax twice. Impact: the inputs are squashed into [0, 1], so
    the loss cannot go below about ln(1 + (C-1)/e) (1.46 for 10 classes), gradients shrink
    as the model grows confident and learning slows or stalls; accuracy may still look
    fine while the loss plateaus high. Fix: pass raw logits to cross-entropy. Check: the
    loss floor (overfit one batch: the loss refuses to approach zero) and the init-loss
    check against ln C.
    """

    name = "softmax_before_cross_entropy"
    category = "loss"
    summary = "Softmax applied to the logits that cross-entropy receives (double softmax)."
    expected = "degrades"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(logits, y)\n",
            after="from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(logits.softmax(dim=1), y)\n",
        ),
        Example(
            before="import torch.nn.functional as F\nloss = F.cross_entropy(model(x), y)\n",
            after="import torch.nn.functional as F\n"
            "loss = F.cross_entropy(model(x).softmax(dim=1), y)\n",
        ),
    )
    non_examples = (
        "from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
        "loss = criterion(logits.softmax(dim=1), y)\n",
        "from torch import nn\ncriterion = nn.NLLLoss()\nloss = criterion(logits, y)\n",
        "loss = criterion(logits, y)\n",  # nothing says what criterion is
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if loss_call_kind(node, ctx) != "CrossEntropyLoss":
            return False
        arg = loss_input(node)  # type: ignore[arg-type]
        return arg is not None and not _is_softmax(arg.value)

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.Call:
        assert isinstance(node, cst.Call)
        arg = loss_input(node)
        assert arg is not None
        probabilities = method_call(arg.value, "softmax", keyword_arg("dim", number_literal(1)))
        return with_arg_value(node, arg, probabilities)


def _is_softmax(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (
        method_name(expr) in ("softmax", "log_softmax")
        or (isinstance(expr.func, cst.Name) and expr.func.value in ("softmax", "log_softmax"))
    )


class NllWithoutLogSoftmax(Operator):
    """Feed raw logits to ``NLLLoss`` / ``F.nll_loss`` by dropping the log-softmax before it.

    Bug: NLL expects log-probabilities; it just returns minus the target entry. Without
    ``log_softmax`` the loss is minus the raw target logit, unbounded below. Impact: the
    loss goes negative and keeps falling as the model inflates the target logits, the
    weights grow without limit and the loss can reach -inf/NaN; accuracy may rise at
    first, which hides the bug. Fix: apply ``F.log_softmax`` (or ``nn.LogSoftmax``) before
    NLL, or use ``CrossEntropyLoss`` on raw logits. Check: the init-loss check (the first
    loss is near 0 or negative, not ln C) and a loss curve that falls below zero.
    """

    name = "nll_without_log_softmax"
    category = "loss"
    summary = "log_softmax removed before NLLLoss: raw logits, loss unbounded below."
    expected = "breaks_training"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch.nn.functional as F\n"
            "loss = F.nll_loss(F.log_softmax(logits, dim=1), y)\n",
            after="import torch.nn.functional as F\nloss = F.nll_loss(logits, y)\n",
        ),
        Example(
            before="import torch.nn.functional as F\n"
            "def train(model, x, y):\n    log_probs = F.log_softmax(model(x), dim=1)\n"
            "    loss = F.nll_loss(log_probs, y)\n",
            after="import torch.nn.functional as F\n"
            "def train(model, x, y):\n    log_probs = model(x)\n"
            "    loss = F.nll_loss(log_probs, y)\n",
        ),
        Example(
            before="import torch\nimport torch.nn.functional as F\n"
            "class Net(torch.nn.Module):\n    def forward(self, x):\n"
            "        return F.log_softmax(self.fc(x), dim=1)\n"
            "def step(model, x, y):\n    return F.nll_loss(model(x), y)\n",
            after="import torch\nimport torch.nn.functional as F\n"
            "class Net(torch.nn.Module):\n    def forward(self, x):\n"
            "        return self.fc(x)\n"
            "def step(model, x, y):\n    return F.nll_loss(model(x), y)\n",
        ),
        Example(
            before="from torch import nn\n"
            "model = nn.Sequential(\n    nn.Linear(4, 3),\n    nn.LogSoftmax(dim=1),\n)\n"
            "criterion = nn.NLLLoss()\nloss = criterion(model(x), y)\n",
            after="from torch import nn\n"
            "model = nn.Sequential(\n    nn.Linear(4, 3),\n)\n"
            "criterion = nn.NLLLoss()\nloss = criterion(model(x), y)\n",
        ),
    )
    non_examples = (
        # log_softmax feeding something else than NLL
        "import torch.nn.functional as F\nimport torch\n"
        "kl = F.kl_div(F.log_softmax(s, dim=1), t)\n",
        "import torch.nn.functional as F\nloss = F.cross_entropy(logits, y)\n",
        "from torch import nn\nmodel = nn.Sequential(nn.Linear(4, 3), nn.LogSoftmax(dim=1))\n",
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        if not isinstance(node, cst.Call):
            return None
        parent = ctx.parent(node)
        if nn_class(node, ctx, ("LogSoftmax",)) and isinstance(parent, cst.Arg):
            sequential = ctx.parent(parent)
            if (
                isinstance(sequential, cst.Call)
                and nn_class(sequential, ctx, ("Sequential",))
                and uses_loss(ctx, ("NLLLoss",))
            ):
                return {sequential: without_element(sequential, parent)}
            return None
        found = log_softmax_input(node, ctx)
        if found is None or not self._feeds_nll(node, ctx):
            return None
        return {node: found[1]}

    def _feeds_nll(self, node: cst.Call, ctx: Context) -> bool:
        parent = ctx.parent(node)
        if isinstance(parent, cst.Arg):
            consumer = ctx.parent(parent)
            return (
                isinstance(consumer, cst.Call)
                and loss_input(consumer) is parent
                and loss_call_kind(consumer, ctx) == "NLLLoss"
            )
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if not isinstance(target, cst.Name):
                return False
            function = ctx.enclosing_function(node)
            for call, kind in loss_calls(ctx):
                argument = loss_input(call)
                if (
                    kind == "NLLLoss"
                    and ctx.enclosing_function(call) is function
                    and argument is not None
                    and isinstance(argument.value, cst.Name)
                    and argument.value.value == target.value
                ):
                    return True
            return False
        # ``return F.log_softmax(...)`` in a model's forward: the model's output goes to NLL.
        function = ctx.enclosing_function(node)
        return (
            isinstance(parent, cst.Return)
            and function is not None
            and function.name.value == "forward"
            and uses_loss(ctx, ("NLLLoss",))
        )


class SigmoidBeforeBceWithLogits(Operator):
    """Apply ``torch.sigmoid`` to the logits that ``BCEWithLogitsLoss`` receives.

    Bug: ``BCEWithLogitsLoss`` applies the sigmoid itself; a second sigmoid squashes its
    input into (0, 1), which the loss reads as logits near zero. Impact: predicted
    probabilities stay between 0.5 and 0.73, the loss cannot fall below about 0.31 and
    gradients fade, so training slows down and plateaus while accuracy may still look
    reasonable. Fix: pass raw logits to ``BCEWithLogitsLoss`` (or use ``BCELoss`` on the
    probabilities). Check: overfit one batch (the loss floors well above zero) and compare
    the loss curve with the reference.
    """

    name = "sigmoid_before_bce_with_logits"
    category = "loss"
    summary = "torch.sigmoid applied before BCEWithLogitsLoss (double sigmoid)."
    expected = "degrades"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch\nfrom torch import nn\ncriterion = nn.BCEWithLogitsLoss()\n"
            "loss = criterion(logits, y)\n",
            after="import torch\nfrom torch import nn\ncriterion = nn.BCEWithLogitsLoss()\n"
            "loss = criterion(torch.sigmoid(logits), y)\n",
        ),
        Example(
            before="import torch.nn.functional as F\n"
            "loss = F.binary_cross_entropy_with_logits(out.squeeze(1), y)\n",
            after="import torch.nn.functional as F\n"
            "loss = F.binary_cross_entropy_with_logits(out.squeeze(1).sigmoid(), y)\n",
        ),
    )
    non_examples = (
        "import torch\nfrom torch import nn\ncriterion = nn.BCEWithLogitsLoss()\n"
        "loss = criterion(torch.sigmoid(logits), y)\n",
        "import torch\nfrom torch import nn\ncriterion = nn.BCELoss()\n"
        "loss = criterion(torch.sigmoid(logits), y)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if loss_call_kind(node, ctx) != "BCEWithLogitsLoss":
            return False
        arg = loss_input(node)  # type: ignore[arg-type]
        return arg is not None and not _is_sigmoid(arg.value)

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.Call:
        assert isinstance(node, cst.Call)
        arg = loss_input(node)
        assert arg is not None
        torch = module_alias(ctx, "torch")
        if torch is not None:
            squashed = function_call(f"{torch}.sigmoid", cst.Arg(arg.value))
        else:
            squashed = method_call(arg.value, "sigmoid")
        return with_arg_value(node, arg, squashed)


def _is_sigmoid(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (last_name(expr.func) == "sigmoid")


class BceOnLogits(Operator):
    """Swap ``BCEWithLogitsLoss`` for ``BCELoss`` while still passing raw logits.

    Bug: ``BCELoss`` expects probabilities in [0, 1]; the model outputs unbounded logits.
    Impact: on CPU PyTorch raises as soon as a logit leaves [0, 1] (``all elements of
    input should be between 0 and 1``), on CUDA a device-side assert kills the run; if
    the outputs happen to stay in range the loss is simply wrong. Fix: keep
    ``BCEWithLogitsLoss`` on logits (numerically stable), or apply ``torch.sigmoid``
    before ``BCELoss``. Check: a crash in the first steps; range-check the loss inputs.
    """

    name = "bce_on_logits"
    category = "loss"
    summary = "BCEWithLogitsLoss replaced by BCELoss while logits are still passed."
    expected = "crash"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="from torch import nn\ntrainer = Trainer(model, nn.BCEWithLogitsLoss())\n",
            after="from torch import nn\ntrainer = Trainer(model, nn.BCELoss())\n",
        ),
        Example(
            before="import torch.nn.functional as F\n"
            "loss = F.binary_cross_entropy_with_logits(logits, y, pos_weight=w)\n",
            after="import torch.nn.functional as F\nloss = F.binary_cross_entropy(logits, y)\n",
        ),
        Example(
            before="from torch.nn import BCEWithLogitsLoss\ncriterion = BCEWithLogitsLoss()\n",
            after="from torch.nn import BCEWithLogitsLoss, BCELoss\ncriterion = BCELoss()\n",
        ),
    )
    non_examples = (
        "from torch import nn\ncriterion = nn.BCELoss()\n",
        "import torch.nn.functional as F\nloss = F.binary_cross_entropy(p, y)\n",
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        if not isinstance(node, cst.Call):
            return None
        if loss_constructor_kind(node, ctx) == "BCEWithLogitsLoss":
            new_name, keep = "BCELoss", ("weight", "reduction")
            args = _keep_keywords(node, keep)
        elif functional_loss_kind(node, ctx) == "BCEWithLogitsLoss":
            new_name = "binary_cross_entropy"
            # pos_weight exists only for the logits version: a person switching drops it.
            args = closed_args(
                [
                    arg
                    for arg in node.args
                    if arg.keyword is None or arg.keyword.value != "pos_weight"
                ]
            )
        else:
            return None
        renamed = renamed_callee(node.func, ctx, new_name)
        if renamed is None:
            return None
        func, edits = renamed
        edits[node] = node.with_changes(func=func, args=args)
        return edits


class ReductionSum(Operator):
    """Sum the loss over the batch instead of averaging it (``reduction="sum"``).

    Bug: the loss (and so the gradient) scales with the batch size. Impact: with SGD the
    effective learning rate is multiplied by the batch size, which usually diverges or
    oscillates; Adam normalises the gradient scale away, so there the bug is nearly
    silent apart from a logged loss that is batch-size times larger (and a last, smaller
    batch that weighs less). Fix: keep the default ``reduction="mean"`` or divide by the
    batch size. Check: the init-loss check (the first loss is batch x ln C, not ln C) and
    the grad-norm log.
    """

    name = "reduction_sum"
    category = "loss"
    summary = 'reduction="sum" on a loss: gradients scale with the batch size.'
    expected = "degrades"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch.nn as nn\ncriterion = nn.CrossEntropyLoss()\n",
            after='import torch.nn as nn\ncriterion = nn.CrossEntropyLoss(reduction="sum")\n',
        ),
        Example(
            before="import torch.nn.functional as F\nloss = F.mse_loss(pred, y, reduction='mean')\n",
            after='import torch.nn.functional as F\nloss = F.mse_loss(pred, y, reduction="sum")\n',
        ),
    )
    non_examples = (
        "import torch.nn as nn\ncriterion = nn.CrossEntropyLoss(reduction='none')\n",
        "import torch.nn as nn\ncriterion = nn.L1Loss(reduction='sum')\n",
        "import torch.nn as nn\nlayer = nn.Linear(3, 4)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if loss_site_kind(node, ctx, LOSS_CLASSES) is None:
            return False
        assert isinstance(node, cst.Call)
        current = find_arg(node, keyword="reduction")
        if current is None:
            return find_arg(node, keyword="size_average") is None
        return keyword_string(node, "reduction") in ("mean", "batchmean")

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.Call:
        assert isinstance(node, cst.Call)
        return with_keyword(node, "reduction", cst.SimpleString('"sum"'))


class SwapLossArguments(Operator):
    """Pass the target first and the prediction second: ``criterion(y, logits)``.

    Bug: loss functions are ``loss(input, target)``; swapping them is an easy slip.
    Impact: for cross-entropy/NLL the integer targets become the "logits", which crashes
    (dtype or shape error); for BCE the gradient now flows through the target slot and
    training optimises nonsense; symmetric losses (MSE, L1, Huber) are left alone because
    there the swap changes nothing. Fix: ``criterion(prediction, target)``. Check: a crash
    at the first step, or the init-loss check and overfit-one-batch for BCE.
    """

    name = "swap_loss_arguments"
    category = "loss"
    summary = "Loss called as loss(target, prediction)."
    expected = "crash"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(logits, y)\n",
            after="from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(y, logits)\n",
        ),
        Example(
            before="import torch.nn.functional as F\n"
            "loss = F.binary_cross_entropy_with_logits(logits, y.float(), reduction='sum')\n",
            after="import torch.nn.functional as F\n"
            "loss = F.binary_cross_entropy_with_logits(y.float(), logits, reduction='sum')\n",
        ),
    )
    non_examples = (
        "from torch import nn\ncriterion = nn.MSELoss()\nloss = criterion(pred, y)\n",
        "import torch.nn.functional as F\nloss = F.cross_entropy(logits, target=y)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        kind = loss_call_kind(node, ctx)
        if kind is None or kind in REGRESSION_LOSSES:
            return False
        assert isinstance(node, cst.Call)
        positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
        return len(positional) >= 2 and ctx.code(positional[0].value) != ctx.code(
            positional[1].value
        )

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.Call:
        assert isinstance(node, cst.Call)
        first, second = positional_args(node)[:2]
        swapped = {id(first): second.value, id(second): first.value}
        return node.with_changes(
            args=[
                arg.with_changes(value=swapped[id(arg)]) if id(arg) in swapped else arg
                for arg in node.args
            ]
        )


def _shape_fix_receiver(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor under a call that turns (n,) into (n, 1) or back, else None:
    ``y.unsqueeze(1)``, ``y.view(-1, 1)``, ``out.squeeze(1)``, ``out.view(-1)``,
    ``y.view_as(out)``..."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Attribute):
        return None
    method = expr.func.attr.value
    values = [number_value(arg.value) for arg in expr.args]
    if method == "unsqueeze":
        shape_fix = values in ([1.0], [-1.0])
    elif method == "squeeze":
        shape_fix = values in ([], [1.0], [-1.0])
    elif method in ("view", "reshape"):
        shape_fix = values in ([-1.0], [-1.0, 1.0])
    elif method in ("flatten", "ravel"):
        shape_fix = not values
    else:
        shape_fix = method in ("view_as", "reshape_as")
    return expr.func.value if shape_fix else None


class TargetShapeBroadcast(Operator):
    """Drop the reshape that matches predictions (n, 1) to targets (n,) in a regression loss.

    Bug: the ``.unsqueeze(1)`` / ``.view(-1, 1)`` on the targets or the ``.squeeze(1)`` on
    the predictions is removed, so the loss sees (n, 1) against (n,). Impact: MSE/L1
    broadcast to an (n, n) matrix and average every prediction against every target;
    PyTorch only warns, the loss still falls, and the model learns to predict the
    target mean (R^2 near 0). BCE losses refuse the mismatch and crash instead. Fix:
    make prediction and target shapes identical before the loss (assert it). Check:
    overfit one batch (the loss stalls at the target variance) and turn the broadcast
    UserWarning into an error.
    """

    name = "target_shape_broadcast"
    category = "loss"
    summary = "Shape fix removed before a regression loss: (n,1) vs (n,) broadcasts to (n,n)."
    expected = "breaks_training"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="from torch import nn\ncriterion = nn.MSELoss()\n"
            "loss = criterion(model(x), y.unsqueeze(1))\n",
            after="from torch import nn\ncriterion = nn.MSELoss()\nloss = criterion(model(x), y)\n",
        ),
        Example(
            before="import torch.nn.functional as F\ndef step(model, x, y):\n"
            "    pred = model(x).squeeze(-1)\n    return F.l1_loss(pred, y)\n",
            after="import torch.nn.functional as F\ndef step(model, x, y):\n"
            "    pred = model(x)\n    return F.l1_loss(pred, y)\n",
        ),
        Example(
            before="import torch.nn.functional as F\ndef step(model, x, y):\n"
            "    y = y.view(-1, 1)\n    return F.mse_loss(model(x), y)\n",
            after="import torch.nn.functional as F\ndef step(model, x, y):\n"
            "    return F.mse_loss(model(x), y)\n",
        ),
    )
    non_examples = (
        "from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
        "loss = criterion(logits.view(-1, logits.size(-1)), y.view(-1))\n",
        "from torch import nn\ncriterion = nn.MSELoss()\nloss = criterion(pred, y)\n",
        "import torch.nn.functional as F\nloss = F.mse_loss(seq.view(-1, 8), y.view(-1, 8))\n",
    )

    _kinds = REGRESSION_LOSSES | BINARY_LOSSES

    def plan(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        receiver = _shape_fix_receiver(node)  # type: ignore[arg-type]
        if receiver is None:
            return None
        parent = ctx.parent(node)
        if isinstance(parent, cst.Arg):
            consumer = ctx.parent(parent)
            if (
                isinstance(consumer, cst.Call)
                and parent in (loss_input(consumer), loss_target(consumer))
                and loss_call_kind(consumer, ctx) in self._kinds
            ):
                return {node: receiver}
            return None
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
            return None
        target = parent.targets[0].target
        if not (isinstance(target, cst.Name) and self._feeds_loss(target.value, parent, ctx)):
            return None
        if isinstance(receiver, cst.Name) and receiver.value == target.value:
            line = ctx.parent(parent)
            if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
                return {line: cst.RemoveFromParent()}
            return None
        return {node: receiver}

    def _feeds_loss(self, name: str, assignment: cst.CSTNode, ctx: Context) -> bool:
        function = ctx.enclosing_function(assignment)
        for call, kind in loss_calls(ctx):
            if kind not in self._kinds or ctx.enclosing_function(call) is not function:
                continue
            for arg in (loss_input(call), loss_target(call)):
                if arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == name:
                    return True
        return False


class FloatClassTargets(Operator):
    """Make the class-index targets of cross-entropy/NLL floating point.

    Bug: the label tensor is built with ``dtype=torch.float32`` instead of ``torch.long``
    (or ``.long()`` becomes ``.float()``), a habit carried over from regression or BCE
    code. Impact: ``CrossEntropyLoss`` reads float targets as class probabilities, which
    must match the logits' shape, so (N,) float targets against (N, C) logits raise at
    the first step; ``NLLLoss`` refuses float targets outright. Fix: keep class targets
    as ``torch.long`` indices. Check: a crash at the first loss call; assert
    ``y.dtype == torch.long`` where the batch is unpacked.
    """

    name = "float_class_targets"
    category = "loss"
    summary = "Class-index targets made float (dtype=torch.float32 / .float() for .long())."
    expected = "crash"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch\nfrom torch import nn\n"
            "y = torch.tensor(data.target, dtype=torch.long)\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(model(x), y)\n",
            after="import torch\nfrom torch import nn\n"
            "y = torch.tensor(data.target, dtype=torch.float32)\n"
            "criterion = nn.CrossEntropyLoss()\nloss = criterion(model(x), y)\n",
        ),
        Example(
            before="import torch.nn.functional as F\nloss = F.nll_loss(out, y.long())\n",
            after="import torch.nn.functional as F\nloss = F.nll_loss(out, y.float())\n",
        ),
        Example(
            before="import torch\nfrom torch import nn\n"
            "y_train = (x[:, 0] > 0).long()\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(model(x), y)\n",
            after="import torch\nfrom torch import nn\n"
            "y_train = (x[:, 0] > 0).float()\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(model(x), y)\n",
        ),
    )
    non_examples = (
        # token ids are long too, but they are no targets of a class loss here
        "import torch\nfrom torch import nn\ntokens = torch.tensor(ids, dtype=torch.long)\n"
        "criterion = nn.CrossEntropyLoss()\n",
        # no class-index loss anywhere: a long label tensor is for something else
        "import torch\ny = torch.tensor(data.target, dtype=torch.long)\n",
        "import torch.nn.functional as F\nloss = F.cross_entropy(out, y.float())\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        return self._replacement(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        found = self._replacement(node, ctx)
        assert found is not None
        return found

    def _replacement(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode | None:
        if not isinstance(node, cst.Call) or not uses_loss(ctx, CLASS_INDEX_LOSSES):
            return None
        if method_name(node) == "long" and not node.args:
            if self._is_class_target(node, ctx) or self._assigned_to_labels(node, ctx):
                return node.with_changes(func=node.func.with_changes(attr=cst.Name("float")))  # type: ignore[union-attr]
            return None
        dtype = find_arg(node, keyword="dtype")
        if (
            dtype is not None
            and isinstance(dtype.value, cst.Attribute)
            and dtype.value.attr.value in ("long", "int64")
            and resolve(dtype.value, ctx).under("torch")
            and self._assigned_to_labels(node, ctx)
        ):
            as_float = dtype.value.with_changes(attr=cst.Name("float32"))
            return with_arg_value(node, dtype, as_float)
        return None

    def _is_class_target(self, node: cst.Call, ctx: Context) -> bool:
        parent = ctx.parent(node)
        consumer = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
        return (
            isinstance(consumer, cst.Call)
            and loss_target(consumer) is parent
            and loss_call_kind(consumer, ctx) in CLASS_INDEX_LOSSES
        )

    def _assigned_to_labels(self, node: cst.Call, ctx: Context) -> bool:
        parent = ctx.parent(node)
        return (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
            and is_label_name(parent.targets[0].target.value)
        )


class IgnoreIndexWrong(Operator):
    """Set ``ignore_index`` of cross-entropy/NLL to a real class (0 by default).

    Bug: ``ignore_index=0`` is copied from NLP code where 0 is the padding token, into a
    task where 0 is a genuine class (or the pad id is wrong). Impact: every example of
    that class is silently dropped from the loss; its logit is only ever pushed down, so
    the model practically never predicts it and accuracy loses about 1/C while the
    training loss looks healthy (even lower). Fix: set ``ignore_index`` to the real
    padding id (default -100) or leave it out. Check: per-class accuracy or a confusion
    matrix on validation (one class is never predicted).
    """

    name = "ignore_index_wrong"
    category = "loss"
    summary = "ignore_index set to a real class: that class never contributes to the loss."
    expected = "degrades"
    node_types = (cst.Call,)
    parameters = {"index": Param(0, "class index wrongly ignored")}
    examples = (
        Example(
            before="from torch import nn\ncriterion = nn.CrossEntropyLoss()\n",
            after="from torch import nn\ncriterion = nn.CrossEntropyLoss(ignore_index=0)\n",
        ),
        Example(
            before="import torch.nn.functional as F\n"
            "loss = F.cross_entropy(logits, y, ignore_index=-100)\n",
            after="import torch.nn.functional as F\n"
            "loss = F.cross_entropy(logits, y, ignore_index=0)\n",
        ),
    )
    non_examples = (
        "from torch import nn\ncriterion = nn.CrossEntropyLoss(ignore_index=0)\n",
        "from torch import nn\ncriterion = nn.MSELoss()\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if loss_site_kind(node, ctx, CLASS_INDEX_LOSSES) is None:
            return False
        assert isinstance(node, cst.Call)
        current = find_arg(node, keyword="ignore_index")
        return current is None or number_value(current.value) != self.params["index"]

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.Call:
        assert isinstance(node, cst.Call)
        return with_keyword(node, "ignore_index", number_literal(int(self.params["index"])))
