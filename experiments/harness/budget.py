"""A sweep's budget: how long a run may take (derived from its group's reference run) and
how much output and trace it may keep; ``Budget.of`` records what decided them in the row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experiments.harness.spec import RunSpec
from experiments.harness.status import OK_STATUSES


@dataclass(frozen=True)
class Budget:
    """Deadlines: a mutant gets ``factor * reference wall + slack_s`` (at most
    ``max_timeout_s``); a run without a reference (and the reference itself) gets
    ``default_timeout_s``."""

    factor: float = 5.0
    slack_s: float = 10.0
    default_timeout_s: float = 600.0
    max_timeout_s: float = 3600.0
    output_cap_mb: float = 16.0  # per stream (stdout, stderr): half head, half tail kept
    trace_cap_mb: float = 64.0  # the trace is thinned beyond this

    def __post_init__(self) -> None:
        for name in (
            "factor",
            "default_timeout_s",
            "max_timeout_s",
            "output_cap_mb",
            "trace_cap_mb",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < float("inf")):
                raise ValueError(f"budget {name}={value!r}: must be a positive finite number")
        if not (isinstance(self.slack_s, int | float) and 0 <= self.slack_s < float("inf")):
            raise ValueError(f"budget slack_s={self.slack_s!r}: must be a finite number >= 0")

    def of(self, spec: RunSpec) -> dict[str, Any]:
        """What decided a run's deadline, memory cap and output caps (kept in its row)."""
        return {
            "factor": self.factor,
            "slack_s": self.slack_s,
            "default_timeout_s": self.default_timeout_s,
            "max_timeout_s": self.max_timeout_s,
            "timeout_s": spec.timeout_s,
            "mem_cap_mb": spec.mem_cap_mb,
            "output_cap_mb": self.output_cap_mb,
            "trace_cap_mb": self.trace_cap_mb,
        }

    def deadline_from(self, reference_wall_s: float) -> float:
        return min(self.max_timeout_s, self.factor * reference_wall_s + self.slack_s)

    def deadline_after(self, reference: dict[str, Any] | None) -> float:
        """The deadline of a group's runs once its reference ended (its result row)."""
        if reference and reference.get("status") in OK_STATUSES and reference.get("wall_s"):
            return self.deadline_from(float(reference["wall_s"]))
        return self.default_timeout_s

    def timeout_for(self, spec: RunSpec, deadlines: dict[Any, float]) -> float:
        """A fixed ``timeout_s`` wins; then its group's deadline (``deadline_after``)."""
        if spec.timeout_s is not None:
            return spec.timeout_s
        return deadlines.get(spec.group, self.default_timeout_s)


def split_references(specs: list[RunSpec]) -> tuple[dict[Any, RunSpec], list[RunSpec]]:
    """The unmutated run with the lowest seed of each group goes first: its wall time
    sets the deadline of every other run of the group."""
    references: dict[Any, RunSpec] = {}
    for spec in specs:
        if spec.mutant is None and spec.invalid_reason is None:
            best = references.get(spec.group)
            if best is None or spec.seed < best.seed:
                references[spec.group] = spec
    chosen = {id(spec) for spec in references.values()}
    return references, [spec for spec in specs if id(spec) not in chosen]
