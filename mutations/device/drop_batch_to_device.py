"""The ``drop_batch_to_device`` operators (DropInputToDevice, DropTargetToDevice)."""

from __future__ import annotations

import libcst as cst

from mutations.device._shared import is_device_move, only_logged
from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    LABEL_WORDS,
    dotted_name,
    identifier_words,
    is_model,
    receiver,
    without_tuple_element,
)

_INPUT_WORDS = frozenset(
    {"x", "xb", "xs", "input", "inputs", "image", "images", "img", "imgs", "data", "feature"}
    | {"features", "feats", "src", "tokens", "ids", "pixel", "seq", "seqs"}
)


def _role_by_name(name: str) -> str | None:
    words = identifier_words(name)
    is_target, is_input = bool(words & LABEL_WORDS), bool(words & _INPUT_WORDS)
    if is_target != is_input:
        return "target" if is_target else "input"
    return None


def _role_by_loop(name: str, ctx: Context) -> str | None:
    """``for a, b in loader`` / ``for i, (a, b) in enumerate(loader)``: a is input, b target."""
    for loop in ctx.nodes(cst.For):
        pair = loop.target
        if (
            isinstance(pair, cst.Tuple)
            and len(pair.elements) == 2
            and isinstance(pair.elements[1].value, cst.Tuple)
            and isinstance(loop.iter, cst.Call)
            and dotted_name(loop.iter.func) == "enumerate"
        ):
            pair = pair.elements[1].value
        if isinstance(pair, cst.Tuple) and len(pair.elements) == 2:
            names = [dotted_name(element.value) for element in pair.elements]
            if name in names:
                return "input" if names.index(name) == 0 else "target"
    return None


def _role(expr: cst.BaseExpression, ctx: Context) -> str | None:
    """ "input"/"target" for a batch variable (``x``, ``labels``, ``batch["labels"]``)."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            return _role_by_name(str(index.value.evaluated_value))
        return None
    name = dotted_name(expr)
    if name is None or "." in name:
        return None
    return _role_by_name(name) or _role_by_loop(name, ctx)


def _element_roles(assign: cst.Assign, ctx: Context) -> list[tuple[int, str | None]]:
    """For ``a, b = a.to(d), b.to(d)``: (index, role) of each element moved to a device."""
    target, value = assign.targets[0].target, assign.value
    if isinstance(target, cst.Tuple) and isinstance(value, cst.Tuple):
        if len(target.elements) != len(value.elements):
            return []
        pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
    else:
        pairs = [(target, value)]
    roles = []
    for index, (bound, moved) in enumerate(pairs):
        if is_device_move(moved, ctx) and not is_model(receiver(moved), ctx):
            # ``target_net = QNetwork(env).to(device)`` is a model, not the batch targets
            roles.append((index, _role(bound, ctx) or _role(receiver(moved), ctx)))
    return roles


_COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)


def _moves_whole_batch(call: cst.Call, ctx: Context) -> bool:
    """``[t.to(device) for t in batch]`` (or a generator, set or dict comprehension): the
    element moved is the comprehension's own loop variable, one tensor of the batch each."""
    comprehension = ctx.parent(call)
    if not isinstance(comprehension, _COMPREHENSIONS):
        return False
    moved = comprehension.value if isinstance(comprehension, cst.DictComp) else comprehension.elt
    if moved is not call or not isinstance(receiver(call), cst.Name):
        return False
    loop = comprehension.for_in
    return receiver(call).value in {  # type: ignore[attr-defined]
        name.value for name in ctx.nodes_within(loop.target, cst.Name)
    }


class _DropBatchToDevice(Swap):
    """Shared logic: drop the device move of one batch variable of a given role."""

    role = ""
    node_types = (cst.Assign, cst.Call)

    def _assign_index(self, node: cst.Assign, ctx: Context) -> int | None:
        if len(node.targets) != 1:
            return None
        return next((index for index, role in _element_roles(node, ctx) if role == self.role), None)

    def _is_assigned(self, call: cst.Call, ctx: Context) -> bool:
        """Is this move an assignment's value (or one element of it)? The Assign is the site."""
        parent = ctx.parent(call)
        if isinstance(parent, cst.Element):
            parent = ctx.parent(ctx.parent(parent))
        return isinstance(parent, cst.Assign)

    def _role_of_move(self, call: cst.Call, ctx: Context) -> str | None:
        if _moves_whole_batch(call, ctx):
            return "input"  # [t.to(device) for t in batch]: the inputs (and all else) stay
        return _role(receiver(call), ctx)

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        if isinstance(node, cst.Call):
            if (
                not is_device_move(node, ctx)
                or self._is_assigned(node, ctx)
                or self._role_of_move(node, ctx) != self.role
            ):
                return None
            return receiver(node)  # model(x.to(device)) -> model(x)
        assert isinstance(node, cst.Assign)
        index = self._assign_index(node, ctx)
        if index is None:
            return None
        logger = only_logged(node, ctx)
        if logger is not None:
            return NonSite(f"the moved batch only feeds `{logger}`: no training step reads it")
        target, value = node.targets[0].target, node.value
        if not isinstance(value, cst.Tuple):
            assert isinstance(value, cst.Call)
            if dotted_name(target) == dotted_name(receiver(value)):
                return cst.RemoveFromParent()  # x = x.to(device)
            return node.with_changes(value=receiver(value))
        assert isinstance(target, cst.Tuple)
        moved = value.elements[index].value
        assert isinstance(moved, cst.Call)
        if dotted_name(target.elements[index].value) == dotted_name(receiver(moved)):
            # x, y = x.to(device), y.to(device) -> y = y.to(device)
            return node.with_changes(
                targets=[node.targets[0].with_changes(target=without_tuple_element(target, index))],
                value=without_tuple_element(value, index),
            )
        elements = list(value.elements)
        elements[index] = elements[index].with_changes(value=receiver(moved))
        return node.with_changes(value=value.with_changes(elements=elements))


