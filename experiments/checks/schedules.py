"""Checks on the learning rate over several steps: it follows the schedule, it changes, a
``ReduceLROnPlateau`` reacts to a plateau.

They drive the project's own loop one unit at a time through ``advance()`` (an epoch, a
batch: whatever unit the scheduler steps on; ``fit_steps`` or a loop's epoch function
with a one-batch loader) and read the optimizer's learning rates after each call. A
scheduler that is never stepped, stepped once per batch instead of per epoch, built on
another optimizer, or given the wrong settings shows up as a trace that differs from the
expected one. The expected trace comes from the schedule as written in the tests
(``expected_lrs`` simulates a scheduler on a throwaway optimizer), never from the
project's own scheduler object, which is what is under test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from experiments.checks._common import fail

Advance = Callable[[], Any]


def lr_trace(optimizer: torch.optim.Optimizer, advance: Advance, steps: int) -> list[float]:
    """The learning rate of the optimizer's first parameter group after each of ``steps``
    calls of ``advance()``."""
    trace = []
    for _ in range(steps):
        advance()
        trace.append(float(optimizer.param_groups[0]["lr"]))
    return trace


def expected_lrs(
    make_scheduler: Callable[[torch.optim.Optimizer], Any], lr: float, steps: int
) -> list[float]:
    """The learning rates ``make_scheduler(optimizer)`` gives over ``steps`` steps (one
    ``optimizer.step()`` then ``scheduler.step()`` each), simulated on a throwaway
    optimizer starting at ``lr``: e.g. ``expected_lrs(lambda o: StepLR(o, 2, 0.5), 0.1, 6)``."""
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=lr)
    scheduler = make_scheduler(optimizer)
    trace = []
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        trace.append(float(optimizer.param_groups[0]["lr"]))
    return trace


def check_lr_schedule(
    optimizer: torch.optim.Optimizer,
    advance: Advance,
    expected: Sequence[float],
    *,
    rel_tol: float = 1e-6,
) -> list[float]:
    """After each of ``len(expected)`` calls of ``advance()``, the learning rate is the
    expected one (``expected_lrs`` gives a scheduler's). Returns the trace. Trains the
    model when ``advance`` does. Catches: a ``scheduler.step()`` removed, called per
    batch instead of per epoch (or the reverse), before ``optimizer.step()`` in a way that
    shifts the schedule, a warm-up dropped, the scheduler built on another optimizer (a
    re-created one), wrong settings (step size, gamma). Cannot catch: a schedule that is
    right but badly chosen."""
    __tracebackhide__ = True  # pytest shows the caller's line, not the check's
    return check_lr_trace(lr_trace(optimizer, advance, len(expected)), expected, rel_tol=rel_tol)


def check_lr_trace(
    trace: Sequence[float], expected: Sequence[float], *, rel_tol: float = 1e-6
) -> list[float]:
    """``check_lr_schedule`` on a trace the test recorded itself (a ``main()`` that runs
    every epoch, its epoch function replaced by one that notes the learning rate)."""
    __tracebackhide__ = True
    if len(trace) != len(expected):
        raise fail(
            "check_lr_trace",
            f"{len(expected)} learning rates (one per step)",
            f"{len(trace)}: {_brief(trace)}",
            "The loop ran another number of epochs or steps than the schedule has.",
        )
    for step, (seen, wanted) in enumerate(zip(trace, expected), start=1):
        if not math.isclose(seen, wanted, rel_tol=rel_tol, abs_tol=1e-12):
            raise fail(
                "check_lr_schedule",
                f"the learning rate {wanted:.4g} at step {step} (schedule {_brief(expected)})",
                f"{seen:.4g} (trace {_brief(trace)})",
                "The scheduler is not stepped, stepped at another unit (per batch instead of "
                "per epoch), built on another optimizer, restored wrongly on resume, or set "
                "up differently.",
            )
    return list(trace)


def check_lr_changes(
    optimizer: torch.optim.Optimizer, advance: Advance, *, steps: int
) -> list[float]:
    """The learning rate changes at least once over ``steps`` calls of ``advance()``: a
    schedule is there and stepped, when its exact values are not known. Returns the trace."""
    __tracebackhide__ = True
    start = float(optimizer.param_groups[0]["lr"])
    trace = lr_trace(optimizer, advance, steps)
    if all(math.isclose(lr, start, rel_tol=1e-9) for lr in trace):
        raise fail(
            "check_lr_changes",
            f"the learning rate to change within {steps} steps",
            f"{start:.4g} throughout",
            "The scheduler is never stepped, or steps an optimizer the training does not use.",
        )
    return trace


def check_plateau_reaction(
    optimizer: torch.optim.Optimizer,
    report: Callable[[float], Any],
    *,
    patience: int,
    mode: str = "min",
) -> list[float]:
    """A ``ReduceLROnPlateau`` (or any metric-driven schedule) keeps the learning rate
    while the metric improves and lowers it once the metric stalls for more than
    ``patience`` reports. ``report(metric)`` runs the project's code that hands a
    validation metric to its scheduler (an epoch end). Returns the trace. Catches: a
    scheduler never given the metric, given the training loss's direction reversed
    (``mode``), stepped without the metric, or with a patience far from the declared one."""
    __tracebackhide__ = True
    if mode not in ("min", "max"):
        raise ValueError(f"mode is 'min' or 'max', got {mode!r}")
    sign = 1.0 if mode == "min" else -1.0
    start = float(optimizer.param_groups[0]["lr"])
    improving = [sign * (1.0 - 0.1 * i) for i in range(patience + 2)]
    trace = []
    for value in improving:
        report(value)
        trace.append(float(optimizer.param_groups[0]["lr"]))
    if any(lr < start * (1 - 1e-9) for lr in trace):
        raise fail(
            "check_plateau_reaction",
            f"the learning rate kept at {start:.4g} while the metric improves ({mode})",
            f"it fell: {_brief(trace)}",
            "The scheduler reads the metric in the wrong direction (mode), or steps without it.",
        )
    flat = improving[-1]
    for _ in range(patience + 2):
        report(flat)
        trace.append(float(optimizer.param_groups[0]["lr"]))
    if trace[-1] >= start * (1 - 1e-9):
        raise fail(
            "check_plateau_reaction",
            f"the learning rate to fall within {patience + 2} reports of a flat metric",
            f"{trace[-1]:.4g} (trace {_brief(trace)})",
            "The scheduler is never given the metric, or its patience is not the declared one.",
        )
    return trace


def _brief(values: Sequence[float]) -> str:
    shown = [f"{v:.3g}" for v in values[:6]]
    return ", ".join(shown) + (", ..." if len(values) > 6 else "")
