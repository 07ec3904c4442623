"""Interactions between bugs: A alone, B alone and A+B, measured on the same seeds.

Pairs come from two places: every pair of bugs that co-occur in the quizzes of seeds
0..N-1 at each level, and every pair of the classic five of the interview round
(``CLASSIC``: no zero_grad, MSE for classification, eval without train, eval without
no_grad, input not moved to the device), injected by the real operators into
``classic_loop.py``, plus those five together.

The rule, on impact (share of the correct loop's progress lost, ``measure``) ``a``, ``b``,
``ab`` and each run's stable symptom labels (fired in at least half the seeds):
two independent losses of progress would combine as ``expected = 1 - (1-a)(1-b)``.

1. ``independent`` when ``a``, ``b`` and ``ab`` are all within ``TOLERANCE`` of zero;
2. ``amplifies`` when ``ab > expected + TOLERANCE``;
3. ``masks`` when ``ab < expected - TOLERANCE`` (one bug hides part of the other, e.g. a
   dead optimizer step hides a wrong learning rate), or when both bugs show alone but the
   pair shows none of one bug's own labels (e.g. a crash hides what comes after it);
   ``hidden`` names the bug whose symptoms disappeared;
4. ``adds`` when both bugs show alone (impact above ``TOLERANCE``) and the pair is as
   expected;
5. ``independent`` otherwise: one bug does nothing measurable and the pair looks like the
   other alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from experiments.files import write_text_atomic
from experiments.quiz.draw import LEVELS, QuizError, draw, strip_comments
from experiments.quiz.measure import Measurement, QuizLoop, Variant, measure, quiz_loop
from experiments.report.interactions import (
    CSV_FILE,
    MARKDOWN_FILE,
    TOLERANCE,
    interactions_markdown,
)
from experiments.sweep import Loop
from mutations.registry import all_operators
from mutator import MutationError, SourceFile
from mutator.engine import Mutant, Site

CLASSIC = (
    "drop_zero_grad",
    "mse_for_classification",
    "drop_train_mode",
    "drop_no_grad",
    "drop_input_to_device",
)
CLASSIC_SCRIPT = Path(__file__).resolve().parent / "classic_loop.py"
CLASSIC_LOOP_NAME = "classic_digits"
STABLE_SHARE = 0.5
COLUMNS = [
    "loop",
    "origin",
    "a",
    "b",
    "relation",
    "hidden",
    "impact_a",
    "impact_b",
    "impact_ab",
    "expected_ab",
    "labels_a",
    "labels_b",
    "labels_ab",
    "site_a",
    "site_b",
    "seeds",
]


@dataclass(frozen=True)
class InteractionRequest:
    loop: str = "mlp_digits"
    results_dir: Path = Path("results")
    epochs: int | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    quizzes: int = 5
    bugs: int = 3
    classic: bool = True
    workers: int | None = None


@dataclass(frozen=True)
class Pair:
    origin: str  # "quiz" or "classic"
    first: Site
    second: Site


def classify(
    a: float, b: float, ab: float, labels_a: set[str], labels_b: set[str], labels_ab: set[str]
) -> tuple[str, str]:
    """(relation, hidden) by the rule of the module docstring; hidden is "", "a" or "b"."""
    expected = 1 - (1 - a) * (1 - b)
    if max(a, b, ab) <= TOLERANCE:
        return "independent", ""
    if ab > expected + TOLERANCE:
        return "amplifies", ""
    hidden = _hidden(a, b, labels_a, labels_b, labels_ab)
    if ab < expected - TOLERANCE:
        return "masks", hidden or ("a" if a < b else "b")
    if hidden:
        return "masks", hidden
    if min(a, b) > TOLERANCE:
        return "adds", ""
    return "independent", ""


def _hidden(a: float, b: float, la: set[str], lb: set[str], lab: set[str]) -> str:
    """Which bug, visible alone, left none of its own labels in the pair."""
    for name, impact, own in (("a", a, la - lb), ("b", b, lb - la)):
        if impact > TOLERANCE and own and not own & lab:
            return name
    return ""


def stable_labels(fractions: dict[str, float]) -> set[str]:
    return {label for label, share in fractions.items() if share >= STABLE_SHARE} - {"silent"}


def quiz_pairs(parsed: SourceFile, sites: Sequence[Site], quizzes: int, bugs: int) -> list[Pair]:
    """Distinct pairs of co-occurring bugs over the quizzes of seeds 0..quizzes-1."""
    pairs: dict[tuple[str, str], Pair] = {}
    for level, seed in itertools.product(LEVELS, range(quizzes)):
        try:
            drawn = draw(parsed, sites, bugs, level, seed, lambda s: s.operator.expected)
        except QuizError:
            continue  # this loop has no quiz at this level: no pairs from it
        for first, second in itertools.combinations([bug.site for bug in drawn.bugs], 2):
            pairs.setdefault((first.identity, second.identity), Pair("quiz", first, second))
    return list(pairs.values())


def classic_sites(sites: Sequence[Site]) -> list[Site]:
    """The first site of each classic operator that this loop has, in document order."""
    chosen: dict[str, Site] = {}
    for site in sites:
        if site.operator.name in CLASSIC and site.operator.name not in chosen:
            chosen[site.operator.name] = site
    return sorted(chosen.values(), key=lambda site: (site.line, site.column))


def classic_loop(epochs: int | None, budget: object) -> QuizLoop:
    """``classic_loop.py`` as a quiz loop (10 epochs unless told otherwise)."""
    return QuizLoop(
        CLASSIC_LOOP_NAME,
        Loop(script=str(CLASSIC_SCRIPT), name=CLASSIC_LOOP_NAME, epochs=epochs or 10),
        CLASSIC_SCRIPT,
        10,
        budget,
    )


def run_interactions(
    request: InteractionRequest, progress: Callable[[str], None] = lambda _: None
) -> list[Path]:
    """Measure the quiz pairs of ``request.loop`` and the classic five (on
    ``classic_loop.py``), and write the tables into ``RESULTS/catalog``."""
    loop = quiz_loop(request.loop, request.epochs)
    frames = []
    if request.quizzes:
        parsed, sites = _parse(loop)
        pairs = quiz_pairs(parsed, sites, request.quizzes, request.bugs)
        frames.append(_measure_pairs(loop, parsed, pairs, [], request, progress))
    if request.classic:
        classic = classic_loop(request.epochs, loop.budget)
        parsed, sites = _parse(classic)
        five = classic_sites(sites)
        pairs = [Pair("classic", a, b) for a, b in itertools.combinations(five, 2)]
        frames.append(_measure_pairs(classic, parsed, pairs, five, request, progress))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    return write_interactions(request.results_dir, frame)


def _parse(loop: QuizLoop) -> tuple[SourceFile, list[Site]]:
    parsed = SourceFile(strip_comments(loop.script.read_text(encoding="utf-8")), loop.script.name)
    return parsed, parsed.find_sites(all_operators())


def _measure_pairs(
    loop: QuizLoop,
    parsed: SourceFile,
    pairs: Sequence[Pair],
    together: Sequence[Site],
    request: InteractionRequest,
    progress: Callable[[str], None],
) -> pd.DataFrame:
    mutants = _mutants(parsed, pairs, together)
    progress(
        f"{loop.name}: {len(pairs)} pairs, {len(mutants)} scripts x {len(request.seeds)} seeds"
    )
    variants = [Variant(m.source, {**m.manifest_entry(), "diff": m.diff}) for m in mutants.values()]
    measured = measure(loop, variants, request.seeds, request.results_dir, request.workers)
    frame = interactions_frame(loop.name, pairs, mutants, measured, request.seeds)
    if len(together) > 1:
        frame = pd.concat(
            [frame, _classic_row(loop.name, together, mutants, measured, request.seeds)],
            ignore_index=True,
        )
    return frame


def _key(sites: Sequence[Site]) -> tuple[str, ...]:
    return tuple(site.identity for site in sorted(sites, key=lambda s: (s.line, s.column)))


def _mutants(
    parsed: SourceFile, pairs: Sequence[Pair], classic: Sequence[Site]
) -> dict[tuple[str, ...], Mutant]:
    """Every single bug, every pair and the classic set, by their sites' identities."""
    groups: list[list[Site]] = []
    for pair in pairs:
        groups += [[pair.first], [pair.second], [pair.first, pair.second]]
    if len(classic) > 1:
        groups.append(list(classic))
    mutants = {}
    for group in groups:
        key = _key(group)
        if key in mutants:
            continue
        try:
            mutants[key] = parsed.apply(sorted(group, key=lambda s: (s.line, s.column)))
        except MutationError:
            continue  # overlapping sites: the pair is skipped below
    return mutants


