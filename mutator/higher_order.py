"""Higher-order mutants: several bugs at once, drawn reproducibly from a file's sites."""

from __future__ import annotations

import random
from collections.abc import Sequence

from mutator.errors import MutationError
from mutator.site import Site


def choose_higher_order(
    sites: Sequence[Site], order: int, count: int, seed: int
) -> list[tuple[Site, ...]]:
    """Up to ``count`` distinct sets of ``order`` sites of different operators that do not
    overlap, drawn reproducibly from ``seed``."""
    if not 2 <= order <= 5:
        raise MutationError(f"order must be between 2 and 5, got {order}")
    rng = random.Random(seed)
    chosen: list[tuple[Site, ...]] = []
    seen: set[tuple[str, ...]] = set()
    pool = list(sites)
    for _ in range(max(50, count * 50)):
        if len(chosen) >= count:
            break
        rng.shuffle(pool)
        picked: list[Site] = []
        for site in pool:
            if any(site.operator.name == other.operator.name for other in picked):
                continue
            if any(site.overlaps(other) for other in picked):
                continue
            picked.append(site)
            if len(picked) == order:
                break
        if len(picked) < order:
            break  # not enough compatible sites: no draw can succeed
        picked.sort(key=lambda site: (site.line, site.column, site.operator.name))
        key = tuple(site.identity for site in picked)
        if key not in seen:
            seen.add(key)
            chosen.append(tuple(picked))
    return chosen
