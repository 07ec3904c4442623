"""Device rules: the model and its batches on different devices, discarded ``.to()``."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.facts import MODEL_NAMES, assigned_name, target_names
from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Node, Script
from mutator.semantics import callee_name, dotted_name

_SETUP = """
    import torch
    from torch import nn
    device = torch.device("cuda")
    criterion = nn.CrossEntropyLoss()
"""


def _model_moved(script: Script) -> bool:
    for call in script.calls_of("to_device"):
        if not isinstance(call.func, cst.Attribute):
            continue
        receiver = call.func.value
        if isinstance(receiver, cst.Call) and (callee_name(receiver) or "")[:1].isupper():
            return True  # Net().to(device)
        if _model_name(assigned_name(script, call) or ""):
            return True  # model = make_model(args).to(device): a factory function
        if _model_name(dotted_name(receiver) or ""):
            return True
    return False


# Methods that reshape or cast a tensor but leave it on its device: ``y.view(-1)`` is y.
_SAME_DEVICE = frozenset(
    {"view", "reshape", "flatten", "squeeze", "unsqueeze", "float", "long", "double", "contiguous"}
)


def _base_name(expr: cst.BaseExpression) -> str | None:
    """``targets.view(-1).long()`` -> ``targets``; a plain name is itself."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value not in _SAME_DEVICE:
            return None
        expr = expr.func.value
    return expr.value if isinstance(expr, cst.Name) else None


def _model_name(dotted: str) -> bool:
    name = dotted.rsplit(".", 1)[-1]
    return name in MODEL_NAMES or "model" in name


def _forward_arguments(script: Script, root: Node) -> set[str]:
    """Names that reach a model forward (its first argument) or a loss (input and target)
    inside ``root``, through reshapes and through names assigned from them there
    (``flat_y = y.reshape(-1)``). A loss computed on ``.cpu()`` values is left out."""
    names = set()
    for call in script.ctx.nodes_within(root, cst.Call):
        callee = (dotted_name(call.func) or "").rsplit(".", 1)[-1]
        positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
        if callee in MODEL_NAMES:
            args = positional[:1]
        elif script.loss_kind(call) is not None:
            args = positional[:2]
            if any(".cpu()" in script.ctx.code(arg.value) for arg in args):
                continue
        else:
            continue
        names |= {name for arg in args if (name := _base_name(arg.value)) is not None}
    for _ in range(3):  # aliases of aliases
        for name in list(names):
            for where, value in script.assignments.get(name, []):
                if script.ctx.within(root, where) and (base := _base_name(value)) is not None:
                    names.add(base)
    return names


def _batch_groups(script: Script, loop: cst.For) -> list[tuple[set[str], bool]]:
    """Names bound together as one batch in ``loop``, and whether the group stands alone:
    the loop's own target (``for x, y in loader``: a loader yields CPU tensors), and
    ``x, y = get_batch(...)`` from a function of this file that moves nothing. The latter
    counts only when a sibling is moved: ``get_batch`` may slice data already on the device."""
    groups = [(set(target_names(loop.target)), True)]
    for assign in script.ctx.nodes_within(loop.body, cst.Assign):
        if not isinstance(assign.value, cst.Call) or script.unit(assign) is not script.unit(loop):
            continue
        helpers = script.functions.get(callee_name(assign.value) or "", [])
        if not helpers or any(script.calls_of("to_device", helper) for helper in helpers):
            continue
        if any("device" in script.ctx.code(helper) for helper in helpers):
            continue
        names = {n for target in assign.targets for n in target_names(target.target)}
        if len(names) > 1:
            groups.append((names, False))
    return groups


