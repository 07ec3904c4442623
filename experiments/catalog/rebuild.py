"""``trainwreck report RESULTS_DIR`` as a function: load, judge, write, summarise."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.catalog.notes import verdict_notes
from experiments.catalog.runs import load_runs
from experiments.catalog.tables import build_tables
from experiments.catalog.write import write_catalog
from experiments.report.validity import summary_line
from experiments.validity import validity_table


@dataclass
class CatalogSummary:
    out_dir: Path
    files: dict[str, Path]
    n_runs: int
    n_mutants: int
    n_loops: int
    cached_signatures: int
    control: dict[str, Any]
    seconds: float
    agreement: tuple[int, int] = (0, 0)  # mutants whose measured severity = declared, of
    misleads: int = 0  # mutants whose model is fine but a reported number lies
    validity: str = ""  # how many mutants are not their bug (report.validity.summary_line)
    unjudged: int = 0  # mutants with no verdict (left out of the agreement)
    notes: list[str] = field(default_factory=list)  # per loop: source, control, unjudged


def rebuild_report(
    results_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    n_classes: Mapping[str, int] | int | None = None,
    progress: Callable[[str], None] | None = None,
    keys: Collection[str] | None = None,
) -> CatalogSummary:
    """``trainwreck report RESULTS_DIR``: rebuild every catalog file from stored runs
    (only the runs named by ``keys`` when given)."""
    started = time.perf_counter()
    out_dir = Path(out_dir) if out_dir is not None else Path(results_dir) / "catalog"
    say = progress or (lambda message: None)
    runs = load_runs(results_dir, n_classes=n_classes, keys=keys)
    say(f"loaded {len(runs)} runs ({sum(run.cached for run in runs)} signatures cached)")
    tables = build_tables(runs)
    files = write_catalog(tables, out_dir)
    say(f"wrote {len(files)} files to {out_dir}")
    judged = tables.symptoms
    mutants = judged[judged["role"] == "mutant"] if len(judged) else judged
    declared = mutants[mutants["agrees"].notna()] if len(mutants) else pd.DataFrame({"agrees": []})
    return CatalogSummary(
        out_dir=out_dir,
        files=files,
        n_runs=len(tables.runs),
        n_mutants=int((judged["role"] == "mutant").sum()) if len(judged) else 0,
        n_loops=int(tables.runs["loop"].nunique()) if len(tables.runs) else 0,
        cached_signatures=sum(run.cached for run in runs),
        control=tables.control,
        seconds=time.perf_counter() - started,
        agreement=(int(declared["agrees"].astype(bool).sum()), len(declared)),
        misleads=int((mutants["measured"] == "misleads").sum()) if len(mutants) else 0,
        validity=summary_line(validity_table(judged)) if len(judged) else "",
        unjudged=int((mutants["measured"] == "unjudged").sum()) if len(mutants) else 0,
        notes=verdict_notes(judged),
    )
