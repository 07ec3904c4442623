"""Which operators have a strength, and which way it grows (read from their parameters).

An ``Axis`` names the parameter of a parametric operator and the span searched: from a
``weak`` setting (close to the unmutated script, assumed not to show the bug) to the
``strong`` one (the strongest the operator declares, default or variant). Numeric axes
are bisected in log space (a factor of 2 matters as much at 2 as at 50); categorical
ones (a dtype) are tried in the listed order, weakest first. Two-sided operators
(``scale_lr``, ``change_batch_size``) have an ``up`` and a ``down`` axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mutations.registry import operator_classes


@dataclass(frozen=True)
class Axis:
    operator: str
    param: str
    direction: str  # "up": larger values are stronger; "down": smaller ones are
    weak: Any
    strong: Any
    values: tuple[Any, ...] = ()  # categorical: every setting, weakest first
    integer: bool = False

    @property
    def numeric(self) -> bool:
        return not self.values

    def spec(self, value: Any) -> str:
        """The operator spec that runs this setting, e.g. ``scale_lr(factor=3.16)``."""
        if isinstance(value, str):
            return f"{self.operator}({self.param}={value!r})"
        shown = f"{value:.3g}"
        if self.integer:
            shown = str(int(value))
        elif "." not in shown and "e" not in shown:
            shown += ".0"  # a float parameter must be given as a float
        return f"{self.operator}({self.param}={shown})"


# The span of every parametric operator. The weak ends are the gentlest setting that is
# still a change (x1.25 a learning rate, 1% of labels wrong); the strong ends are each
# operator's strongest declared setting (its default or a catalog variant).
AXES: tuple[Axis, ...] = (
    Axis("scale_lr", "factor", "up", 1.25, 100.0),
    Axis("scale_lr", "factor", "down", 0.8, 0.01),
    Axis("change_batch_size", "factor", "up", 1.25, 8.0),
    Axis("change_batch_size", "factor", "down", 0.8, 0.125),
    Axis("label_noise", "p", "up", 0.01, 0.8),
    Axis("drop_training_data", "fraction", "up", 0.01, 0.9),
    Axis("dropout_too_high", "p", "up", 0.05, 0.9),
    Axis("weight_decay_too_high", "factor", "up", 1.25, 100.0),
    Axis("adam_eps_too_small", "eps", "down", 1e-9, 1e-16),
    # float16 keeps 10 mantissa bits, bfloat16 7: bfloat16 is the stronger cast.
    Axis("low_precision_loss", "dtype", "up", "float16", "bfloat16", ("float16", "bfloat16")),
)


def axes_of(operator: str) -> list[Axis]:
    return [axis for axis in AXES if axis.operator == operator]


def parametric() -> list[str]:
    return sorted({axis.operator for axis in AXES})


def declared_parameters(operator: str) -> dict[str, Any]:
    """The operator's declared parameters and defaults ({} for an operator without any)."""
    cls = operator_classes().get(operator)
    if cls is None:
        raise KeyError(operator)
    return {name: spec.default for name, spec in cls.parameters.items()}
