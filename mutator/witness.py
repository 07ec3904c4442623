"""What makes a run *this* bug: the witness an operator declares.

A mutant's run counts as its bug only when it shows, at run time, the fact its operator
names (a backward into a stale ``.grad``, a dropout module in the wrong mode, a learning
rate changed by the factor), measured by the harness's probes and compared with the
reference run on the same seed (``experiments.witness`` decides). An operator declares it
in one line after ``expected``::

    witness = "more stale_grad", "a backward adds into a .grad no zero_grad cleared"
    crashes = ("backward through the graph a second time",)

The first string is ``"<comparison> <fact>[|<fact>...]"``: the comparison of the mutant's
fact with the reference's (``COMPARISONS``) and the fact (``FACTS``; several joined by
``|`` fire when any does). The second says, for a reader, what the run shows when the
witness fires. ``crashes`` are the crashes that are the bug's own symptom (regular
expressions matched against ``"ExceptionType: message"``): a crash the operator does not
declare, before its witness fired, is a broken rewrite (``stillborn``), not the bug.

This module holds the vocabulary and the declaration type only (no torch): the probes are
``experiments/harness/probes*.py`` and ``probe_calls.py``, the decision
``experiments/witness.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# The comparisons: how the mutant's fact must differ from the reference's on its seed.
COMPARISONS = {
    "more": "the mutant's count is higher than the reference's",
    "fewer": "the mutant's count is lower than the reference's (a run that ended normally)",
    "differs": "the mutant's value or sequence differs from the reference's",
    "factor": "the mutant's value is the reference's changed (by the operator's factor)",
    # Only for operators whose mechanism is just other numbers (see ``DIFFERENTIAL``).
    "differential": "the losses or evaluation outputs depart from the reference's",
    # The witness is the declared crash itself (the only thing that shows the bug).
    "crash": "the run crashed with one of the crashes the operator declares",
    # A device bug: not observable on the CPU; elsewhere the declared crash.
    "device": "on an accelerator, the declared crash; not observable on the CPU",
}
# The facts ``differential`` compares.
DIFFERENTIAL = ("losses", "eval_outputs")

# Every fact the probes record (experiments/harness/probes.py, probe_calls.py,
# probes_mechanism.py; ``reported`` from the trace, probes_reported.py), in plain words. "events":
# [count, step of the first]; "count": a number; "value"/"sequence": compared as recorded.
FACTS: dict[str, tuple[str, str]] = {
    "stale_grad": ("events", "backwards that added into a .grad no zero_grad cleared"),
    "train_mode_off": (
        "events",
        "training forwards that ran a mode-dependent module (dropout, batch norm, any "
        "module reading self.training) in eval mode",
    ),
    "eval_mode_on": (
        "events",
        "evaluation forwards that ran a mode-dependent module in training mode or applied dropout",
    ),
    "eval_graph": ("events", "evaluation forwards that recorded an autograd graph"),
    "backward_no_graph": ("events", "backward() called on a loss without a graph"),
    "empty_steps": ("events", "optimizer steps that found no gradient (all None or zero)"),
    "graph_kept": ("events", "backwards finding a sampled earlier backward's graph alive"),
    "retained_graph": (
        "events",
        "sampled graphs backwarded with retain_graph=True alive at the next forward",
    ),
    "clip_before_backward": (
        "events",
        "gradient clipping called before this step's backward",
    ),
    "self_loads": ("events", "load_state_dict of tensors that are the module's own weights"),
    "stale_forward": (
        "events",
        "training forwards whose output got its gradient only after an optimizer step that "
        "came after the forward (a batch made before the other network's update)",
    ),
    "nonscalar_backward": ("events", "backward() called on a loss of more than one element"),
    "ce_on_probabilities": (
        "events",
        "cross_entropy calls (sampled) whose input rows are already probabilities",
    ),
    "foreign_grads": (
        "count",
        "parameters with a gradient that the optimizer stepping first does not hold",
    ),
    "no_grad_params": ("count", "trained modules' parameters without a gradient at step 1"),
    "zero_params": ("count", "parameter tensors that are all zero at the first step"),
    "tied_units": ("count", "weight tensors whose rows (units) are all equal after two steps"),
    "manual_updates": (
        "count",
        "sampled backwards after which a parameter moved with no torch.optim step (by hand)",
    ),
    "manual_lr": ("value", "a hand-written update's size against its gradient, the first time"),
    "steps": ("count", "optimizer steps"),
    "backward_calls": ("count", "backward() calls"),
    "train_samples": ("count", "samples the training forwards saw"),
    "optimizers": ("count", "optimizers that stepped"),
    "optimizer_state": ("count", "optimizer state entries at each optimizer's first step"),
    "clip_active": ("count", "gradient clipping calls that cut the gradient"),
    "clip_cut_at": ("value", "the threshold of the first gradient clipping that cut"),
    "clip_calls": ("count", "gradient clipping calls"),
    # Clamps run with autograd on, sampled like the digests (probes_mechanism.py).
    "clamp_above": ("count", "clamps (sampled) that cut values above their upper bound"),
    "clamp_below": ("count", "clamps (sampled) that cut values below their lower bound"),
    "dropout_calls": ("count", "dropout calls that dropped (training)"),
    "shuffled_loaders": ("count", "DataLoader iterations in a shuffled order"),
    "forwards": ("count", "top-level module forwards, training and evaluation"),
    "trained_per_step": (
        "count",
        "the most top-level forwards whose output received a gradient between two steps",
    ),
    "scaler_scale": ("count", "GradScaler.scale calls (enabled scaler)"),
    "scaler_unscale": ("count", "GradScaler.unscale_ calls (enabled scaler)"),
    "module_loads": ("count", "module load_state_dict calls"),
    "optimizer_loads": ("count", "optimizer load_state_dict calls of a state holding something"),
    "optimizer.class": ("value", "the optimizer's class at its first step"),
    "optimizer.lr": ("value", "the learning rate at the optimizer's first step"),
    "optimizer.weight_decay": ("value", "the weight decay at the optimizer's first step"),
    "optimizer.eps": ("value", "the eps at the optimizer's first step"),
    "optimizer.momentum": ("value", "the momentum at the optimizer's first step"),
    "optimizer.grad": ("value", "a digest of the gradient norms at each optimizer's first step"),
    "forward_order": (
        "value",
        "which network (by order of first use) each of the first 128 top-level forwards ran",
    ),
    "lr": ("sequence", "the learning rate of every step (where it changed)"),
    "first_batch": ("value", "the batch size of the first training forward"),
    "dropout_p": ("value", "the dropout probabilities applied in training"),
    "loss_call": ("value", "the training loss function, its options and input types"),
    "targets": ("sequence", "the targets reaching the training loss"),
    "train_inputs": ("sequence", "the inputs of the training forwards"),
    "eval_inputs": ("sequence", "the inputs of the evaluation forwards"),
    "losses": ("sequence", "the training losses"),
    "eval_outputs": ("sequence", "the evaluation forwards' outputs and losses"),
    "second_inputs": (
        "sequence",
        "the second tensor argument of training forwards (a loss module's target)",
    ),
    "reported": (
        "sequence",
        "the numbers the script reported (report(), or captured from what it printed)",
    ),
}
_USES = {
    "more": ("events", "count"),
    "fewer": ("count",),
    "differs": ("value", "sequence", "events", "count"),
    "factor": ("value",),
}


@dataclass(frozen=True)
class Witness:
    """An operator's witness (module docstring). ``factor``: the operator's parameter whose
    value the ``factor`` comparison names (``"factor"`` when it has one)."""

    comparison: str
    facts: tuple[str, ...]
    says: str
    crashes: tuple[str, ...] = ()
    factor: str | None = None

    @property
    def spec(self) -> str:
        return f"{self.comparison} {'|'.join(self.facts)}".strip()

    @property
    def differential(self) -> bool:
        return self.comparison == "differential"

    def declares(self, crash: str) -> bool:
        """Whether ``crash`` (``"ExceptionType: message"``) is one the operator declares."""
        return any(re.search(pattern, crash, re.IGNORECASE) for pattern in self.crashes)


def parse(declared: object, crashes: object, parameters: object = ()) -> Witness:
    """A ``Witness`` from an operator's ``witness`` (``("<comparison> <facts>", "says")`` or
    a ``Witness``) and ``crashes``; ValueError naming what is wrong."""
    if not isinstance(crashes, tuple) or not all(isinstance(c, str) for c in crashes):
        raise ValueError("crashes must be a tuple of regular expressions")
    for pattern in crashes:
        re.compile(pattern)
    if isinstance(declared, Witness):  # inherited: a subclass may declare its own crashes
        return replace(declared, crashes=crashes)
    if not (isinstance(declared, tuple) and len(declared) == 2):
        raise ValueError("witness must be ('<comparison> <fact>', 'what the run shows')")
    spec, says = declared
    if not isinstance(spec, str) or not isinstance(says, str) or not says.strip():
        raise ValueError("witness must be two strings: the comparison and fact, and a sentence")
    words = spec.split()
    comparison = words[0] if words else ""
    if comparison not in COMPARISONS:
        raise ValueError(f"witness comparison {comparison!r} not in {sorted(COMPARISONS)}")
    facts = tuple(words[1].split("|")) if len(words) > 1 else ()
    if comparison in ("crash", "device", "differential"):
        if facts:
            raise ValueError(f"witness {comparison!r} takes no fact")
        if comparison != "differential" and not crashes:
            raise ValueError(f"witness {comparison!r} needs the declared crashes")
        facts = DIFFERENTIAL if comparison == "differential" else ()
    elif not facts or len(words) > 2:
        raise ValueError(f"witness {spec!r}: expected '<comparison> <fact>[|<fact>...]'")
    for fact in facts if comparison != "differential" else ():
        if fact not in FACTS:
            raise ValueError(f"witness fact {fact!r} not in the probes' facts")
        if FACTS[fact][0] not in _USES[comparison]:
            raise ValueError(f"witness {spec!r}: {comparison!r} does not apply to {fact!r}")
    factor = None
    if comparison == "factor":
        factor = "factor" if "factor" in parameters else None
    return Witness(comparison, facts, says.strip(), crashes, factor)