class DropInputToDevice(_DropBatchToDevice):
    """Leave the batch inputs where the loader put them: drop ``x = x.to(device)`` (or the
    input's part of ``x, y = x.to(device), y.to(device)``, or ``model(x.to(device))``).

    A batch moved as a whole (``[t.to(device) for t in batch]``) loses the move of every
    tensor, inputs first. Bug: the model is on the accelerator, its inputs stay on the CPU.
    Impact: on a GPU the
    first forward raises "Expected all tensors to be on the same device" (a crash, not a
    silent error); on a CPU-only run nothing changes, which is exactly why the bug ships
    from a laptop. The role comes from the name (``x``, ``inputs``, ``images``,
    ``input_ids``) or, failing that, from the loop (``for a, b in loader``: ``a``). Fix:
    move every tensor of the batch with the model's device (``x = x.to(device)``). Check:
    a GPU run (or a smoke test with ``device="meta"``); assert
    ``x.device == next(model.parameters()).device`` in the training step.
    """

    name = "drop_input_to_device"
    category = "device"
    summary = "Do not move the batch inputs to the device (crash on GPU, no effect on CPU)."
    expected = "silent"
    witness = "device", "a tensor on another device reaches an op (.to is a no-op on CPU)"
    crashes = ("same device", "should be the same", "device type")
    role = "input"
    examples = (
        Example(
            before="""
                for x, y in loader:
                    x, y = x.to(device), y.to(device)
            """,
            after="""
                for x, y in loader:
                    y = y.to(device)
            """,
        ),
        Example(
            before="""
                for data, target in loader:
                    data = data.cuda()
                    target = target.cuda()
            """,
            after="""
                for data, target in loader:
                    target = target.cuda()
            """,
        ),
        Example(
            before="""
                for a, b in loader:
                    out = model(a.to(device, non_blocking=True))
            """,
            after="""
                for a, b in loader:
                    out = model(a)
            """,
        ),
        Example(
            before="ids = batch['input_ids'].to(self.device)\n",
            after="ids = batch['input_ids']\n",
        ),
        # The whole batch moved in a comprehension (issue 22): every tensor of it stays.
        Example(
            before="""
                for batch in loader:
                    x, y = [t.to(device) for t in batch]
            """,
            after="""
                for batch in loader:
                    x, y = [t for t in batch]
            """,
        ),
        Example(
            before="batch = {k: v.to(device) for k, v in batch.items()}\n",
            after="batch = {k: v for k, v in batch.items()}\n",
        ),
    )
    non_examples = (
        "x = x.to(torch.float32)\n",
        "model = model.to(device)\n",
        "y = y.to(device)\n",
        "x = x.to(device, dtype=torch.float16)\n",
        """
            import torch


            def export_onnx(model, path, device):
                model.eval()
                images = torch.randn(1, 3, 8, 8).to(device)
                torch.onnx.export(model, images, path)
        """,
        # A sample batch moved only to trace the model for TensorBoard (issue 29).
        """
            images, labels = next(iter(train_loader))
            images = images.to(device)
            writer.add_graph(model, images)
        """,
    )


class DropTargetToDevice(_DropBatchToDevice):
    """Leave the batch targets on the CPU: drop ``y = y.to(device)`` (or the target's part of
    ``x, y = x.to(device), y.to(device)``, or ``criterion(out, y.to(device))``).

    Bug: the model and its outputs are on the accelerator, the labels are not. Impact: on a
    GPU the loss raises a device-mismatch error (crash) at the first step; on a CPU-only run
    nothing changes. The role comes from the name (``y``, ``labels``, ``targets``) or from
    the loop (``for a, b in loader``: ``b``). Fix: move the targets with the inputs
    (``x, y = x.to(device), y.to(device)``). Check: a GPU run, or a smoke test on the
    ``meta`` device; assert ``y.device == logits.device`` before the loss.
    """

    name = "drop_target_to_device"
    category = "device"
    summary = "Do not move the batch targets to the device (crash on GPU, no effect on CPU)."
    expected = "silent"
    witness = "device", "a tensor on another device reaches an op (.to is a no-op on CPU)"
    crashes = ("same device", "should be the same", "device type")
    role = "target"
    examples = (
        Example(
            before="""
                for x, y in loader:
                    x, y = x.to(device), y.to(device)
            """,
            after="""
                for x, y in loader:
                    x = x.to(device)
            """,
        ),
        Example(
            before="""
                for i, (inp, lab) in enumerate(loader):
                    loss = crit(model(inp), lab.cuda())
            """,
            after="""
                for i, (inp, lab) in enumerate(loader):
                    loss = crit(model(inp), lab)
            """,
        ),
        Example(
            before="images, labels = batch[0].to(device), batch[1].to(device)\n",
            after="images, labels = batch[0].to(device), batch[1]\n",
        ),
    )
    non_examples = (
        "x = x.to(device)\n",
        # An RL target network, not the batch targets (issue 22, cleanrl).
        """
            import torch.nn as nn
            class QNetwork(nn.Module):
                pass
            target_network = QNetwork(envs).to(device)
        """,
        "labels = labels.to(torch.long)\n",
        "y = y.to(device=device, dtype=torch.float32)\n",
    )
