"""The result cache: a run's folder is named by its cache key (``spec.cache_key``), and a
``result.json`` there stands for the run when the harness wrote it (shape and seal) and it
is no transient failure that should run again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.harness import seal, store
from experiments.harness.budget import Budget
from experiments.harness.spec import RunSpec

# Statuses that say more about the machine or the budget than about the mutant: rerun
# when the budget changed or when asked (``retry_failed``), reused otherwise.
TRANSIENT = ("timeout", "oom", "killed")


def cached_row(
    spec: RunSpec, folder: Path, sealer: seal.Sealer, budget: Budget, retry_failed: bool
) -> dict[str, Any] | None:
    """The cached row, if the harness wrote it for this run (shape and seal) and it
    is not a transient failure to retry; None: run it (again)."""
    row = store.read_result(folder)
    if row is None or not sealer.trusted(row, spec.key):
        return None
    if row["status"] in TRANSIENT and (retry_failed or row["budget"] != budget.of(spec)):
        return None
    return row
