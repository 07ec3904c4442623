"""The ``drop_state_restore`` operators (ResumeWithoutOptimizerState, DropLoadStateDict, DropSchedulerStateOnResume)."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, NonSite, Replacement, Swap
from mutator.semantics import (
    after_training_loop,
    code_of,
    expression_call,
    find_arg,
    method_name,
    method_statement_receiver,
    receiver_kind,
    values_of,
)
from mutator.semantics.loops import runs_last

# Objects whose state is not the model's: everything else that loads a state dict is
# treated as (part of) the model (``model``, ``self.net``, ``model.module``, ``ema``).
_NOT_MODEL = frozenset({"optimizer", "scheduler", "scaler"})


class _DropStateRestore(Swap):
    """Shared logic: delete a ``x.load_state_dict(...)`` line when ``x`` is of the right kind."""

    node_types = (cst.SimpleStatementLine,)

    def restores(self, kind: str | None) -> bool:
        """Does a receiver of this kind (``receiver_kind``) hold the state this bug drops?"""
        raise NotImplementedError

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        receiver = method_statement_receiver(node, "load_state_dict")
        if receiver is None or not self.restores(receiver_kind(receiver, ctx)):
            return None
        return cst.RemoveFromParent()


class ResumeWithoutOptimizerState(_DropStateRestore):
    """Delete ``optimizer.load_state_dict(...)`` where a checkpoint is restored.

    Bug: the resume path restores the model (and maybe the scheduler) but not the
    optimizer. Impact: Adam's moment estimates and step counter restart from zero, so the
    first updates after the resume are full-size, bias-corrected steps on a trained
    model (SGD loses its momentum buffer): the loss jumps up right after resuming and
    takes a while to recover; the final result is often slightly worse. Fix: save
    ``optimizer.state_dict()`` in the checkpoint and load it on resume. Check: compare
    train/val curves of a resumed run with an uninterrupted one (a spike at the resume
    step), or assert ``optimizer.state`` is non-empty after loading.
    """

    name = "resume_without_optimizer_state"
    category = "checkpoint"
    summary = "Skip optimizer.load_state_dict on resume: Adam moments reset, loss spikes."
    expected = "degrades"
    witness = (
        "fewer optimizer_state|optimizer_loads",
        "the saved optimizer state is never loaded: it resumes empty (no moments)",
    )
    examples = (
        Example(
            before="""
                ckpt = torch.load(path)
                model.load_state_dict(ckpt['model'])
                optimizer.load_state_dict(ckpt['optimizer'])
                start_epoch = ckpt['epoch'] + 1
            """,
            after="""
                ckpt = torch.load(path)
                model.load_state_dict(ckpt['model'])
                start_epoch = ckpt['epoch'] + 1
            """,
        ),
        Example(
            before="""
                class Trainer:
                    def resume(self, state):
                        self.model.load_state_dict(state['model'])
                        self.optimizer.load_state_dict(state['optimizer'])
            """,
            after="""
                class Trainer:
                    def resume(self, state):
                        self.model.load_state_dict(state['model'])
            """,
        ),
    )
    non_examples = (
        """
            model.load_state_dict(ckpt['model'])
            scheduler.load_state_dict(ckpt['scheduler'])
        """,
        "torch.save({'optimizer': optimizer.state_dict()}, path)\n",
    )

    def restores(self, kind: str | None) -> bool:
        return kind == "optimizer"


class DropLoadStateDict(_DropStateRestore):
    """Delete ``model.load_state_dict(...)`` where a checkpoint is restored.

    Bug: the restore code loads everything except the model weights (a line lost in a
    refactor, a key renamed and the load removed "temporarily"). Impact: on resume the
    run silently restarts from freshly initialised weights while the epoch counter,
    optimizer state and learning-rate schedule continue where they were, so the loss
    jumps back to its initial value, and with a decayed learning rate it may never
    recover; an evaluation script reports chance-level accuracy. Fix: load the model's
    state dict (and check the returned missing/unexpected keys). Check: evaluate right
    after loading (loss should match the checkpoint's), or compare train/val curves of
    a resumed run with an uninterrupted one. A copy from a live ``state_dict()`` (an RL
    target network's sync) is no restore, and a reload that is the last thing the script
    runs is equivalent: nothing uses the weights (issue 22: LLMs-from-scratch's "save and
    load model" demo after ``main()`` trained).
    """

    name = "drop_load_state_dict"
    category = "checkpoint"
    summary = "Skip model.load_state_dict on resume: training restarts from random weights."
    expected = "degrades"
    witness = "fewer module_loads", "the resumed model's load_state_dict never runs"
    examples = (
        Example(
            before="""
                ckpt = torch.load(path)
                model.load_state_dict(ckpt['model'])
                optimizer.load_state_dict(ckpt['optimizer'])
            """,
            after="""
                ckpt = torch.load(path)
                optimizer.load_state_dict(ckpt['optimizer'])
            """,
        ),
        Example(
            before="""
                if args.resume:
                    self.net.load_state_dict(torch.load(args.resume, map_location=device))
            """,
            after="""
                if args.resume:
                    pass
            """,
        ),
    )
    non_examples = (
        """
            opt.load_state_dict(state['opt'])
            lr_scheduler.load_state_dict(state['sched'])
        """,
        "scaler.load_state_dict(state['scaler'])\n",
        # The best epoch's weights put back for testing: no resume.
        """
            import copy
            best_state = copy.deepcopy(model.state_dict())
            for epoch in range(epochs):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            model.load_state_dict(best_state)
        """,
        """
            import torch
            for epoch in range(epochs):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
            with open(path, "rb") as f:
                model.load_state_dict(torch.load(f))
        """,
        # The returned keys are used: not a plain restore line.
        "missing, unexpected = model.load_state_dict(sd, strict=False)\n",
        # An RL target network synced from the online one: a weight copy, no resume
        # (issue 22, seen in minimalRL and cleanrl).
        "q_target.load_state_dict(q.state_dict())\n",
        # The last line of the script: nothing uses the reloaded weights (issue 22).
        """
            import torch
            if __name__ == "__main__":
                model = main()
                torch.save(model.state_dict(), "model.pth")
                model = GPTModel(config)
                model.load_state_dict(torch.load("model.pth"))
        """,
    )

    def restores(self, kind: str | None) -> bool:
        return kind not in _NOT_MODEL

    def swap(self, node: cst.CSTNode, ctx: Context) -> Replacement | NonSite | None:
        found = super().swap(node, ctx)
        if found is not None and (after_training_loop(node, ctx) or _restores_memory(node, ctx)):
            return NonSite("the best epoch's weights put back for testing, not a resume")
        model = method_statement_receiver(node, "load_state_dict")
        if found is not None and isinstance(model, cst.Name) and runs_last(node, ctx):
            return NonSite(
                "equivalent: the script ends right after the load; nothing uses the weights"
            )
        return found


def method_name_of(expr: cst.BaseExpression) -> str | None:
    return method_name(expr) if isinstance(expr, cst.Call) else None


def _restores_memory(statement: cst.CSTNode, ctx: Context) -> bool:
    """``model.load_state_dict(best_state)`` with ``best_state`` a copy of a live
    ``state_dict()`` (kept in memory during this run, not loaded from a checkpoint)."""
    call = expression_call(statement)
    state = find_arg(call, "state_dict", 0) if call is not None else None
    if state is None:
        return False
    if method_name_of(state.value) == "state_dict":
        return True  # ``target.load_state_dict(net.state_dict())``: a weight copy (RL target nets)
    values = values_of(state.value, ctx, statement)
    return bool(values) and all("state_dict()" in code_of(value) for value in values)


class DropSchedulerStateOnResume(_DropStateRestore):
    """Delete ``scheduler.load_state_dict(...)`` where a checkpoint is restored.

    Bug: the resume path restores model and optimizer but not the learning-rate
    scheduler. Impact: the scheduler's step counter restarts at zero while the optimizer
    keeps its restored learning rate. Closed-form schedules (``LambdaLR``, ``OneCycleLR``,
    warm-up) jump back to their starting rate, so a nearly converged model receives large
    updates again: a loss spike after the resume and a worse final metric; chainable ones
    (``StepLR``, ``MultiStepLR``) repeat their decays from the restored rate, so the rate
    ends too low. Fix: save ``scheduler.state_dict()`` and load it on resume. Check: log
    the learning rate per step (discontinuous at the resume), or compare train/val
    curves of a resumed and an uninterrupted run.
    """

    name = "drop_scheduler_state_on_resume"
    category = "checkpoint"
    summary = "Skip scheduler.load_state_dict on resume: the LR schedule restarts."
    expected = "degrades"
    witness = "differs lr", "the learning rates after resuming differ (schedule restarted)"
    examples = (
        Example(
            before="""
                optimizer.load_state_dict(ckpt['optimizer'])
                scheduler.load_state_dict(ckpt['scheduler'])
            """,
            after="optimizer.load_state_dict(ckpt['optimizer'])\n",
        ),
        Example(
            before="""
                from torch.optim.lr_scheduler import OneCycleLR
                policy = OneCycleLR(opt, max_lr=0.1, total_steps=100)
                policy.load_state_dict(state['policy'])
            """,
            after="""
                from torch.optim.lr_scheduler import OneCycleLR
                policy = OneCycleLR(opt, max_lr=0.1, total_steps=100)
            """,
        ),
    )
    non_examples = (
        """
            model.load_state_dict(ckpt['model'])
            optimizer.load_state_dict(ckpt['optimizer'])
        """,
        "state = scheduler.state_dict()\n",
    )

    def restores(self, kind: str | None) -> bool:
        return kind == "scheduler"
