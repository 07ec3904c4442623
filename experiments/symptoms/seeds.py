"""A mutant over its seeds: how often each label fired (stable from ``STABLE_FRACTION``
of the seeds, unstable below), and its measured severity (the worst level reached or
exceeded in at least half of them). Rules that decide a mutant's verdict from all its
seeds, rather than from one run, belong here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from experiments.symptoms.verdict import RunVerdict
from experiments.symptoms.vocabulary import SEVERITY_ORDER, base_name, rank

STABLE_FRACTION = 0.8
ALSO_IN_CONTROL = "also in control"


def label_fractions(labels_per_seed: list[list[str]]) -> dict[str, float]:
    """Share of seeds in which each label fired, most frequent first."""
    if not labels_per_seed:
        return {}
    counts = Counter(label for labels in labels_per_seed for label in set(labels))
    total = len(labels_per_seed)
    return {label: count / total for label, count in counts.most_common()}


def format_labels(
    fractions: Mapping[str, float],
    n_seeds: int,
    *,
    stable: bool,
    control: Collection[str] = (),
) -> str:
    """``no_learning 5/5, worse_model 5/5`` (stable) or the labels under 80% (unstable); a
    label the loop's noop control also shows (``control``: base names) is marked so."""
    chosen = [
        (label, share) for label, share in fractions.items() if (share >= STABLE_FRACTION) == stable
    ]
    return ", ".join(
        f"{label} {round(share * n_seeds)}/{n_seeds}"
        + (f" ({ALSO_IN_CONTROL})" if base_name(label) in control else "")
        for label, share in chosen
    )


def measured_severity(runs: list[RunVerdict] | list[list[str]]) -> tuple[str, float]:
    """The worst severity reached or exceeded in at least half the seeds, and that share.

    Takes run verdicts, or bare label lists (judged as finished runs with a quality
    measure: only outcome labels count)."""
    verdicts = [v if isinstance(v, RunVerdict) else RunVerdict(v, "given", True) for v in runs]
    return severity_median([v.severity for v in verdicts])


def severity_median(severities: list[str]) -> tuple[str, float]:
    """``measured_severity`` of runs whose severities are already known."""
    if not severities:
        return "silent", 0.0
    ranks = [rank(severity) for severity in severities]
    for level, severity in enumerate(SEVERITY_ORDER):
        share = sum(r <= level for r in ranks) / len(ranks)
        if share >= 0.5:
            return severity, share
    return "silent", 1.0