def interactions_frame(
    loop: str,
    pairs: Sequence[Pair],
    mutants: dict[tuple[str, ...], Mutant],
    measured: Measurement,
    seeds: Sequence[int],
) -> pd.DataFrame:
    rows = []
    for pair in pairs:
        parts = [_key([pair.first]), _key([pair.second]), _key([pair.first, pair.second])]
        if any(part not in mutants for part in parts):
            continue
        impacts = [measured.impact(mutants[part].identity) for part in parts]
        if any(value is None for value in impacts):
            continue
        labels = [stable_labels(measured.labels(mutants[part].identity)) for part in parts]
        a, b, ab = impacts
        relation, hidden = classify(a, b, ab, *labels)
        rows.append(
            {
                "loop": loop,
                "origin": pair.origin,
                "a": pair.first.operator.name,
                "b": pair.second.operator.name,
                "relation": relation,
                "hidden": {"a": pair.first.operator.name, "b": pair.second.operator.name}.get(
                    hidden, ""
                ),
                "impact_a": round(a, 3),
                "impact_b": round(b, 3),
                "impact_ab": round(ab, 3),
                "expected_ab": round(1 - (1 - a) * (1 - b), 3),
                **{
                    f"labels_{name}": " ".join(sorted(found)) or "silent"
                    for name, found in zip(("a", "b", "ab"), labels)
                },
                "site_a": pair.first.identity,
                "site_b": pair.second.identity,
                "seeds": len(seeds),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def _classic_row(
    loop: str,
    classic: Sequence[Site],
    mutants: dict[tuple[str, ...], Mutant],
    measured: Measurement,
    seeds: Sequence[int],
) -> pd.DataFrame:
    """The five together against the worst of them alone (no pairwise rule applies)."""
    combined = mutants.get(_key(classic))
    if combined is None:
        return pd.DataFrame(columns=COLUMNS)
    singles = [measured.impact(mutants[_key([site])].identity) or 0.0 for site in classic]
    together = measured.impact(combined.identity)
    kept = 1.0
    for value in singles:
        kept *= 1 - value
    labels = stable_labels(measured.labels(combined.identity))
    row = dict.fromkeys(COLUMNS, "")
    row.update(
        loop=loop,
        origin="classic_all",
        a="+".join(site.operator.name for site in classic),
        relation="combined",
        impact_a=round(max(singles), 3),
        impact_ab=round(together, 3) if together is not None else None,
        expected_ab=round(1 - kept, 3),
        labels_ab=" ".join(sorted(labels)) or "silent",
        site_a="+".join(site.identity for site in classic),
        seeds=len(seeds),
    )
    return pd.DataFrame([row], columns=COLUMNS)


def write_interactions(results_dir: str | Path, frame: pd.DataFrame) -> list[Path]:
    """``interactions.csv`` and ``interactions.md`` into ``RESULTS/catalog``, each file
    replaced atomically (a reader never sees half a table)."""
    out = Path(results_dir) / "catalog"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (
        (CSV_FILE, frame.to_csv(index=False)),
        (MARKDOWN_FILE, interactions_markdown(frame)),
    ):
        write_text_atomic(out / name, text)
        written.append(out / name)
    return written
