"""Checkpoint rules: state saved but not restored, a "best" state that is a live view."""

from __future__ import annotations

import re

import libcst as cst

from experiments.bench.lint.rule import LintRule, Report
from experiments.bench.lint.script import Script
from mutator.semantics import callee_name, method_name


class CheckpointNotRestored(LintRule):
    """A checkpoint dict saves a ``model``/``optimizer``/``scheduler`` state that nothing
    restores with ``load_state_dict`` after ``torch.load``. Reported at the load."""

    code = "TW801"
    category = "checkpoint"
    summary = "checkpoint state not restored"
    operators = (
        "resume_without_optimizer_state",
        "drop_scheduler_state_on_resume",
        "drop_load_state_dict",
    )
    confidence = "medium"
    invalid = (
        """
        import torch
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
        state = torch.load(path)  # <-
        model.load_state_dict(state["model"])
        """,
    )
    valid = (
        """
        import torch
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
        state = torch.load(path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        """,
    )

    def check(self, script: Script) -> Report:
        if not script.mentions(r"torch\.load\(") or not script.mentions(r"save"):
            return
        loads = " ".join(
            script.ctx.code(call.func)
            for call in script.calls
            if method_name(call) == "load_state_dict"
        )
        for role in ("optimizer", "scheduler", "model"):
            saved = script.mentions(rf"['\"]{role}['\"]\s*:")
            if saved and not re.search(rf"{role[:3]}\w*\.load_state_dict", loads):
                for call in script.calls:
                    if callee_name(call) == "load" and "torch" in script.ctx.code(call.func):
                        yield (
                            call,
                            f"the checkpoint holds the {role} state but it is never restored",
                        )
                        break


class BestStateAlias(LintRule):
    """``best_state = model.state_dict()`` without a copy: the dict holds the live tensors,
    so the "best" weights keep changing with training."""

    code = "TW802"
    category = "checkpoint"
    summary = "best state without a copy"
    operators = ("best_state_without_copy",)
    invalid = (
        """
        best_state = model.state_dict()  # <-
        """,
    )
    valid = (
        """
        import copy
        best_state = copy.deepcopy(model.state_dict())
        """,
    )

    def check(self, script: Script) -> Report:
        for name, assigned in script.assignments.items():
            if "best" not in name.lower():
                continue
            for where, value in assigned:
                if isinstance(value, cst.Call) and method_name(value) == "state_dict":
                    yield (
                        where,
                        f"{name} = ...state_dict() without a copy: it keeps tracking the live weights",
                    )
