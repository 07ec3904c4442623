"""Numbers in printed lines and logging messages: built-in shapes and ``loop.metrics``.

Built-in reading: every number on a line is named by the words right before it, back to
the previous number or a delimiter (``|``, ``,``, ``;``, brackets, `` - ``, a tab);
``keys.classify(..., strict=True)`` says what those words make it. A split word stays in
force for the rest of the line (``Test set: Average loss: 0.03, Accuracy: 98/100`` is a
test loss and a test accuracy), until another one replaces it (``train loss 1.91, val
loss 2.01``). ``n/m`` after an accuracy is the fraction n/m; a ``%`` after a number marks
it as a percentage. ``Epoch 3``, ``step 250``, ``iter 40`` set the counters of the line
and of the lines after it (a test line printed after ``Train Epoch: 3`` belongs to epoch 3).

``loop.metrics`` is a regular expression searched in every line and logging message;
its named groups ``val_loss``, ``val_metric`` (higher is better), and optionally
``train_loss``, ``step``, ``epoch`` are read as numbers (source ``pattern``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from experiments.capture import keys
from experiments.capture.events import FRACTION, PERCENT, Event, Number, keep

_NUMBER = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
# A number not glued to a word (top1, f1, acc@1 and 3e-4's exponent are not numbers).
_VALUE = re.compile(
    rf"(?<![\w.@/+-])(?P<value>{_NUMBER})(?![\w.])"
    r"(?:\s*/\s*(?P<total>\d+)(?![\w.]))?(?P<percent>\s*%)?"
)
_DELIMITER = re.compile(r"\s-\s|[|,;()\[\]{}\t]")
_OPENERS = "([{"
_WORD = re.compile(r"[A-Za-z][\w@./-]*")
# Cheap pre-filter: a line with none of these words holds no metric.
_HINT = re.compile(
    r"loss|acc|ppl|perplex|top|nll|xent|f1|auc|r2|bleu|map|iou|dice|mae|mse|err|wer|cer|bp[cb]|\bce\b",
    re.IGNORECASE,
)
# ... and one with no split word (val, valid, eval, test, dev) holds no evaluation's number:
# most lines a training loop prints ("iter 250: loss 1.91") stop at these two searches.
_SPLIT_HINT = re.compile(r"val|eval|test|dev", re.IGNORECASE)
PATTERN_GROUPS = ("val_loss", "val_metric")


class LineReader:
    """Reads one stream's lines in order; keeps the last epoch and step it saw."""

    def __init__(self, source: str, pattern: re.Pattern[str] | None = None) -> None:
        self.source = source
        self.pattern = pattern
        self.epoch: int | None = None
        self.step: int | None = None

    def read(self, line: str, at: float | None = None) -> Iterator[Event]:
        """The events of one line: the built-in reading's and the pattern's, if any."""
        if _HINT.search(line):
            if _SPLIT_HINT.search(line):
                kept = keep(self._numbers(line))
                if kept:
                    yield Event(self.source, kept, self.step, self.epoch, at)
            else:
                self._counters(line)
        if self.pattern is not None:
            event = self._pattern_event(line, at)
            if event is not None:
                yield event

    def read_text(self, text: str) -> Iterator[Event]:
        for line in re.split(r"[\r\n]+", text):
            if line.strip():
                yield from self.read(line)

    def _numbers(self, line: str) -> list[Number]:
        numbers: list[Number] = []
        split: str | None = None
        cursor = 0
        for match in _VALUE.finditer(line):
            segment = line[cursor : match.start()]
            cursor = match.end()
            words = _words_before(segment)
            if not words or keys.NOT_A_METRIC.intersection(words):
                continue  # "eval_interval 250" says no split for the numbers after it
            split = keys.split_of(words) or split
            counter = keys.counter_of(words)
            if counter is not None:
                self._count(counter, match)
                continue
            key = keys.classify_words(words, strict=True)
            if key is None:
                continue
            number = _value(match, key.kind)
            if number is None:
                continue
            value, scale = number
            name = " ".join(_WORD.findall(_key_text(segment))[-2:]) or key.kind
            numbers.append(Number(name, split, key.kind, key.higher_is_better, value, scale))
        return numbers

    def _counters(self, line: str) -> None:
        """Only the counters of a line that holds no evaluation (``iter 250: loss 1.9``)."""
        cursor = 0
        for match in _VALUE.finditer(line):
            words = _words_before(line[cursor : match.start()])
            cursor = match.end()
            counter = keys.counter_of(words)
            if counter is not None:
                self._count(counter, match)
                return

    def _count(self, counter: str, match: re.Match[str]) -> None:
        try:
            value = int(float(match["value"]))
        except (ValueError, OverflowError):
            return
        if counter == "epoch":
            self.epoch = value
        else:
            self.step = value

    def _pattern_event(self, line: str, at: float | None) -> Event | None:
        assert self.pattern is not None
        match = self.pattern.search(line)
        if match is None:
            return None
        groups = match.groupdict()
        numbers = []
        for group, key in (
            ("val_loss", keys.Key("val", keys.LOSS, False)),
            ("val_metric", keys.Key("val", "metric", True)),
            ("train_loss", keys.Key("train", keys.LOSS, False)),
        ):
            value = _float(groups.get(group))
            if value is not None:
                numbers.append(Number.of(group, key, value))
        kept = keep(numbers)
        if not kept:
            return None
        step, epoch = _float(groups.get("step")), _float(groups.get("epoch"))
        return Event(
            "pattern",
            kept,
            int(step) if step is not None else self.step,
            int(epoch) if epoch is not None else self.epoch,
            at,
        )


