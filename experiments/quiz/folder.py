"""``trainwreck quiz``: draw, measure and write a practice folder.

The folder holds ``practice.py``, ``curves.png``, ``index.html`` and the hidden key
``.answer.json``. It is written into a temporary sibling folder and renamed into place,
so a reader sees no folder or a complete one; a non-empty target is refused before
anything runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.files import staged_folder
from experiments.quiz import key as keys
from experiments.quiz.draw import Draw, QuizError, check_request, draw, strip_comments
from experiments.quiz.measure import Measurement, QuizLoop, Variant, measure, quiz_loop
from experiments.quiz.page import curves_png, index_html, plain_symptoms
from experiments.report.operators import parse_doc
from experiments.validity import is_valid
from mutations.registry import all_operators, operator_classes
from mutator import MutationError, SourceFile
from mutator.engine import Mutant

PRACTICE_FILE = "practice.py"
DEFAULT_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class QuizRequest:
    loop: str = "mlp_digits"
    bugs: int = 3
    seed: int = 0
    level: str = "medium"
    out: Path = Path("quiz")
    results_dir: Path = Path("results")
    epochs: int | None = None  # None: the loop config's
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    workers: int | None = None


def check_out_dir(out: Path) -> None:
    for parent in Path(out).absolute().parents:  # the nearest existing one must be a folder
        if parent.exists():
            if not parent.is_dir():
                raise QuizError(f"{out}: {parent} is a file; choose an --out inside a folder")
            break
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise QuizError(f"{out}: exists and is not an empty folder; choose another --out")


def prepare(request: QuizRequest) -> tuple[QuizLoop, SourceFile, Draw]:
    """Everything that can fail on bad input, before anything runs or is written."""
    check_request(request.bugs, request.level)
    check_out_dir(request.out)
    loop = quiz_loop(request.loop, request.epochs)
    clean = strip_comments(loop.script.read_text(encoding="utf-8"))
    try:
        parsed = SourceFile(clean, loop.script.name)
    except MutationError as error:
        raise QuizError(str(error)) from None
    sites = parsed.find_sites(all_operators())

    def severity(site) -> str:
        entry = keys.catalog_entry(request.results_dir, loop.name, site.identity, loop.n_classes)
        return entry["severity"] if entry else site.operator.expected or "degrades"

    # A site the catalog measured as not its bug (stillborn, equivalent, unreached) is no
    # bug to find.
    sites = [site for site in sites if is_valid(severity(site))]
    return loop, parsed, draw(parsed, sites, request.bugs, request.level, request.seed, severity)


def make_quiz(request: QuizRequest, progress: Callable[[str], None] = lambda _: None) -> Path:
    loop, parsed, drawn = prepare(request)
    singles = {bug.site.identity: parsed.apply([bug.site]) for bug in drawn.bugs}
    catalog = {
        identity: keys.catalog_entry(request.results_dir, loop.name, identity, loop.n_classes)
        for identity in singles
    }
    variants = [_variant(drawn.mutant)] + [
        _variant(mutant) for identity, mutant in singles.items() if catalog[identity] is None
    ]
    progress(
        f"running the practice script and {len(variants) - 1} single bugs on {len(request.seeds)} seeds"
    )
    measured = measure(loop, variants, request.seeds, request.results_dir, request.workers)
    answer = _answer(request, loop, drawn, measured, catalog)
    reference = [
        measured.curves[("none", s)] for s in request.seeds if ("none", s) in measured.curves
    ]
    identity = drawn.mutant.identity
    practice = [
        measured.curves[(identity, s)] for s in request.seeds if (identity, s) in measured.curves
    ]
    png = curves_png(reference, practice, f"{loop.name}: practice script vs correct loop")
    html = index_html(
        loop=loop.name,
        bugs=len(drawn.bugs),
        level=request.level,
        source=drawn.mutant.source,
        png=png,
        symptoms=plain_symptoms(measured.labels(identity), len(request.seeds)),
        statuses=measured.statuses(identity),
        epochs=loop.loop.epochs,
    )
    files = {
        PRACTICE_FILE: drawn.mutant.source.encode("utf-8"),
        "curves.png": png,
        "index.html": html.encode("utf-8"),
        keys.ANSWER_FILE: json.dumps(answer, indent=2).encode("utf-8"),
    }
    return _write_atomically(request.out, files)


def _variant(mutant: Mutant) -> Variant:
    return Variant(mutant.source, {**mutant.manifest_entry(), "diff": mutant.diff})


def _answer(
    request: QuizRequest,
    loop: QuizLoop,
    drawn: Draw,
    measured: Measurement,
    catalog: dict[str, dict[str, Any] | None],
) -> dict[str, Any]:
    classes = operator_classes()
    bugs = []
    for bug in drawn.bugs:
        site = bug.site
        _, sections = parse_doc(classes[site.operator.name].doc())
        entry = catalog[site.identity] or {
            "severity": measured.severity(site.identity),
            "labels": measured.labels(site.identity),
            "impact": measured.impact(site.identity),
            "source": "runs",
        }
        bugs.append(
            {
                "operator": site.operator.name,
                "label": site.operator.label,
                "category": site.operator.category,
                "identity": site.identity,
                "lines": list(bug.mutant_lines),
                "original_lines": list(bug.original_lines),
                "summary": site.operator.summary,
                "expected": site.operator.expected,
                "drawn_as": bug.severity,
                "severity": entry["severity"] or site.operator.expected,
                "impact": entry["impact"],
                "labels": entry["labels"],
                "source": entry["source"],
                "fix": sections.get("Fix", ""),
                "check": sections.get("Check", ""),
            }
        )
    identity = drawn.mutant.identity
    return {
        "version": keys.KEY_VERSION,
        "loop": loop.name,
        "level": request.level,
        "seed": request.seed,
        "seeds": list(request.seeds),
        "epochs": loop.loop.epochs,
        "identity": identity,
        "practice": {
            "severity": measured.severity(identity),
            "impact": measured.impact(identity),
            "labels": measured.labels(identity),
            "statuses": measured.statuses(identity),
        },
        "bugs": keys.rank(bugs),
    }


def _write_atomically(out: Path, files: dict[str, bytes]) -> Path:
    check_out_dir(out)  # again, in the quiz's own words: the runs took a while
    with staged_folder(out) as staging:
        for name, content in files.items():
            (staging / name).write_bytes(content)
    return out
