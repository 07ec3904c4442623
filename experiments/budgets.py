"""The ``budget`` config group, checked at compose time and turned into the runner's Budget.

A mistyped budget (``budget.timeout_s=-1``, ``budget.mem_cap_mb=0``) would otherwise be
accepted and its runs cached as timeouts or OOMs; here it is a one-line configuration
error before anything runs.
"""

from __future__ import annotations

import math
from typing import Any

# field -> (lowest allowed value, whether the lowest value itself is allowed, may be null)
_RULES: dict[str, tuple[float, bool, bool]] = {
    "epochs": (1, True, True),
    "timeout_factor": (0, False, False),
    "timeout_slack_s": (0, True, False),
    "default_timeout_s": (0, False, False),
    "max_timeout_s": (0, False, False),
    "timeout_s": (0, False, True),
    "mem_cap_mb": (0, False, False),
    "threads": (1, True, False),
    "sample_every": (1, True, False),
    "workers": (1, True, True),
    "runs_per_gpu": (1, True, False),
    "reuse": (1, True, False),
    "output_cap_mb": (0, False, False),
    "trace_cap_mb": (0, False, False),
}


class BudgetError(ValueError):
    """A budget value out of its range (the message says which and what would do)."""


def check(budget: Any) -> None:
    """Raise ``BudgetError`` for the first budget value out of its range."""
    for name, (lowest, inclusive, nullable) in _RULES.items():
        value = budget.get(name) if hasattr(budget, "get") else getattr(budget, name, None)
        if value is None:
            if nullable:
                continue
            raise BudgetError(f"budget.{name} is required (a number)")
        number = float(value)
        ok = math.isfinite(number) and (number >= lowest if inclusive else number > lowest)
        if not ok:
            bound = f">= {lowest:g}" if inclusive else f"> {lowest:g}"
            raise BudgetError(f"budget.{name}={value}: must be a finite number {bound}")


def runner_budget(budget: Any) -> Any:
    """The runner's ``Budget`` for a checked ``budget`` config."""
    from experiments.harness.budget import Budget

    check(budget)
    return Budget(
        factor=budget.timeout_factor,
        slack_s=budget.timeout_slack_s,
        default_timeout_s=budget.default_timeout_s,
        max_timeout_s=budget.max_timeout_s,
        output_cap_mb=budget.output_cap_mb,
        trace_cap_mb=budget.trace_cap_mb,
    )