def compile_pattern(text: str | None) -> re.Pattern[str] | None:
    """``loop.metrics`` compiled; ValueError saying what is wrong and what would be right."""
    if not text:
        return None
    example = "e.g. 'val loss (?P<val_loss>[0-9.]+)'"
    try:
        pattern = re.compile(text)
    except re.error as error:
        raise ValueError(
            f"loop.metrics={text!r} is not a regular expression ({error}); {example}"
        ) from None
    if not set(PATTERN_GROUPS) & set(pattern.groupindex):
        raise ValueError(
            f"loop.metrics={text!r} has no named group val_loss or val_metric; {example}"
        )
    return pattern


def read_lines(lines: Iterable[str], source: str) -> list[Event]:
    """Every event of ``lines`` with the built-in reading (tests and one-off use)."""
    reader = LineReader(source)
    return [event for line in lines for event in reader.read(line)]


def _tail(text: str) -> str:
    """The text after the last delimiter; past an opening bracket with nothing after it
    (``Epoch [3/10]``), the text before that bracket."""
    pieces = _DELIMITER.split(text)
    last = pieces[-1]
    if not _WORD.search(last) and len(pieces) >= 2:
        ended = _DELIMITER.findall(text)[-1]
        if ended.strip() in _OPENERS and text.rstrip().endswith(ended.strip()):
            return pieces[-2]
    return last


def _key_text(segment: str) -> str:
    """The words that name the number after ``segment`` (``val loss tensor(`` names it
    ``val loss``: a printed tensor is a number too)."""
    return re.sub(r"\btensor\s*$", "", _tail(segment).rstrip(" (=:"))


def _words_before(segment: str) -> tuple[str, ...]:
    return keys.tokens(" ".join(_WORD.findall(_key_text(segment))))


def _value(match: re.Match[str], kind: str) -> tuple[float, str | None] | None:
    value = float(match["value"])
    if match["total"] is not None:
        total = float(match["total"])
        if kind != keys.ACCURACY or total <= 0 or value > total:
            return None  # "loss 3/10" is not a loss
        return value / total, FRACTION
    return value, PERCENT if match["percent"] else None


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None