class BatchNotMoved(LintRule):
    """The model is moved to a device but a batch tensor of the loop that feeds it (or the
    loss) is never moved. Reported at the loop. Only in a function (or module) that names a
    device: a helper that never does trains on whatever it is handed."""

    code = "TW401"
    category = "device"
    summary = "batch not moved to the device"
    operators = ("drop_input_to_device", "drop_target_to_device")
    invalid = (
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:  # <-
                x = x.to(device)
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
        in_training_script(
            """
            import torch.nn.functional as F
            model = nn.Linear(4, 2).to(device)
            for inputs, targets in loader:  # <-
                inputs = inputs.to(device)
                logits = model(inputs)
                loss = F.cross_entropy(logits.view(-1, 2), targets.view(-1))
            """,
            _SETUP,
        ),
        in_training_script(
            """
            def get_batch(source, i):
                return source[:, i : i + 8], source[:, i + 1 : i + 9]
            model = nn.Linear(4, 2).to(device)
            for i in range(0, 64, 8):  # <-
                x, y = get_batch(data, i)
                x = x.to(device)
                flat_y = y.reshape(-1)
                loss = criterion(model(x), flat_y)
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
        in_training_script(
            """
            def batchify(data, n):
                return data[: len(data) // n * n].view(n, -1).to(device)
            def get_batch(source, i):
                return source[:, i : i + 8], source[:, i + 1 : i + 9]
            model = nn.Linear(4, 2).to(device)
            train_data = batchify(corpus, 20)
            for i in range(0, 64, 8):
                data, targets = get_batch(train_data, i)
                loss = criterion(model(data), targets.view(-1))
            """,
            _SETUP,
        ),
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, lengths, y in loader:
                x, y = x.to(device), y.to(device)
                loss = criterion(model(x, lengths), y)
            """,
            _SETUP,
        ),
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            def calibrate(model, batches):
                for inp in batches:
                    model(*inp)
                for x, y in batches:
                    loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:
                out = model(x.to(device))
                loss = criterion(out.cpu(), y)
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        if not _model_moved(script):
            return
        for loop in script.ctx.nodes(cst.For):
            if not re.search(r"device|cuda", script.ctx.code(script.unit(loop))):
                continue  # a function that never names a device trains where it is handed
            moved_code = " ".join(
                script.ctx.code(call.func) for call in script.calls_of("to_device", loop.body)
            )

            def moved(name: str, code: str = moved_code) -> bool:
                return re.search(rf"\b{re.escape(name)}\.(to|cuda)\b", code) is not None

            used = _forward_arguments(script, loop.body)
            reported: set[str] = set()
            for names, alone in _batch_groups(script, loop):
                if not alone and not any(moved(name) for name in names):
                    continue
                for name in sorted(names & used - reported):
                    if not moved(name):
                        reported.add(name)
                        yield loop, f"batch tensor {name} is never moved to the model's device"


class ModelNotMoved(LintRule):
    """Batches are moved to ``device`` but the model never is (and nothing calls ``.cuda()``).
    A model is moved when ``.to(device)`` is called on it, on its constructor, or on
    whatever is bound to a model name (``model = AutoModel.from_pretrained(p).to(device)``)."""

    code = "TW402"
    category = "device"
    summary = "model not moved to the device"
    operators = ("drop_model_to_device",)
    invalid = (
        in_training_script(
            """
            model = nn.Linear(4, 2)
            for x, y in loader:
                x = x.to(device)  # <-
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:
                x = x.to(device)
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
        in_training_script(
            """
            from transformers import AutoModelForSequenceClassification
            model = AutoModelForSequenceClassification.from_pretrained(path).to(device)
            for batch in loader:
                batch = {k: v.to(device) for k, v in batch.items()}
                loss = model(**batch).loss
            """,
            _SETUP,
        ),
        in_training_script(
            """
            model = make_model(args).to(device)
            for x, y in loader:
                x = x.to(device)
                loss = criterion(model(x), y)
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
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


class DiscardedTo(LintRule):
    """``x.to(device)`` as a statement on a loop variable: tensors are not moved in place."""

    code = "TW403"
    category = "device"
    summary = ".to() result discarded"
    invalid = (
        in_training_script(
            """
            model = nn.Linear(4, 2).to(device)
            for x, y in loader:
                x.to(device)  # <-
            """,
            _SETUP,
        ),
    )
    valid = (
        in_training_script(
            """
            for x, y in loader:
                x = x.to(device)
            """,
            _SETUP,
        ),
    )

    def check(self, script: Script) -> Report:
        loop_names = {
            name for loop in script.ctx.nodes(cst.For) for name in target_names(loop.target)
        }
        for line in script.ctx.nodes(cst.SimpleStatementLine):
            for statement in line.body:
                if not (isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call)):
                    continue
                call = statement.value
                if script.kind(call) == "to_device" and isinstance(call.func, cst.Attribute):
                    receiver = dotted_name(call.func.value)
                    if receiver in loop_names:
                        yield (
                            call,
                            f"{receiver}.to(...) result is discarded (tensors are not moved in place)",
                        )
