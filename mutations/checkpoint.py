"""Checkpoint bugs: state that is not restored on resume, or not really saved."""

from __future__ import annotations

import libcst as cst

from mutator.context import Context
from mutator.operator import Example, Operator
from mutator.semantics import (
    callee_name,
    method_name,
    method_statement_receiver,
    receiver_kind,
    resolve,
)

# Objects whose state is not the model's: everything else that loads a state dict is
# treated as (part of) the model (``model``, ``self.net``, ``model.module``, ``ema``).
_NOT_MODEL = frozenset({"optimizer", "scheduler", "scaler"})


class _DropStateRestore(Operator):
    """Shared logic: delete a ``x.load_state_dict(...)`` line when ``x`` is of the right kind."""

    node_types = (cst.SimpleStatementLine,)

    def restores(self, kind: str | None) -> bool:
        """Does a receiver of this kind (``receiver_kind``) hold the state this bug drops?"""
        raise NotImplementedError

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        receiver = method_statement_receiver(node, "load_state_dict")
        return receiver is not None and self.restores(receiver_kind(receiver, ctx))

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.RemovalSentinel:
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
    examples = (
        Example(
            before=(
                "ckpt = torch.load(path)\nmodel.load_state_dict(ckpt['model'])\n"
                "optimizer.load_state_dict(ckpt['optimizer'])\nstart_epoch = ckpt['epoch'] + 1\n"
            ),
            after=(
                "ckpt = torch.load(path)\nmodel.load_state_dict(ckpt['model'])\n"
                "start_epoch = ckpt['epoch'] + 1\n"
            ),
        ),
        Example(
            before=(
                "class Trainer:\n    def resume(self, state):\n"
                "        self.model.load_state_dict(state['model'])\n"
                "        self.optimizer.load_state_dict(state['optimizer'])\n"
            ),
            after=(
                "class Trainer:\n    def resume(self, state):\n"
                "        self.model.load_state_dict(state['model'])\n"
            ),
        ),
    )
    non_examples = (
        "model.load_state_dict(ckpt['model'])\nscheduler.load_state_dict(ckpt['scheduler'])\n",
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
    a resumed run with an uninterrupted one.
    """

    name = "drop_load_state_dict"
    category = "checkpoint"
    summary = "Skip model.load_state_dict on resume: training restarts from random weights."
    expected = "degrades"
    examples = (
        Example(
            before=(
                "ckpt = torch.load(path)\nmodel.load_state_dict(ckpt['model'])\n"
                "optimizer.load_state_dict(ckpt['optimizer'])\n"
            ),
            after="ckpt = torch.load(path)\noptimizer.load_state_dict(ckpt['optimizer'])\n",
        ),
        Example(
            before=(
                "if args.resume:\n"
                "    self.net.load_state_dict(torch.load(args.resume, map_location=device))\n"
            ),
            after="if args.resume:\n    pass\n",
        ),
    )
    non_examples = (
        "opt.load_state_dict(state['opt'])\nlr_scheduler.load_state_dict(state['sched'])\n",
        "scaler.load_state_dict(state['scaler'])\n",
        # The returned keys are used: not a plain restore line.
        "missing, unexpected = model.load_state_dict(sd, strict=False)\n",
    )

    def restores(self, kind: str | None) -> bool:
        return kind not in _NOT_MODEL


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
    examples = (
        Example(
            before=(
                "optimizer.load_state_dict(ckpt['optimizer'])\n"
                "scheduler.load_state_dict(ckpt['scheduler'])\n"
            ),
            after="optimizer.load_state_dict(ckpt['optimizer'])\n",
        ),
        Example(
            before=(
                "from torch.optim.lr_scheduler import OneCycleLR\n"
                "policy = OneCycleLR(opt, max_lr=0.1, total_steps=100)\n"
                "policy.load_state_dict(state['policy'])\n"
            ),
            after=(
                "from torch.optim.lr_scheduler import OneCycleLR\n"
                "policy = OneCycleLR(opt, max_lr=0.1, total_steps=100)\n"
            ),
        ),
    )
    non_examples = (
        "model.load_state_dict(ckpt['model'])\noptimizer.load_state_dict(ckpt['optimizer'])\n",
        "state = scheduler.state_dict()\n",
    )

    def restores(self, kind: str | None) -> bool:
        return kind == "scheduler"


class BestStateWithoutCopy(Operator):
    """Keep the "best" weights as ``model.state_dict()`` without copying them.

    Bug: ``best_state = copy.deepcopy(model.state_dict())`` becomes
    ``best_state = model.state_dict()``. A state dict holds references to the live
    parameter tensors, so the saved "best" keeps changing as training continues.
    Impact: restoring or saving ``best_state`` after training yields the final weights,
    not the best epoch's: early stopping and best-checkpoint selection silently do
    nothing; reported test metrics belong to the last epoch (worse when the run
    overfits). Fix: ``copy.deepcopy(model.state_dict())`` or
    ``{k: v.detach().clone() for k, v in model.state_dict().items()}``. Check: compare the
    restored model's validation metric with the best one logged during training; or
    assert that the saved tensors do not share storage with the model's parameters.
    """

    name = "best_state_without_copy"
    category = "checkpoint"
    summary = "best_state = model.state_dict() (no copy): the 'best' weights track training."
    expected = "silent"
    node_types = (cst.Call, cst.DictComp)
    examples = (
        Example(
            before="import copy\nbest_state = copy.deepcopy(model.state_dict())\n",
            after="import copy\nbest_state = model.state_dict()\n",
        ),
        Example(
            before=(
                "if val_acc > best_acc:\n"
                "    self.best = {k: v.detach().clone() for k, v in self.model.state_dict().items()}\n"
            ),
            after="if val_acc > best_acc:\n    self.best = self.model.state_dict()\n",
        ),
        Example(
            before="from copy import deepcopy\nbest: dict = deepcopy(net.state_dict())\n",
            after="from copy import deepcopy\nbest: dict = net.state_dict()\n",
        ),
    )
    non_examples = (
        "best_state = model.state_dict()\n",
        "torch.save(copy.deepcopy(model.state_dict()), path)\n",
        "cpu_state = {k: v.cpu() for k, v in model.state_dict().items()}\n",
        "opts = copy.deepcopy(config)\n",
    )

    def _state_dict_call(self, node: cst.CSTNode, ctx: Context) -> cst.Call | None:
        if isinstance(node, cst.Call):
            names = resolve(node.func, ctx, strict=False).names
            is_deepcopy = "copy.deepcopy" in names or (
                not names and callee_name(node) == "deepcopy"
            )
            if is_deepcopy and len(node.args) == 1:
                inner = node.args[0].value
                if isinstance(inner, cst.Call) and method_name(inner) == "state_dict":
                    return inner
            return None
        assert isinstance(node, cst.DictComp)
        items = node.for_in.iter
        if not (isinstance(items, cst.Call) and method_name(items) == "items"):
            return None
        assert isinstance(items.func, cst.Attribute)
        state = items.func.value
        copies = any(
            method_name(call) == "clone" for call in ctx.nodes_within(node.value, cst.Call)
        )
        if copies and isinstance(state, cst.Call) and method_name(state) == "state_dict":
            return state
        return None

    def match(self, node: cst.CSTNode, ctx: Context) -> bool:
        # Only a copy kept for later (``best = ...``), not one consumed on the spot.
        if not isinstance(ctx.parent(node), (cst.Assign, cst.AnnAssign)):
            return False
        return self._state_dict_call(node, ctx) is not None

    def rewrite(self, node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
        state = self._state_dict_call(node, ctx)
        assert state is not None
        return state
