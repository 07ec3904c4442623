"""Numerics bugs: unstable formulas, lost precision, dead initialisation, a network gone linear."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Operator, Param, Replacement
from mutator.semantics import (
    CLASS_INDEX_LOSSES,
    bound_names,
    dotted_name,
    find_arg,
    fresh_name,
    function_call,
    insert_before,
    is_module_class,
    is_parameter,
    is_pure,
    last_name,
    log_softmax_input,
    loss_call_kind,
    loss_input,
    loss_target,
    method_call,
    method_name,
    module_alias,
    module_constructors,
    nn_class,
    number_literal,
    number_value,
    optimizer_class,
    positional_args,
    renamed_callee,
    resolve,
    with_arg_value,
    with_keyword,
    without_element,
)


class NaiveLogSoftmax(Operator):
    """Compute log-softmax as ``log(softmax(x))`` instead of the fused ``log_softmax``.

    Bug: the two-step formula loses the log-sum-exp trick: a probability that underflows
    to 0 in float32 (a logit gap above ~100, or far less in half precision) turns into
    ``log(0) = -inf`` and the loss into inf/NaN. Impact: on well-scaled small models the
    values stay finite and nothing shows; once logits grow (high learning rate, long
    training, confident predictions) the loss jumps to inf/NaN. Fix: use
    ``F.log_softmax`` (or ``CrossEntropyLoss`` on raw logits). Check: the NaN step of the
    loss log; a unit test feeding large logits (e.g. 1000) through the loss.
    """

    name = "naive_log_softmax"
    category = "numerics"
    summary = "F.log_softmax(x) rewritten as torch.log(F.softmax(x)): -inf/NaN when confident."
    expected = "silent"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="import torch\nimport torch.nn.functional as F\n"
            "log_probs = F.log_softmax(logits, dim=1)\n",
            after="import torch\nimport torch.nn.functional as F\n"
            "log_probs = torch.log(F.softmax(logits, dim=1))\n",
        ),
        Example(
            before="log_probs = logits.log_softmax(dim=-1)\n",
            after="log_probs = logits.softmax(dim=-1).log()\n",
        ),
        Example(
            before="import torch\nfrom torch.nn.functional import log_softmax\n"
            "out = log_softmax(z, 1)\n",
            after="import torch\nfrom torch.nn.functional import log_softmax, softmax\n"
            "out = torch.log(softmax(z, 1))\n",
        ),
    )
    non_examples = (
        "import torch\nprobs = torch.softmax(logits, dim=1)\n",
        "import torch\nfrom torch import nn\nlayer = nn.LogSoftmax(dim=1)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        found = log_softmax_input(node, ctx)
        return found is not None and found[0] != "module" and self._edits(node, ctx) is not None

    def edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement]:
        found = self._edits(node, ctx)
        assert found is not None
        return found

    def _edits(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        assert isinstance(node, cst.Call)
        renamed = renamed_callee(node.func, ctx, "softmax")
        if renamed is None:
            return None
        func, edits = renamed
        probabilities = node.with_changes(func=func)
        form, _ = log_softmax_input(node, ctx)  # type: ignore[misc]
        torch = module_alias(ctx, "torch")
        if form == "method" or torch is None:
            edits[node] = method_call(probabilities, "log")
        else:
            edits[node] = function_call(f"{torch}.log", cst.Arg(probabilities))
        return edits


_CASTS = {"bfloat16": "bfloat16", "float16": "half"}


class LowPrecisionLoss(Operator):
    """Compute the loss in half precision: ``criterion(logits.bfloat16(), y)``.

    Bug: the loss inputs are cast to bfloat16/float16 (left over from a half-precision
    experiment, or ``.half()`` applied too late) instead of computing the loss in float32
    as autocast does. Impact: the loss and its gradient are quantised (bfloat16 keeps 8
    mantissa bits, about 0.4% steps) and float16 overflows beyond 65504 (large logits,
    summed losses). On small well-scaled CPU loops the difference is within seed noise,
    so expect it to be silent there; it bites with large vocabularies, long sequences or
    ``reduction="sum"``. Fix: compute losses in float32 (autocast keeps them there); cast
    logits with ``.float()`` first. Check: log the loss dtype; compare train/val curves
    with the reference; overflow shows as inf in the loss log.
    """

    name = "low_precision_loss"
    category = "numerics"
    summary = "Loss computed on bfloat16/float16 casts of its inputs."
    expected = "silent"
    node_types = (cst.Call,)
    parameters = {
        "dtype": Param("bfloat16", "precision of the loss inputs", ("bfloat16", "float16")),
    }
    variants = ({"dtype": "float16"},)
    examples = (
        Example(
            before="from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(logits, y)\n",
            after="from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
            "loss = criterion(logits.bfloat16(), y)\n",
        ),
        Example(
            before="import torch.nn.functional as F\nloss = F.mse_loss(model(x), y)\n",
            after="import torch.nn.functional as F\nloss = F.mse_loss(model(x).half(), y.half())\n",
            params={"dtype": "float16"},
        ),
    )
    non_examples = (
        "from torch import nn\ncriterion = nn.CrossEntropyLoss()\n"
        "loss = criterion(logits.half(), y)\n",
        "loss = criterion(logits, y)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if loss_call_kind(node, ctx) is None:
            return False
        arg = loss_input(node)  # type: ignore[arg-type]
        return arg is not None and _method_name_of(arg.value) not in ("half", "bfloat16", "to")

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.Call:
        assert isinstance(node, cst.Call)
        cast = _CASTS[self.params["dtype"]]
        input_arg, target_arg = loss_input(node), loss_target(node)
        assert input_arg is not None
        rewritten = with_arg_value(node, input_arg, method_call(input_arg.value, cast))
        # Class indices stay integers; float targets go down to the same precision.
        if target_arg is not None and loss_call_kind(node, ctx) not in CLASS_INDEX_LOSSES:
            target = next(arg for arg in rewritten.args if arg.value is target_arg.value)
            rewritten = with_arg_value(rewritten, target, method_call(target_arg.value, cast))
        return rewritten


def _method_name_of(expr: cst.BaseExpression) -> str | None:
    return method_name(expr) if isinstance(expr, cst.Call) else None


_LOOP_NAMES = ("param", "p", "weight")
_RANDOM_INITS = tuple(
    f"torch.nn.init.{name}"
    for name in (
        "kaiming_normal_",
        "kaiming_uniform_",
        "xavier_normal_",
        "xavier_uniform_",
        "normal_",
        "uniform_",
        "trunc_normal_",
        "orthogonal_",
    )
)


def _optimizer_parameters_owner(statement: cst.CSTNode, ctx: Context) -> cst.BaseExpression | None:
    """``model`` for a line ``opt = torch.optim.Adam(model.parameters(), ...)``."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign, cst.Expr)) else None
    if not isinstance(value, cst.Call) or optimizer_class(value, ctx) is None:
        return None
    params = find_arg(value, keyword="params", position=0)
    if (
        params is None
        or not isinstance(params.value, cst.Call)
        or method_name(params.value) != "parameters"
        or params.value.args
    ):
        return None
    owner = params.value.func.value  # type: ignore[union-attr]
    return owner if is_pure(owner) else None


