"""The unit of capture: an ``Event`` (one printed line, one ``add_scalars`` call, one
``wandb.log`` dict) holding the ``Number``s it showed, tagged with its source.

Only events that show an evaluation's number (split ``val`` or ``test``) are kept; a
training loss shown in the same event rides along (``train_loss`` of the report record,
for the train/val gap). Events are streamed to the trace as ``metric`` records (the
evidence, kept by a crash or a kill) and resolved into ``report`` records when the run
ends (``experiments.capture.resolve``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from experiments.capture.keys import LOSS, Key

# Best first: a script's own report() call, the user's loop.metrics pattern, then the
# structured loggers, logging records, and printed lines. docs/own-script.md.
SOURCES = ("report", "pattern", "tensorboard", "wandb", "lightning", "logging", "stdout", "stderr")
EVALUATION_SPLITS = ("val", "test")
METRIC_RECORD = "metric"
PERCENT, FRACTION = "percent", "fraction"


@dataclass(frozen=True)
class Number:
    name: str  # as the script spelled it ("valid loss", "Loss/val")
    split: str | None
    kind: str  # keys.LOSS, ACCURACY, PERPLEXITY, another metric's name, or "metric"
    higher_is_better: bool
    value: float
    scale: str | None = None  # PERCENT (a % sign), FRACTION (n/m) or None (not said)

    @classmethod
    def of(cls, name: str, key: Key, value: float, scale: str | None = None) -> Number:
        return cls(name, key.split, key.kind, key.higher_is_better, value, scale)

    @property
    def evaluation(self) -> bool:
        return self.split in EVALUATION_SPLITS

    @property
    def train_loss(self) -> bool:
        return self.split == "train" and self.kind == LOSS


@dataclass(frozen=True)
class Event:
    source: str
    numbers: tuple[Number, ...]
    step: int | None = None
    epoch: int | None = None
    at: float | None = None  # seconds since the run started (in-process sources only)

    def record(self) -> dict[str, Any]:
        """The ``metric`` record's fields (kind and time are the writer's)."""
        return {
            "source": self.source,
            "step": self.step,
            "epoch": self.epoch,
            "at": self.at,
            "numbers": [
                [n.name, n.split, n.kind, n.higher_is_better, n.value, n.scale]
                for n in self.numbers
            ],
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Event | None:
        """The event a ``metric`` record holds; None for a record it cannot read."""
        try:
            numbers = tuple(
                Number(str(name), split, str(kind), bool(higher), float(value), scale)
                for name, split, kind, higher, value, scale in record.get("numbers") or ()
            )
        except (TypeError, ValueError):
            return None
        source = record.get("source")
        if source not in SOURCES or not numbers:
            return None
        at = record.get("at")
        return cls(
            source,
            numbers,
            _int(record.get("step")),
            _int(record.get("epoch")),
            float(at) if isinstance(at, (int, float)) else None,
        )


def keep(numbers: list[Number]) -> tuple[Number, ...]:
    """An event's numbers worth keeping: () unless one is an evaluation's, finite."""
    kept = tuple(n for n in numbers if (n.evaluation or n.train_loss) and math.isfinite(n.value))
    return kept if any(n.evaluation for n in kept) else ()


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None
