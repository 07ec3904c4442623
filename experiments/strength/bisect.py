"""Log-space bisection for the weakest setting at which a bug shows.

``weakest(shows, weak, strong, steps)`` assumes ``shows`` is monotone along the axis
(stronger settings show at least as much) and that the weak end does not show. It tries
the strong end first (a bug that does not show there has no threshold in the span), then
halves the bracket ``steps`` times at geometric midpoints, so the bracket's ratio ends at
``(strong/weak) ** (1 / 2**steps)``. ``shows`` is called at most ``steps + 1`` times.

Categorical axes are walked weakest first instead (``first_showing``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Search:
    threshold: Any | None  # the weakest setting tried that showed (None: none showed)
    bracket: tuple[Any, Any] | None  # (strongest not showing or the weak end, threshold)
    tried: list[tuple[Any, bool]] = field(default_factory=list)  # in the order tried


def weakest(
    shows: Callable[[float], bool],
    weak: float,
    strong: float,
    steps: int = 4,
    snap: Callable[[float], float] = float,
) -> Search:
    """``snap`` rounds each midpoint to a setting that can be run (3 significant digits)."""
    if weak <= 0 or strong <= 0:
        raise ValueError("log-space bisection needs positive ends")
    search = Search(None, None)

    def tried(value: float) -> bool:
        result = bool(shows(value))
        search.tried.append((value, result))
        return result

    if not tried(strong):
        return search
    low, high = weak, strong  # low does not show (assumed at the weak end), high does
    for _ in range(steps):
        middle = snap(math.exp((math.log(low) + math.log(high)) / 2))
        if tried(middle):
            high = middle
        else:
            low = middle
    search.threshold, search.bracket = high, (low, high)
    return search


def first_showing(shows: Callable[[Any], bool], values: Sequence[Any]) -> Search:
    """Categorical axes: the first setting, weakest first, that shows."""
    search = Search(None, None)
    previous = None
    for value in values:
        result = bool(shows(value))
        search.tried.append((value, result))
        if result:
            search.threshold, search.bracket = value, (previous, value)
            return search
        previous = value
    return search