class ZeroInit(Operator):
    """Initialise the weights to zero.

    Bug: a random initialiser applied to every layer of a kind (``kaiming_normal_`` in a
    loop over ``model.modules()``, an ``_init_weights(module)`` hook) becomes
    ``nn.init.zeros_``, or every parameter is zeroed right after the model is built.
    Impact: all units of a layer compute the same output and receive the same gradient,
    so symmetry is never broken; with everything zero the hidden activations and the
    gradients of all but the last bias are exactly zero, and the model predicts the
    class prior (loss stuck at its initial value, chance accuracy). Zeroing a single
    layer is left alone: the random layer after it breaks the symmetry. Fix: use a
    random initialiser (the PyTorch defaults are fine). Check: the params-changed check
    after one step (hidden weights never move) and the grad-norm log (zero).
    """

    name = "zero_init"
    category = "numerics"
    summary = "Weights initialised to zero: symmetry never broken, hidden layers stay dead."
    expected = "breaks_training"
    node_types = (cst.Call, cst.SimpleStatementLine)
    examples = (
        Example(
            before="from torch import nn\nfor m in model.modules():\n"
            "    if isinstance(m, nn.Conv2d):\n"
            "        nn.init.kaiming_normal_(m.weight, nonlinearity='relu')\n",
            after="from torch import nn\nfor m in model.modules():\n"
            "    if isinstance(m, nn.Conv2d):\n        nn.init.zeros_(m.weight)\n",
        ),
        Example(
            before="import torch.nn as nn\ndef init_weights(module):\n"
            "    nn.init.xavier_uniform_(module.weight)\n",
            after="import torch.nn as nn\ndef init_weights(module):\n"
            "    nn.init.zeros_(module.weight)\n",
        ),
        Example(
            before="import torch\n\ndef main():\n    model = Net()\n\n"
            "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n",
            after="import torch\n\ndef main():\n    model = Net()\n\n"
            "    for param in model.parameters():\n        torch.nn.init.zeros_(param)\n"
            "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)\n",
        ),
    )
    non_examples = (
        "from torch import nn\nfor m in model.modules():\n"
        "    nn.init.zeros_(m.bias)\n    nn.init.normal_(m.bias, std=0.01)\n",
        # one layer alone: the random layer after it still breaks the symmetry
        "from torch import nn\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        nn.init.normal_(self.head.weight, std=0.01)\n",
        # parameter groups: there is no single model to zero
        "import torch\nopt = torch.optim.SGD([{'params': a}, {'params': b}], lr=0.1)\n",
        "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 10)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if isinstance(node, cst.Call):
            return self._weight_init(node, ctx) is not None
        return (
            _optimizer_parameters_owner(node, ctx) is not None
            and module_alias(ctx, "torch.nn") is not None
            and fresh_name(ctx, node, _LOOP_NAMES) is not None
        )

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> Replacement:
        if isinstance(node, cst.Call):
            weight = self._weight_init(node, ctx)
            assert weight is not None
            zeros = node.func.with_changes(attr=cst.Name("zeros_"))  # type: ignore[union-attr]
            return node.with_changes(func=zeros, args=[cst.Arg(weight)])
        assert isinstance(node, cst.SimpleStatementLine)
        owner = _optimizer_parameters_owner(node, ctx)
        nn, name = module_alias(ctx, "torch.nn"), fresh_name(ctx, node, _LOOP_NAMES)
        assert owner is not None and nn is not None and name is not None
        loop = cst.parse_statement(
            f"for {name} in {ctx.code(owner)}.parameters():\n    {nn}.init.zeros_({name})\n"
        )
        return insert_before(node, loop)[node]

    def _weight_init(self, node: cst.Call, ctx: Context) -> cst.BaseExpression | None:
        """The weight a random initialiser fills (biases are left to their own bugs)."""
        if not resolve(node.func, ctx).matches(_RANDOM_INITS):
            return None
        if not isinstance(node.func, cst.Attribute):  # a bare imported name: leave it
            return None
        tensor = find_arg(node, keyword="tensor", position=0)
        if tensor is None:
            return None
        spelled = dotted_name(tensor.value) or ""
        if spelled.endswith("bias") or not _initialises_many_layers(tensor.value, node, ctx):
            return None
        return tensor.value


def _initialises_many_layers(weight: cst.BaseExpression, at: cst.CSTNode, ctx: Context) -> bool:
    """Is ``weight`` reached through a loop variable or an init function's parameter
    (``for m in self.modules(): ... m.weight``, ``def _init_weights(module)``)?

    Zeroing one layer (``self.head.weight``) is nearly harmless: the random layer after it
    breaks the symmetry. Zeroing every layer of a kind is the bug.
    """
    root = weight
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    if not isinstance(root, cst.Name) or root.value == "self":
        return False
    for ancestor in ctx.ancestors(at):
        if isinstance(ancestor, cst.For) and root.value in bound_names(ancestor.target):
            return True
        if isinstance(ancestor, cst.FunctionDef):
            return is_parameter(ancestor, root.value)
    return False


_ACTIVATION_CLASSES = (
    "ReLU",
    "LeakyReLU",
    "ReLU6",
    "PReLU",
    "ELU",
    "SELU",
    "GELU",
    "SiLU",
    "Mish",
    "Tanh",
    "Softplus",
)
_ACTIVATION_FUNCTIONS = {
    *(
        f"torch.nn.functional.{name}"
        for name in ("relu", "leaky_relu", "relu6", "elu", "selu", "gelu", "silu", "mish")
    ),
    *("torch.nn.functional.tanh", "torch.nn.functional.softplus"),
    *("torch.relu", "torch.tanh", "torch.nn.functional.relu_"),
}
_ACTIVATION_METHODS = ("relu", "relu_", "tanh")


def _in_model_code(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside an ``nn.Module`` subclass, or a ``forward`` function."""
    function = ctx.enclosing_function(node)
    if function is not None and function.name.value == "forward":
        return True
    owner = ctx.enclosing(node, cst.ClassDef)
    return isinstance(owner, cst.ClassDef) and is_module_class(owner, ctx)


class DropActivation(Operator):
    """Remove a hidden nonlinearity (``nn.ReLU()`` in a Sequential, ``F.relu(x)`` -> ``x``).

    Bug: an activation between two layers is lost (deleted while editing, or a layer
    list built without it). Impact: two stacked linear layers collapse into one linear
    map, so the network can only fit linear decision boundaries: on nearly linear tasks
    nothing shows, otherwise the loss plateaus above the reference and accuracy drops.
    Fix: put the nonlinearity back between the layers. Check: compare train/val curves
    with the reference (a higher floor), or overfit a small nonlinear batch; a model
    summary shows consecutive Linear layers.
    """

    name = "drop_activation"
    category = "numerics"
    summary = "A hidden nonlinearity removed: stacked linear layers collapse into one."
    expected = "degrades"
    node_types = (cst.Call,)
    examples = (
        Example(
            before="from torch import nn\n"
            "model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n",
            after="from torch import nn\nmodel = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))\n",
        ),
        Example(
            before="import torch.nn.functional as F\nfrom torch import nn\n"
            "class Net(nn.Module):\n    def forward(self, x):\n"
            "        x = F.relu(self.fc1(x))\n        return self.fc2(x)\n",
            after="import torch.nn.functional as F\nfrom torch import nn\n"
            "class Net(nn.Module):\n    def forward(self, x):\n"
            "        x = self.fc1(x)\n        return self.fc2(x)\n",
        ),
        Example(
            before="from torch import nn\nclass Net(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.act = nn.GELU()\n"
            "    def forward(self, x):\n        return self.fc2(self.act(self.fc1(x)))\n",
            after="from torch import nn\nclass Net(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.act = nn.GELU()\n"
            "    def forward(self, x):\n        return self.fc2(self.fc1(x))\n",
        ),
        Example(
            before="import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
            "        return self.fc2(self.fc1(x).relu())\n",
            after="import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
            "        return self.fc2(self.fc1(x))\n",
        ),
    )
    non_examples = (
        # a hinge loss is not an activation of the model
        "import torch.nn.functional as F\nloss = F.relu(1 - margin).mean()\n",
        "from torch import nn\nhead = nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())\n",
        "from torch import nn\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.act = nn.ReLU()\n",
    )

    def plan(self, node: cst.CSTNode, ctx: Context) -> dict[cst.CSTNode, Replacement] | None:
        if not isinstance(node, cst.Call):
            return None
        parent = ctx.parent(node)
        if nn_class(node, ctx, _ACTIVATION_CLASSES):
            sequential = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
            if isinstance(sequential, cst.Call) and nn_class(sequential, ctx, ("Sequential",)):
                return {sequential: without_element(sequential, parent)}  # type: ignore[arg-type]
            return None
        if not _in_model_code(node, ctx):
            return None
        positional = positional_args(node)
        if not node.args and method_name(node) in _ACTIVATION_METHODS:
            return {node: node.func.value}  # type: ignore[union-attr]
        if not positional:
            return None
        if resolve(node.func, ctx).matches(_ACTIVATION_FUNCTIONS) or module_constructors(
            node.func, ctx, node, _ACTIVATION_CLASSES
        ):
            return {node: positional[0].value}
        return None


_DROPOUT_CLASSES = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout")
_DROPOUT_FUNCTIONS = {
    f"torch.nn.functional.{name}"
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout")
}


class DropoutTooHigh(Operator):
    """Set the dropout probability far too high (``p=0.9`` by default).

    Bug: a dropout rate meant as a keep probability (Keras/TF1 ``keep_prob=0.9``) or a
    typo makes ``nn.Dropout`` drop most activations. Impact: training sees a network
    with a tenth of its units and noisy, rescaled activations: the training loss stays
    high and noisy, convergence slows, and validation (dropout off) lags the reference;
    small models underfit badly. Fix: use a small rate (0.1-0.5) and remember ``p`` is
    the probability of *dropping*. Check: compare train/val curves with the reference
    (training loss far above validation loss is the tell).
    """

    name = "dropout_too_high"
    category = "numerics"
    summary = "Dropout probability set to 0.9: most activations dropped in training."
    expected = "degrades"
    node_types = (cst.Call,)
    parameters = {"p": Param(0.9, "dropout probability")}
    examples = (
        Example(
            before="from torch import nn\nself.dropout = nn.Dropout(0.2)\n",
            after="from torch import nn\nself.dropout = nn.Dropout(0.9)\n",
        ),
        Example(
            before="import torch.nn.functional as F\n"
            "x = F.dropout(x, p=0.1, training=self.training)\n",
            after="import torch.nn.functional as F\n"
            "x = F.dropout(x, p=0.9, training=self.training)\n",
        ),
        Example(
            before="from torch import nn\nlayer = nn.Dropout()\n",
            after="from torch import nn\nlayer = nn.Dropout(0.95)\n",
            params={"p": 0.95},
        ),
    )
    non_examples = (
        "from torch import nn\nlayer = nn.Dropout(0.9)\n",
        "from torch import nn\nlayer = nn.Linear(4, 2)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if not _is_dropout(node, ctx):
            return False
        arg = _probability_arg(node, ctx)  # type: ignore[arg-type]
        current = 0.5 if arg is None else number_value(arg.value)  # 0.5: PyTorch's default
        return current is None or current < self.params["p"]

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.Call:
        assert isinstance(node, cst.Call)
        arg = _probability_arg(node, ctx)
        value = number_literal(float(self.params["p"]))
        if arg is not None:
            return with_arg_value(node, arg, value)
        if not node.args:
            return node.with_changes(args=[cst.Arg(value)])
        return with_keyword(node, "p", value)


def _is_dropout(node: cst.CSTNode, ctx: Context) -> bool:
    """``nn.Dropout(...)`` (and its 1d/2d/3d/alpha kin) or ``F.dropout(x, ...)``."""
    if not isinstance(node, cst.Call):
        return False
    if nn_class(node, ctx, _DROPOUT_CLASSES):
        return True
    return bool(node.args) and resolve(node.func, ctx).matches(_DROPOUT_FUNCTIONS)


def _probability_arg(node: cst.Call, ctx: Context) -> cst.Arg | None:
    """The argument holding p (first for the module, after the tensor for the function)."""
    position = 0 if nn_class(node, ctx, _DROPOUT_CLASSES) else 1
    return find_arg(node, keyword="p", position=position)


_ADAM_FAMILY = ("Adam", "AdamW", "Adamax", "NAdam", "RAdam")


class AdamEpsTooSmall(Operator):
    """Set Adam's ``eps`` to 1e-16, far below the 1e-8 default.

    Bug: ``eps`` guards the division by the root of the second-moment estimate; a tiny
    value removes that guard (often "tuned" to squeeze out accuracy, or a misread
    ``1e-6`` vs ``1e-16``). Impact: for parameters whose gradients are tiny or rare the
    update becomes ``m / sqrt(v)``, a full-size step in the sign of noise, which can blow
    up rarely-updated weights; on small dense models with healthy gradients
    ``sqrt(v)`` dwarfs both values and training is indistinguishable from the reference,
    so expect it to be silent here. Fix: keep ``eps`` at 1e-8 (or larger, 1e-6 for
    mixed precision). Check: update/weight ratio per parameter in the grad-norm log
    (spikes for rarely-updated weights).
    """

    name = "adam_eps_too_small"
    category = "numerics"
    summary = "Adam/AdamW eps set to 1e-16: no guard against tiny second moments."
    expected = "silent"
    node_types = (cst.Call,)
    parameters = {"eps": Param(1e-16, "epsilon of the Adam denominator")}
    examples = (
        Example(
            before="import torch\nopt = torch.optim.Adam(model.parameters(), lr=1e-3)\n",
            after="import torch\nopt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-16)\n",
        ),
        Example(
            before="from torch import optim\n"
            "self.optimizer = optim.AdamW(self.model.parameters(), eps=1e-8)\n",
            after="from torch import optim\n"
            "self.optimizer = optim.AdamW(self.model.parameters(), eps=1e-16)\n",
        ),
    )
    non_examples = (
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        "import torch\nopt = torch.optim.Adam(model.parameters(), eps=1e-20)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if optimizer_class(node, ctx) not in _ADAM_FAMILY:
            return False
        current = find_arg(node, keyword="eps")
        if current is None:
            return True
        value = number_value(current.value)
        return value is None or value > self.params["eps"]

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.Call:
        assert isinstance(node, cst.Call)
        return with_keyword(node, "eps", number_literal(float(self.params["eps"])))


_SPREADS = ("std", "var", "norm", "sqrt")
_GUARDED_FUNCTIONS = ("log", "log2", "log10", "sqrt", "rsqrt")


def _epsilon_split(node: cst.BinaryOperation) -> cst.BaseExpression | None:
    """The guarded term of ``term + eps`` (either order), eps a small literal or ``eps``."""
    if not isinstance(node.operator, cst.Add):
        return None
    for eps, term in ((node.right, node.left), (node.left, node.right)):
        value = number_value(eps)
        spelled = (dotted_name(eps) or "").rsplit(".", 1)[-1].lower()
        if (value is not None and 0 < value <= 1e-3) or spelled in ("eps", "epsilon"):
            return term
    return None


def _callee_tail(expr: cst.BaseExpression) -> str | None:
    if not isinstance(expr, cst.Call):
        return None
    return last_name(expr.func) or method_name(expr)


class MissingEpsilon(Operator):
    """Drop the epsilon that keeps a division, log or sqrt away from zero.

    Bug: ``x / (std + 1e-8)`` becomes ``x / std``, ``torch.log(p + 1e-8)`` becomes
    ``torch.log(p)``, ``std = x.std(0) + 1e-8`` loses its guard. Impact: harmless while
    the guarded value stays away from zero, so on clean data the run matches the
    reference; a constant feature (std 0), an empty class or a probability that
    underflows then yields inf/NaN that spreads through the whole model in one step.
    Fix: keep the epsilon (or clamp: ``p.clamp_min(1e-8)``). Check: a NaN check on
    inputs and loss (the NaN step in the loss log); a unit test with a constant column.
    """

    name = "missing_epsilon"
    category = "numerics"
    summary = "Epsilon removed from a denominator, log or sqrt: inf/NaN once it hits zero."
    expected = "silent"
    node_types = (cst.BinaryOperation,)
    examples = (
        Example(
            before="mean, std = X.mean(0), X.std(0) + 1e-8\n",
            after="mean, std = X.mean(0), X.std(0)\n",
        ),
        Example(
            before="x = (x - mu) / (sigma + 1e-6)\n",
            after="x = (x - mu) / sigma\n",
        ),
        Example(
            before="import torch\nloss = -torch.log(p + self.eps).mean()\n",
            after="import torch\nloss = -torch.log(p).mean()\n",
        ),
        Example(
            before="norm = (a * a + 1e-12).sqrt()\n",
            after="norm = (a * a).sqrt()\n",
        ),
    )
    non_examples = (
        "x = x + 1e-3 * noise\n",
        "lr = base_lr + 1e-4\n",
        "y = a / (b + 1.0)\n",
    )

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        if not isinstance(node, cst.BinaryOperation):
            return False
        term = _epsilon_split(node)
        if term is None:
            return False
        parent = ctx.parent(node)
        if isinstance(parent, cst.BinaryOperation):
            return isinstance(parent.operator, cst.Divide) and parent.right is node
        if isinstance(parent, cst.Arg):
            consumer = ctx.parent(parent)
            if _callee_tail(consumer) in _GUARDED_FUNCTIONS:  # type: ignore[arg-type]
                return True
        if isinstance(parent, cst.Attribute) and parent.attr.value in _GUARDED_FUNCTIONS:
            return True
        return _callee_tail(term) in _SPREADS

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.BaseExpression:
        assert isinstance(node, cst.BinaryOperation)
        term = _epsilon_split(node)
        assert term is not None
        if isinstance(term, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or term.lpar:
            return term
        return term.with_changes(lpar=node.lpar, rpar=node.rpar)
