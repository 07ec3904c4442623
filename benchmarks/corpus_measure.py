"""The corpus measured: hand labels joined with the mutants and the expected sites, counted
per script and operator (the metrics of corpus_sites.py's docstring). Used by
corpus_report.py (``bench_sites.py --corpus``) and the corpus tests."""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # loaded by a test
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import site_match
from corpus_sites import LABEL_KINDS, CorpusMutant, Label


@dataclass
class Tally:
    """Counts for one operator or one script."""

    labels: Counter = field(default_factory=Counter)
    errors: int = 0
    expected: int = 0
    matched: int = 0

    def add(self, other: Tally) -> None:
        self.labels.update(other.labels)
        self.errors += other.errors
        self.expected += other.expected
        self.matched += other.matched

    @property
    def default_path(self) -> tuple[int, int]:
        """(ok, ok + different + false + engine errors)."""
        ok = self.labels["ok"]
        return ok, ok + self.labels["different"] + self.labels["false"] + self.errors

    @property
    def overall(self) -> tuple[int, int]:
        right = self.labels["ok"] + self.labels["eval_only"] + self.labels["off_path"]
        return right, sum(self.labels[k] for k in LABEL_KINDS) + self.errors


@dataclass
class Measurement:
    """Everything the report prints: per (script, operator) tallies and the problems."""

    tallies: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    unlabelled: list[CorpusMutant] = field(default_factory=list)
    stale: list[CorpusMutant] = field(default_factory=list)
    orphans: list[Label] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    missing_scripts: list[str] = field(default_factory=list)
    missed: list[tuple[str, str, site_match.Entry]] = field(default_factory=list)
    unexpected_ok: list[CorpusMutant] = field(default_factory=list)
    mislabelled: list[tuple[CorpusMutant, str]] = field(default_factory=list)
    labels_of: dict[tuple[str, str, str], Label] = field(default_factory=dict)
    used: set[tuple[str, str, str]] = field(default_factory=set)  # labels a mutant matched

    def by(self, index: int) -> dict[str, Tally]:
        """Tallies summed per operator (index 1) or per script (index 0)."""
        summed: dict[str, Tally] = defaultdict(Tally)
        for key, tally in self.tallies.items():
            summed[key[index]].add(tally)
        return dict(sorted(summed.items()))

    def total(self) -> Tally:
        whole = Tally()
        for tally in self.tallies.values():
            whole.add(tally)
        return whole


def measure(
    mutants: dict[str, list[CorpusMutant]],
    errors: dict[str, list[str]],
    labels: dict[tuple[str, str, str], Label],
    expected: dict[str, dict[str, list[site_match.Entry]]],
) -> Measurement:
    """Join the mutants of each script with the labels and the expected sites."""
    m = Measurement(labels_of=labels)
    known = {(label.script, label.identity) for label in labels.values()}
    used = m.used
    for script, found in mutants.items():
        for mutant in found:
            tally = m.tallies[(script, mutant.operator)]
            label = labels.get(mutant.key)
            if label is None:
                stale = (script, mutant.identity) in known
                (m.stale if stale else m.unlabelled).append(mutant)
                continue
            used.add(mutant.key)
            tally.labels[label.label] += 1
        for error in errors.get(script, []):
            operator = error.split(":", 1)[0]
            m.tallies[(script, operator)].errors += 1
            m.errors.append((script, error))
        wanted = expected.get(script, {})
        for operator, entries in wanted.items():
            mine = [x for x in found if x.operator == operator]
            for entry in entries:
                m.tallies[(script, operator)].expected += 1
                hits = [x for x in mine if entry.accepts(x.found)]
                if any(_label(labels, x) == "ok" for x in hits):
                    m.tallies[(script, operator)].matched += 1
                    continue
                m.missed.append((script, operator, entry))
                for x in hits:
                    if _label(labels, x) not in (None, "ok"):
                        m.mislabelled.append((x, entry.describe()))
        for mutant in found:
            if _label(labels, mutant) == "ok" and not any(
                e.accepts(mutant.found) for e in wanted.get(mutant.operator, [])
            ):
                m.unexpected_ok.append(mutant)
    m.orphans = [
        label for key, label in labels.items() if key not in used and label.script in mutants
    ]
    return m


def _label(labels: dict[tuple[str, str, str], Label], mutant: CorpusMutant) -> str | None:
    label = labels.get(mutant.key)
    return label.label if label else None
