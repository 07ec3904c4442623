"""Writing the catalog: every file into a temporary folder, renamed into place, so a
reader sees the old catalog or the new one, never a mix; files other commands wrote
(interactions, the sweep record) are carried over, and sections they measured (strength,
the detector leaderboard) are added to the report."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from experiments.report.interactions import INTERACTION_FILES, interactions_markdown
from experiments.report.strength import (
    STRENGTH_DIR,
    load_strength,
    strength_html,
    strength_markdown,
)
from experiments.report.tables import CatalogTables

CATALOG_FILES = (
    "runs.parquet",
    "runs.csv",
    "curves.parquet",
    "symptoms.csv",
    "symptoms.md",
    "study.md",
    "report.html",
)
# Outlive a rebuild: the measured interactions and the list of runs the catalog was built
# from (``report_cmd.SWEEP_FILE``; without it a later ``trainwreck report`` judges every
# stored run, without the loops' class counts).
CARRIED_FILES = (*INTERACTION_FILES, "sweep.json")


def write_catalog(tables: CatalogTables, out_dir: str | Path) -> dict[str, Path]:
    """Write every catalog file into ``out_dir``, atomically as a folder; returns the paths."""
    from experiments.report import render_report_html, render_study_md, render_symptoms_md

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Measured bug interactions (``trainwreck quiz interactions``) outlive a catalog rebuild.
    carried = {
        name: (out_dir / name).read_bytes() for name in CARRIED_FILES if (out_dir / name).is_file()
    }
    interactions = (
        pd.read_csv(io.BytesIO(carried[INTERACTION_FILES[0]]))
        if INTERACTION_FILES[0] in carried
        else None
    )
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        tables.runs.to_parquet(staging / "runs.parquet", index=False)
        tables.runs.to_csv(staging / "runs.csv", index=False)
        tables.curves.to_parquet(staging / "curves.parquet", index=False)
        tables.symptoms.to_csv(staging / "symptoms.csv", index=False)
        (staging / "symptoms.md").write_text(render_symptoms_md(tables), encoding="utf-8")
        study, page = render_study_md(tables), render_report_html(tables)
        if interactions is not None:
            study += "\n\n" + interactions_markdown(interactions)
            section = (
                '<section id="interactions"><h2>Interactions between bugs</h2>'
                + interactions.to_html(index=False, escape=True, border=0, na_rep="")
                + "</section>"
            )
            page = page.replace("<script>", section + "<script>", 1)
        strength = load_strength(out_dir.parent / STRENGTH_DIR, set(tables.runs.get("loop", [])))
        if not strength.empty:  # written by ``trainwreck strength`` into the same results
            symptoms_md = (staging / "symptoms.md").read_text(encoding="utf-8")
            section = strength_markdown(strength)
            (staging / "symptoms.md").write_text(symptoms_md + "\n" + section, encoding="utf-8")
            study += "\n\n" + section
            page = page.replace("<script>", strength_html(strength) + "<script>", 1)
        leaderboard = out_dir.parent / "bench" / "section.html"
        if leaderboard.is_file():  # written by ``trainwreck bench`` into the same results
            page = page.replace("<script>", leaderboard.read_text(encoding="utf-8") + "<script>", 1)
        (staging / "study.md").write_text(study, encoding="utf-8")
        (staging / "report.html").write_text(page, encoding="utf-8")
        for name, data in carried.items():
            (staging / name).write_bytes(data)
        staging.chmod(0o755)
        _swap_into_place(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {name: out_dir / name for name in CATALOG_FILES}


def _swap_into_place(staging: Path, out_dir: Path) -> None:
    """Replace ``out_dir`` by ``staging``; the old catalog is removed only after the rename."""
    if not out_dir.exists():
        os.replace(staging, out_dir)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.replace(out_dir, retired / out_dir.name)
    try:
        os.replace(staging, out_dir)
    except OSError:
        os.replace(retired / out_dir.name, out_dir)
        raise
    finally:
        shutil.rmtree(retired, ignore_errors=True)
