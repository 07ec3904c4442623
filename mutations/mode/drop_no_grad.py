"""The ``drop_no_grad`` operator (DropNoGrad)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Replacement, Swap
from mutator.semantics import (
    dedented_body,
    disables_grad,
    method_name,
)


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


class DropNoGrad(Swap):
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

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | None:
        if isinstance(node, cst.Decorator):
            function = ctx.parent(node)
            if not disables_grad(node.decorator, ctx) or _touches_parameters(function, ctx):
                return None
            return cst.RemoveFromParent()
        assert isinstance(node, cst.With)
        kept = [item for item in node.items if not disables_grad(item.item, ctx)]
        if len(kept) == len(node.items) or _touches_parameters(node.body, ctx):
            return None
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return node.with_changes(items=kept)
        return cst.FlattenSentinel(dedented_body(node))
