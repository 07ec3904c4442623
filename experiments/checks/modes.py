"""Train and eval mode: the model has them, training uses one, evaluation the other.

Three checks, because the bugs live in three places: the model (dropout that ignores
``self.training``), the training step (a missing ``model.train()`` after an evaluation)
and the evaluation (a missing ``model.eval()`` or ``torch.no_grad()``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn

from experiments.checks._common import (
    Forward,
    TrainStep,
    carries_graph,
    default_forward,
    fail,
    is_mode_dependent,
    kept_modes,
    kept_state,
    mode_dependent,
    name_list,
    same_values,
    seeded,
)


def check_train_eval_modes(
    model: nn.Module, inputs: Any, *, forward: Forward | None = None, seed: int = 0
) -> None:
    """Eval mode is deterministic and differs from train mode where dropout/batch norm exist.

    Runs ``forward(model, inputs)`` twice in eval mode under different seeds (the outputs
    must be identical) and, when the model has dropout (p > 0) or batch-norm modules,
    once in train mode (the output must differ from eval's). Leaves modes, parameters and
    buffers as they were. Catches: ``F.dropout`` without ``training=self.training`` (eval
    stays random), randomness in the forward that eval does not turn off, dropout or
    batch norm made inert. Cannot catch: whether the loop switches modes at the right
    time (``check_train_step_mode``, ``check_evaluation``), a dropout rate that is too
    high.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    forward = forward or default_forward
    with kept_modes(model), kept_state(model), torch.no_grad():
        model.eval()
        with seeded(seed):
            first = forward(model, inputs)
        with seeded(seed + 1):
            second = forward(model, inputs)
        if not torch.equal(first, second):
            diff = (first - second).abs().max().item()
            raise fail(
                "check_train_eval_modes",
                "identical outputs from two eval-mode forwards of the same batch",
                f"outputs that differ by up to {diff:.3g}",
                "Something random stays on in eval mode: F.dropout(...) without "
                "training=self.training, or noise added in forward regardless of mode.",
            )
        modules = mode_dependent(model)
        if not modules:
            return
        model.train()
        with seeded(seed):
            trained = forward(model, inputs)
    if torch.equal(trained, first):
        raise fail(
            "check_train_eval_modes",
            f"train-mode outputs to differ from eval-mode ones ({name_list(modules)})",
            "identical outputs",
            "Dropout and batch norm do nothing in train mode: their modes are forced, "
            "or they sit outside the path from inputs to outputs.",
        )


def check_train_step_mode(
    model: nn.Module, batch: Any, train_step: TrainStep, *, from_eval: bool = True
) -> None:
    """A training step runs the model in train mode, even right after an evaluation.

    Puts the model in eval mode (as an evaluation leaves it; ``from_eval=False`` leaves the
    mode alone, for a step that runs the project's own evaluation first), runs
    ``train_step(batch)`` and records the mode of the model and of every dropout/batch-norm
    submodule at each training forward: a forward whose output ``backward()`` reaches (an
    evaluation inside the step is not one, even without ``torch.no_grad()``). Trains the
    model (one step). Catches: a missing ``model.train()`` at the start of the epoch or
    step, ``model.eval()`` in its place. Cannot catch: an evaluation that forgets
    ``model.eval()`` (``check_evaluation``). The model's own flag counts even without
    dropout modules, since ``F.dropout(training=self.training)`` reads it.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    forwards: list[dict[str, Any]] = []  # per model forward: modules in eval, backpropagated?
    active: list[dict[str, Any]] = []

    def before(module: nn.Module, _args: Any, name: str) -> None:
        if name == "model":
            active.append({"eval": [], "trained": False})
            forwards.append(active[-1])
        if active and not module.training and name not in active[-1]["eval"]:
            active[-1]["eval"].append(name)

    def after(_module: nn.Module, _args: Any, out: Any) -> None:
        record = active.pop()
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(tensor, torch.Tensor) and tensor.requires_grad:
                tensor.register_hook(partial(_mark_trained, record))

    watched = [("model", model)]
    watched += [(n, m) for n, m in model.named_modules() if n and is_mode_dependent(m)]
    handles = [m.register_forward_pre_hook(partial(before, name=n)) for n, m in watched]
    handles.append(model.register_forward_hook(after))
    if from_eval:
        model.eval()
    try:
        train_step(batch)
    finally:
        for handle in handles:
            handle.remove()
    trained = [f for f in forwards if f["trained"]]
    if not trained:
        raise fail(
            "check_train_step_mode",
            "a forward of the model whose output backward() reaches",
            f"{len(forwards)} forwards, none backpropagated",
            "Pass the model object your train_step trains; a loss computed under "
            "torch.no_grad(), from .item() or without backward() does not train it.",
        )
    in_eval = list(dict.fromkeys(name for f in trained for name in f["eval"]))
    if in_eval:
        raise fail(
            "check_train_step_mode",
            "every training forward in train mode",
            f"eval mode during training for {name_list(in_eval)}",
            "Call model.train() at the start of each epoch or step (an evaluation "
            "switches the model to eval mode); dropout and batch norm behave differently.",
        )


def _mark_trained(record: dict[str, Any], grad: torch.Tensor) -> None:
    record["trained"] = True


def check_evaluation(
    model: nn.Module, evaluate: Callable[[], Any], *, seeds: tuple[int, int] = (0, 1)
) -> Any:
    """An evaluation is deterministic, changes nothing and builds no autograd graph.

    Puts the model in train mode (as training leaves it), then calls ``evaluate()`` (a
    function of no arguments running the project's evaluation, returning its metrics)
    twice under two seeds: the results must be equal, the model's parameters and buffers
    unchanged, every forward run in eval mode and without building a graph. Returns the
    first result and leaves the model's modes as they were. Catches: a missing
    ``model.eval()`` (dropout on, batch-norm statistics updated by validation data), a
    missing ``torch.no_grad()`` (also when only the returned predictions show it: a
    ``predict()`` whose outputs require grad), an evaluation that trains or shuffles. Cannot catch:
    evaluating on the wrong split, a wrong metric formula.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    records: list[tuple[bool, bool]] = []  # (module in training mode, output has a graph)

    def note(mod: nn.Module, _args: Any, out: Any) -> None:
        grad = isinstance(out, torch.Tensor) and out.requires_grad
        if isinstance(out, tuple):
            grad = any(isinstance(o, torch.Tensor) and o.requires_grad for o in out)
        records.append((mod.training, grad))

    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    handle = model.register_forward_hook(note)
    try:
        with kept_modes(model):
            model.train()
            with seeded(seeds[0]):
                first = evaluate()
            model.train()
            with seeded(seeds[1]):
                second = evaluate()
    finally:
        handle.remove()
    if not records:
        raise fail("check_evaluation", "evaluate() to call the model", "no forward of the model")
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    if changed:
        raise fail(
            "check_evaluation",
            "parameters and buffers unchanged by evaluation",
            f"changes in {name_list(changed)}",
            "Evaluation must not train: batch norm in train mode updates its running "
            "statistics from validation data (model.eval() missing), or an optimizer step "
            "runs inside it.",
        )
    if any(training for training, _ in records):
        raise fail(
            "check_evaluation",
            "the model in eval mode during evaluation",
            "train mode",
            "Call model.eval() before evaluating: dropout stays on and batch norm uses "
            "the batch's statistics.",
        )
    if any(grad for _, grad in records) or carries_graph(first):
        raise fail(
            "check_evaluation",
            "no autograd graph during evaluation",
            "outputs that require grad",
            "Wrap evaluation in torch.no_grad() or torch.inference_mode(): every "
            "forward otherwise keeps its graph (memory, time).",
        )
    if not same_values(first, second):
        raise fail(
            "check_evaluation",
            "the same result from two evaluations",
            f"{first!r} then {second!r}",
            "Evaluation is random: dropout on, a shuffled or sampled loader, or random "
            "augmentation in the validation pipeline.",
        )
    return first
