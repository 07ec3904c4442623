"""What a maintainer can do about a survivor: which ``trainwreck.checks`` check would catch
its bug, and a test skeleton that calls it on the project's own code.

The check for an operator is the one that caught its mutants in the checks' kill-rate
benchmark (``docs/checks.md``, "Kill rates"); an operator whose bug no check catches says
so, with what would (a memory measurement, a held-out split). The skeleton imports the
mutated function from its module and leaves the set-up (a model, a batch, one step of the
project's loop) to the maintainer, marked ``...``: only they know how their API is called.
"""

from __future__ import annotations

from dataclasses import dataclass

from experiments.mutation_testing.discovery import Job


@dataclass(frozen=True)
class Advice:
    check: str  # a function of trainwreck.checks, or "" when none catches the bug
    why: str
    body: str  # the test's body after the set-up lines


_STEP = "    step = make_fit_step(lambda b: ...)  # one step of {name} on b, e.g. fit(one_batch_loader(b))\n"
_PARAMS = Advice(
    "check_params_change",
    "one step must change every trainable parameter, and one batch must be learnable",
    _STEP + "    check_params_change(model, batch, step)\n"
    "    check_overfit_batch(batch, step, steps=100, max_ratio=0.1)\n",
)
_LEARNS = Advice(
    "check_overfit_batch",
    "training on one batch must drive its loss down (a step that does not learn fails)",
    _STEP + "    check_overfit_batch(batch, step, steps=100, max_ratio=0.1)\n",
)
_TRAIN_MODE = Advice(
    "check_train_step_mode",
    "every training forward must run in train mode, even right after an evaluation "
    "(use a model with dropout or batch norm, or the mode changes nothing)",
    _STEP + "    check_train_step_mode(model, batch, step)\n",
)
_EVALUATION = Advice(
    "check_evaluation",
    "evaluation must run in eval mode, build no graph and repeat exactly",
    "    evaluate = lambda: ...  # {name}'s evaluation or predict() on a fixed batch\n"
    "    check_evaluation(model, evaluate)\n",
)
_SCHEDULE = Advice(
    "check_lr_schedule",
    "the learning rate must follow the declared schedule over several epochs",
    "    advance = lambda: ...  # one epoch (or one batch) of {name}\n"
    "    expected = expected_lrs(lambda o: ..., lr=..., steps=6)  # the schedule as declared\n"
    "    check_lr_schedule(optimizer, advance, expected)\n",
)
_SHUFFLE = Advice(
    "check_loader_shuffles",
    "two epochs of the training loader must come in different orders",
    "    loader = ...  # the training loader {name} builds\n    check_loader_shuffles(loader)\n",
)
_LABELS = Advice(
    "check_labels_aligned",
    "the labels the loop trains on must still belong to their inputs",
    "    inputs, targets = ...  # what {name} hands to the loss, for a few hundred samples\n"
    "    check_labels_aligned(inputs, targets)\n",
)
_INITIAL = Advice(
    "check_initial_loss",
    "the untrained model's loss must start near its expected value (ln C for C classes)",
    _STEP + "    check_initial_loss(lambda: step(batch), expected=math.log(num_classes))\n",
)
_MIXING = Advice(
    "check_batch_independence",
    "no sample's output may depend on another sample of the batch",
    "    check_batch_independence(model, batch[0])\n",
)
_DECREASES = Advice(
    "check_loss_decreases",
    "a few steps on real batches must lower the loss at the expected speed",
    _STEP + "    check_loss_decreases(step, batches, min_drop=...)  # half the correct drop\n",
)

BY_OPERATOR: dict[str, Advice] = {
    **dict.fromkeys(
        (
            "drop_zero_grad",
            "zero_grad_after_backward",
            "drop_backward",
            "drop_optimizer_step",
            "step_before_backward",
            "loss_from_item",
            "no_grad_training_step",
            "optimizer_on_stale_model",
            "optimizer_partial_params",
            "detach_hidden",
            "zero_init",
            "step_outside_batch_loop",
            "unscaled_grad_accumulation",
        ),
        _PARAMS,
    ),
    **dict.fromkeys(("drop_train_mode", "eval_mode_before_training"), _TRAIN_MODE),
    **dict.fromkeys(("drop_eval_mode", "drop_no_grad", "dropout_ignores_training"), _EVALUATION),
    **dict.fromkeys(
        (
            "drop_scheduler_step",
            "scheduler_step_per_batch",
            "scheduler_step_before_optimizer_step",
            "drop_lr_warmup",
            "drop_scheduler_state_on_resume",
            "optimizer_recreated_each_epoch",
        ),
        _SCHEDULE,
    ),
    "no_shuffle": _SHUFFLE,
    **dict.fromkeys(
        ("shift_labels", "shuffle_labels", "label_noise", "unshifted_lm_targets"), _LABELS
    ),
    **dict.fromkeys(
        (
            "reduction_sum",
            "mse_for_classification",
            "drop_input_normalization",
            "nll_without_log_softmax",
        ),
        _INITIAL,
    ),
    **dict.fromkeys(
        ("softmax_before_cross_entropy", "drop_activation", "dropout_too_high"), _LEARNS
    ),
    **dict.fromkeys(("mix_batch_dims", "softmax_wrong_dim"), _MIXING),
    **dict.fromkeys(
        ("scale_lr", "weight_decay_too_high", "change_batch_size", "adam_eps_too_small"), _DECREASES
    ),
}

NONE_CATCHES = {
    "retain_graph_left_in": "memory per step (a graph kept alive): measure peak memory over steps",
    "accumulate_loss_graph": "memory per step: measure peak memory over steps",
    "validate_on_training_data": "a held-out split: assert the evaluation's data is not the training data",
    "train_val_leakage": "a held-out split: assert no sample is in both splits",
}


def advice(job: Job) -> Advice:
    name = job.mutant.operators[0] if job.mutant.operators else ""
    found = BY_OPERATOR.get(name)
    if found is not None:
        return found
    why = NONE_CATCHES.get(name, "no check of trainwreck.checks targets this bug")
    return Advice("", why, "")


def skeleton(job: Job) -> str:
    """A test file (pytest) calling the check on the mutated function's own code."""
    found = advice(job)
    if not found.check:
        return ""
    module = job.target.name.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    function = job.identity.split("::")[1].split(".")[0]
    imported = (
        f"from {module} import {function}  # the code the mutant changed\n\n\n"
        if function.isidentifier()
        else f"import {module}  # the code the mutant changed\n\n\n"
    )
    function = function if function.isidentifier() else "module"
    fit = ["make_fit_step", "one_batch_loader"] if "make_fit_step" in found.body else []
    imports = sorted({found.check, *fit})
    if "expected_lrs" in found.body:
        imports.append("expected_lrs")
    head = "import math\n\n" if "math." in found.body else ""
    return (
        f"{head}import torch\n"
        f"from trainwreck.checks import {', '.join(sorted(imports))}\n\n"
        + imported
        + f"def test_{function.lower()}_{found.check.removeprefix('check_')}():\n"
        "    model, optimizer, batch = ..., ..., ...  # as your tests build them\n"
        + found.body.format(name=function)
    )
