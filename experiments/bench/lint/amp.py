"""Mixed-precision rules: float16 gradients without a GradScaler, clipping scaled gradients."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.rule import LintRule, Report, in_training_script
from experiments.bench.lint.script import Script
from mutator.semantics import (
    bound_names,
    constructor_kind,
    dotted_name,
    find_arg,
    is_false,
    method_name,
    receiver,
    receiver_kind,
    resolve,
)

# Libraries that scale the loss themselves (``accelerator.backward(loss)``, apex, Fabric).
_SELF_SCALING = re.compile(r"\baccelerator\b|\bamp\.scale_loss\b|\bdeepspeed\b|\bfabric\b")
_AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast"})
_AMP_SETUP = """
    import torch
    from torch import nn
    model = nn.Linear(4, 2).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
"""


def _example(body: str) -> str:
    return in_training_script(body, _AMP_SETUP)


def _plain_backwards(script: Script) -> list[cst.Call]:
    """``loss.backward()`` on a tensor (not ``scaler.scale(loss).backward()``)."""
    return [
        call
        for call in script.calls_of("backward")
        if isinstance(call.func, cst.Attribute) and isinstance(receiver(call), cst.Name)
    ]


def _scalers(script: Script) -> list[cst.Call]:
    return [call for call in script.calls if constructor_kind(call, script.ctx) == "scaler"]


def _float16_autocast(script: Script, call: cst.Call) -> bool:
    """``autocast`` that computes in float16: ``dtype=torch.float16``, or no dtype on CUDA
    (``torch.cuda.amp.autocast()``, ``torch.autocast("cuda")``)."""
    names = set(resolve(call.func, script.ctx, strict=False).names)
    if not names & _AUTOCAST:
        return False
    dtype = find_arg(call, keyword="dtype")
    if dtype is not None:
        return script.ctx.code(dtype.value).split(".")[-1] in {"float16", "half"}
    if "torch.cuda.amp.autocast" in names:
        return True
    device = find_arg(call, keyword="device_type", position=0)
    return device is not None and script.ctx.code(device.value) in {'"cuda"', "'cuda'"}


class AmpWithoutGradScaler(LintRule):
    """float16 autocast with a plain ``loss.backward()``: small gradients underflow to zero
    in half precision. Two shapes: a GradScaler is built but nothing in the file calls
    ``.scale(...)``; or there is no GradScaler at all and a ``with`` block autocasts to
    float16 (an explicit ``dtype=torch.float16``, or CUDA autocast without a dtype).

    Without a GradScaler, only when the backwarded loss is computed in the float16 block
    (an autocast around a teacher's or an evaluation forward is not this bug). Silent for
    bfloat16 and an unknown dtype, for ``GradScaler(enabled=False)`` and a scaler handed to
    code outside the file, and where a library scales the loss (Accelerate's
    ``accelerator.backward``, apex, DeepSpeed, Fabric)."""

    code = "TW117"
    category = "numerics"
    summary = "float16 autocast without a GradScaler"
    operators = ("amp_without_grad_scaler",)
    invalid = (
        _example(
            """
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                opt.zero_grad()
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                loss.backward()  # <-
                opt.step()
            """
        ),
        _example(
            """
            for x, y in loader:
                opt.zero_grad()
                with torch.cuda.amp.autocast():
                    loss = criterion(model(x), y)
                loss.backward()  # <-
                opt.step()
            """
        ),
    )
    valid = (
        _example(
            """
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                opt.zero_grad()
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            """
        ),
        _example(
            """
            for x, y in loader:
                opt.zero_grad()
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                    loss = criterion(model(x), y)
                loss.backward()
                opt.step()
            """
        ),
        _example(
            """
            for x, y in loader:
                with accelerator.autocast():
                    loss = criterion(model(x), y)
                accelerator.backward(loss)
                opt.step()
            """
        ),
        _example(
            """
            for x, y in loader:
                with torch.autocast(device_type=device.type, dtype=amp_dtype):
                    loss = criterion(model(x), y)
                loss.backward()
                opt.step()
            """
        ),
        _example(
            """
            for x, y in loader:
                opt.zero_grad()
                with torch.no_grad(), torch.cuda.amp.autocast():
                    target = teacher(x)
                loss = criterion(model(x), target.float())
                loss.backward()
                opt.step()
            """
        ),
        _example(
            """
            scaler = torch.cuda.amp.GradScaler(enabled=False)
            for x, y in loader:
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                opt.step()
            """
        ),
    )

    def check(self, script: Script) -> Report:
        plain = _plain_backwards(script)
        if not plain or _SELF_SCALING.search(script.file.source):
            return
        scalers = _scalers(script)
        if scalers:
            unused = not any(method_name(call) == "scale" for call in script.calls)
            if unused and not any(_disabled(s) or _handed_over(script, s) for s in scalers):
                yield plain[0], "a GradScaler is built but the loss is never scaled"
            return
        for call in plain:
            if _loss_under_float16(script, call):
                yield call, "float16 autocast without a GradScaler: small gradients underflow"
                return


def _disabled(scaler: cst.Call) -> bool:
    """``GradScaler(enabled=False)``: a scaler that does nothing (AMP switched off)."""
    enabled = find_arg(scaler, keyword="enabled")
    return enabled is not None and is_false(enabled.value)


def _handed_over(script: Script, scaler: cst.Call) -> bool:
    """Is the scaler passed to code outside this file (a trainer that scales the loss)?"""
    statement = script.ctx.statement_of(scaler)
    if not (
        isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Assign)
    ):
        return True  # not bound to a name: it went somewhere we cannot follow
    names = {n for t in statement.body[0].targets for n in bound_names(t.target)}
    for arg in script.ctx.nodes(cst.Arg):
        call = script.ctx.parent(arg)
        if dotted_name(arg.value) in names and not script.local_callees(call):  # type: ignore[arg-type]
            return True
    return False


def _loss_under_float16(script: Script, backward: cst.Call) -> bool:
    """Is the backwarded tensor assigned (or backward() called) inside a float16 autocast
    ``with`` block? An autocast used only for a teacher's or an evaluation forward is not."""
    name = dotted_name(receiver(backward))
    for with_node in script.ctx.nodes(cst.With):
        autocasts = [i.item for i in with_node.items if isinstance(i.item, cst.Call)]
        if not any(_float16_autocast(script, item) for item in autocasts):
            continue
        if script.ctx.within(with_node, backward):
            return True
        for assign in script.ctx.nodes_within(with_node.body, cst.Assign):
            bound = {n for t in assign.targets for n in bound_names(t.target)}
            if name in bound and script.unit(assign) is script.unit(backward):
                return True
    return False


class ClipWithoutUnscale(LintRule):
    """Gradients clipped after ``scaler.scale(loss).backward()`` and before
    ``scaler.step(...)``, with no ``scaler.unscale_(optimizer)`` anywhere in the file: the
    clip compares norms multiplied by the loss scale (65536 at first) and shrinks every
    update."""

    code = "TW118"
    category = "gradient"
    summary = "clipping scaled gradients"
    operators = ("clip_without_unscale",)
    invalid = (
        _example(
            """
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                opt.zero_grad()
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # <-
                scaler.step(opt)
                scaler.update()
            """
        ),
    )
    valid = (
        _example(
            """
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                opt.zero_grad()
                with torch.autocast(device_type="cuda", dtype=torch.float16):
                    loss = criterion(model(x), y)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
            """
        ),
        _example(
            """
            for x, y in loader:
                opt.zero_grad()
                criterion(model(x), y).backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            """
        ),
        _example(
            """
            scaler = torch.cuda.amp.GradScaler()
            for x, y in loader:
                opt.zero_grad()
                scaler.scale(criterion(model(x), y)).backward()
                scaler.step(opt)
                scaler.update()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """
        ),
    )

    def check(self, script: Script) -> Report:
        if any(method_name(call) == "unscale_" for call in script.calls):
            return
        for clip in script.calls_of("clip"):
            calls = script.calls_in_unit(script.unit(clip))
            scaled = [c for c in calls if _scaled_backward(c) and script.before(c, clip)]
            steps = [c for c in calls if _scaler_step(script, c) and script.before(clip, c)]
            if scaled and steps:
                yield (
                    clip,
                    "gradients clipped while still multiplied by the loss scale (unscale_ first)",
                )


def _scaled_backward(call: cst.Call) -> bool:
    inner = receiver(call) if method_name(call) == "backward" else None
    return isinstance(inner, cst.Call) and method_name(inner) == "scale"


def _scaler_step(script: Script, call: cst.Call) -> bool:
    if method_name(call) != "step" or not isinstance(call.func, cst.Attribute):
        return False
    return receiver_kind(call.func.value, script.ctx) == "scaler"
