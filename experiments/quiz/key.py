"""The answer key: each bug with its lines, fix and check, ranked by measured impact.

Ranking: measured severity first (crash, breaks_training, degrades, cost_only, silent:
the catalog's order), then impact (``experiments.quiz.measure``), then position.
Each bug's numbers come from the catalog (``RESULTS/catalog/symptoms.csv``) when it holds
that exact site of that loop, else from the single-bug runs the quiz launched itself.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.symptoms import SEVERITY_ORDER

ANSWER_FILE = ".answer.json"
ANSWER_MARKDOWN = "answer.md"
KEY_VERSION = 1
KIND = {
    "crash": "crash",
    "timeout": "loud: never finishes in time",
    "breaks_training": "loud: breaks training",
    "degrades": "visible: degrades training",
    "unjudged": "not measured: silent or degrading, nothing here tells which",
    "misleads": "quiet: the model is fine, a reported number lies",
    "cost_only": "silent in the curves: costs time or memory",
    "silent": "silent",
}


def catalog_entry(
    results_dir: str | Path, loop: str, identity: str, n_classes: int | None
) -> dict[str, Any] | None:
    """What the catalog measured for this site of this loop, or None."""
    path = Path(results_dir) / "catalog" / "symptoms.csv"
    try:
        table = _symptoms_table(str(path), path.stat().st_mtime_ns)
    except OSError:
        return None
    if table is None:
        return None
    rows = table[(table["loop"] == loop) & (table["identity"] == identity)]
    if rows.empty:
        return None
    row = rows.iloc[0]
    severity = str(row["measured"])
    return {
        "severity": severity,
        "labels": _fractions(row.get("label_fractions")),
        "impact": 1.0 if severity == "crash" else _catalog_impact(row, n_classes),
        "source": "catalog",
        "seeds": int(row["n_seeds"]) if "n_seeds" in row and pd.notna(row["n_seeds"]) else None,
    }


@lru_cache(maxsize=4)
def _symptoms_table(path: str, mtime_ns: int) -> pd.DataFrame | None:
    """Read once per version of the file: a draw asks about every site of the loop."""
    try:
        return pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError):
        return None


def _fractions(value: Any) -> dict[str, float]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {}
    return {str(k): float(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _catalog_impact(row: pd.Series, n_classes: int | None) -> float | None:
    mutant, reference = row.get("mutant_val_metric_final"), row.get("ref_val_metric_final")
    if pd.isna(mutant) or pd.isna(reference):
        mutant, reference = row.get("mutant_final_over_initial"), row.get("ref_final_over_initial")
        if pd.isna(mutant) or pd.isna(reference) or reference >= 1:
            return None
        return float(np.clip((mutant - reference) / (1 - reference), 0, 1))
    chance = 1.0 / n_classes if n_classes else 0.0
    if reference - chance <= 0:
        return None
    return float(np.clip((reference - mutant) / (reference - chance), 0, 1))


def rank(bugs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bugs in answer order, each with its 1-based ``rank``."""

    def order(bug: Mapping[str, Any]) -> tuple:
        severity = bug.get("severity") or bug.get("expected") or "silent"
        position = SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else 99
        impact = bug.get("impact")
        return (position, -(impact if impact is not None else 0.0), min(bug["lines"]))

    ranked = sorted(bugs, key=order)
    return [{**bug, "rank": index} for index, bug in enumerate(ranked, 1)]


def read_key(folder: str | Path) -> dict[str, Any]:
    from experiments.quiz.draw import QuizError

    path = Path(folder) / ANSWER_FILE
    if not path.is_file():
        raise QuizError(f"{folder}: no quiz here (expected {path})")
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # unreadable, not UTF-8, not JSON
        raise QuizError(f"{path}: damaged answer key ({error}); make the quiz again") from None
    problem = _key_problem(key)
    if problem is not None:
        raise QuizError(f"{path}: damaged answer key ({problem}); make the quiz again")
    if key.get("version") != KEY_VERSION:
        raise QuizError(f"{path}: answer key version {key.get('version')}, expected {KEY_VERSION}")
    return key


def _key_problem(key: Any) -> str | None:
    """What grading and ``answer`` need of a key, checked before they use it."""
    if not isinstance(key, dict):
        return "not an object"
    missing = [name for name in ("version", "bugs", "practice", "loop") if name not in key]
    if missing:
        return f"no {missing[0]!r}"
    bugs = key["bugs"]
    if not isinstance(bugs, list) or not bugs:
        return "'bugs' is not a list of bugs"
    for bug in bugs:
        if not (
            isinstance(bug, dict)
            and isinstance(bug.get("rank"), int)
            and isinstance(bug.get("lines"), list)
            and all(isinstance(line, int) for line in bug["lines"])
        ):
            return "a bug without its rank and lines"
    return None


def key_markdown(key: Mapping[str, Any]) -> str:
    practice = key["practice"]
    lines = [
        f"# Answer key: {key['loop']}, {len(key['bugs'])} bugs ({key['level']}, seed {key['seed']})",
        "",
        f"The practice script ended {_statuses(practice['statuses'])} "
        f"(seeds {key['seeds']}); measured severity {practice['severity']}, "
        f"impact {_percent(practice['impact'])} of the correct loop's progress lost.",
    ]
    if practice["severity"] == "crash":
        lines.append(
            "The practice script crashes: whatever the bugs after the crash would do never "
            "shows in its curves. Fix the crash first, then look again."
        )
    lines.append("")
    for bug in key["bugs"]:
        where = ", ".join(str(n) for n in bug["lines"])
        lines += [
            f"## {bug['rank']}. line {where}: {bug['operator']} ({bug['category']})",
            "",
            f"- **Kind**: {KIND.get(bug['severity'], bug['severity'])} "
            f"(expected {bug['expected']}; measured {bug['severity']} from {bug['source']})",
            f"- **Impact**: {_percent(bug['impact'])} of the correct loop's progress lost; "
            f"symptoms: {_labels(bug['labels'])}",
            f"- **What**: {bug['summary']}",
            f"- **Fix**: {bug['fix'] or 'see the operator docs (`trainwreck operators`)'}",
            f"- **Check**: {bug['check'] or 'see the operator docs (`trainwreck operators`)'}",
            "",
        ]
    return "\n".join(lines)


def _statuses(statuses: list[str]) -> str:
    if not statuses:
        return "not run"
    counts = Counter(statuses)
    return ", ".join(f"{status} in {n} of {len(statuses)} seeds" for status, n in counts.items())


def _percent(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0%}"


def _labels(fractions: Mapping[str, float]) -> str:
    if not fractions:
        return "none measured"
    return ", ".join(f"{label} {share:.0%}" for label, share in fractions.items())
