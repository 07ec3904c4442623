"""Captured events -> the ``report`` records every consumer already reads, once each.

Per field (``val_loss``, ``val_metric``) one series is chosen for the whole run, so one
epoch seen by two sources (printed and sent to TensorBoard) counts once:

1. a script's own ``report(...)`` with that field wins outright (nothing is added);
2. otherwise the best series by, in order: split (``val`` before ``test``: the per-epoch
   validation is the curve the symptoms read; a final test number comes second), kind
   (for ``val_metric``: an accuracy or the ``loop.metrics`` group before another
   higher-is-better metric such as ``f1``; a lower-is-better one is never a
   ``val_metric``), source (``events.SOURCES``: pattern > tensorboard > wandb >
   lightning > logging > stdout > stderr), more points, first seen.

A ``val_metric`` series is a fraction: one that shows a ``%`` sign or a value above 1 is
read as a percentage and divided by 100; one with a value above 100 is not an accuracy
and is passed over. Each chosen event becomes one ``report`` record with ``source``,
``split``, the chosen fields, ``val_metric_kind``, ``names`` (what the script called
them) and, from the same event, ``train_loss``, ``val_ppl``, ``step``, ``epoch``, ``at``.
``summary`` is the ``capture`` record: which source measured each field (the interface
of the verdicts, see ``experiments.capture``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from experiments.capture import keys
from experiments.capture.events import FRACTION, PERCENT, SOURCES, Event, Number

FIELDS = ("val_loss", "val_metric")
# The keys a report() call may use for each field (experiments/signature.py reads them).
REPORT_KEYS = {"val_loss": ("val_loss",), "val_metric": ("val_metric", "val_acc", "val_accuracy")}
SPLIT_RANK = {"val": 0, "test": 1}
SUMMARY_RECORD = "capture"


@dataclass
class Series:
    source: str
    split: str
    kind: str
    name: str
    points: list[tuple[int, Number]] = field(default_factory=list)  # (event index, number)

    def rank(self, target: str) -> tuple[int, ...]:
        kind_rank = 0 if target == "val_loss" or self.kind in (keys.ACCURACY, "metric") else 1
        first = self.points[0][0]
        return (
            SPLIT_RANK[self.split],
            kind_rank,
            SOURCES.index(self.source),
            -len(self.points),
            first,
        )


@dataclass
class Resolution:
    records: list[dict[str, Any]]  # the ``report`` records to write, in event order
    summary: dict[str, Any]  # the ``capture`` record


def reported_fields(reports: Iterable[Mapping[str, Any]]) -> set[str]:
    """The fields the script's own ``report(...)`` calls gave a value."""
    found = set()
    for report in reports:
        for target, names in REPORT_KEYS.items():
            if any(report.get(name) is not None for name in names):
                found.add(target)
    return found


def resolve(events: list[Event], reported: set[str], *, pattern: str | None = None) -> Resolution:
    chosen: dict[str, tuple[Series, float]] = {}
    for target in FIELDS:
        if target in reported:
            continue
        for series in sorted(_series(events, target), key=lambda s: s.rank(target)):
            divisor = _divisor(series) if target == "val_metric" else 1.0
            if divisor is not None:
                chosen[target] = (series, divisor)
                break
    records = _records(events, chosen)
    summary = _summary(events, reported, chosen, len(records), pattern)
    return Resolution(records, summary)


def _series(events: list[Event], target: str) -> list[Series]:
    found: dict[tuple[str, str, str, str], Series] = {}
    for index, event in enumerate(events):
        for number in event.numbers:
            if number.split not in SPLIT_RANK or not _fits(number, target):
                continue
            key = (event.source, number.split, number.kind, number.name)
            if key not in found:
                found[key] = Series(*key)
            found[key].points.append((index, number))
    return list(found.values())


def _fits(number: Number, target: str) -> bool:
    if target == "val_loss":
        return number.kind == keys.LOSS
    return number.higher_is_better


def _divisor(series: Series) -> float | None:
    """100 for a percentage series, 1 for fractions; None: not a 0..1 (or 0..100) metric."""
    said = [n for _, n in series.points if n.scale != FRACTION]
    if any(n.value > 100 for n in said):
        return None
    if any(n.scale == PERCENT or n.value > 1 for n in said):
        return 100.0
    return 1.0


def _records(
    events: list[Event], chosen: Mapping[str, tuple[Series, float]]
) -> list[dict[str, Any]]:
    # One record per source and counter: a scalar per add_scalar call at one step (the
    # loss, then the accuracy) is one evaluation; an event without counters stands alone.
    by_event: dict[tuple[Any, ...], dict[str, Any]] = {}
    first: dict[tuple[Any, ...], int] = {}
    for target, (series, divisor) in chosen.items():
        for index, number in series.points:
            event = events[index]
            group = (
                (event.source, event.step, event.epoch)
                if event.step is not None or event.epoch is not None
                else ("", index)
            )
            first[group] = min(first.get(group, index), index)
            record = by_event.setdefault(group, _frame(event, series.split))
            _companions(record, event, series.split)
            scaled = number.value if number.scale == FRACTION else number.value / divisor
            record[target] = float(f"{scaled:.12g}")  # 91.5 / 100 is 0.915, not 0.91500000001
            record["names"][target] = number.name
            if target == "val_metric":
                record["val_metric_kind"] = number.kind
    return [by_event[group] for group in sorted(by_event, key=first.__getitem__)]


def _frame(event: Event, split: str) -> dict[str, Any]:
    """The parts of a report record that come from the event, not the chosen series."""
    record: dict[str, Any] = {"source": event.source, "split": split, "names": {}}
    for name in ("step", "epoch", "at"):
        value = getattr(event, name)
        if value is not None:
            record[name] = value
    return record


def _companions(record: dict[str, Any], event: Event, split: str) -> None:
    """The training loss and perplexity the event showed beside the chosen numbers."""
    for number in event.numbers:
        if number.train_loss:
            record.setdefault("train_loss", number.value)
        elif number.kind == keys.PERPLEXITY and number.split == split:
            record.setdefault("val_ppl", number.value)


def _summary(
    events: list[Event],
    reported: set[str],
    chosen: Mapping[str, tuple[Series, float]],
    written: int,
    pattern: str | None,
) -> dict[str, Any]:
    measured_by: dict[str, str | None] = {}
    names: dict[str, str] = {}
    for target in FIELDS:
        if target in reported:
            measured_by[target] = "report"
        elif target in chosen:
            series, divisor = chosen[target]
            measured_by[target] = series.source
            names[target] = f"{series.name} ({series.split})"
            if target == "val_metric":
                names[target] += " %" if divisor == 100.0 else ""
        else:
            measured_by[target] = None
    return {
        "measured_by": measured_by,
        "names": names,
        "events": dict(Counter(event.source for event in events)),
        "pattern": pattern,
        "written": written,
    }
