"""The rendered catalog: escaping, self-containment, study order, and report.html in Chromium."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from fixtures_runs import REFERENCE_SEEDS, RunSpec, write_run, write_study

from experiments.catalog import build_tables, load_runs, write_catalog
from experiments.report import render_report_html, render_study_md, render_symptoms_md
from experiments.report.operators import parse_doc
from experiments.report.svg import Series, band_svg
from experiments.symptoms import SEVERITY_ORDER

CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = "t.py::f::evil<script>alert(1)</script>#0"
HOSTILE_DIFF = "--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-x = 1 & 2\n+x = '<b>|</b>'\n"
MUTANTS = (
    ("flat", "t.py::train::drop_optimizer_step#0", ("drop_optimizer_step",)),
    ("diverge", "t.py::main::scale_lr(factor=100.0)#0", ("scale_lr",)),
    ("crash_start", "t.py::Net.forward::swap_view#0", ("swap_view",)),
    ("nan", "t.py::train::drop_grad_clip#0", ("drop_grad_clip",)),
    ("slow_steps", "t.py::train::slow_step#0", ("slow_step",)),
)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_study(root, mutants=MUTANTS, steps=150)
    for seed in REFERENCE_SEEDS:
        spec = RunSpec("crash_start", seed, identity=HOSTILE, operators=("evil<op>",), steps=150)
        spec.diff = HOSTILE_DIFF
        spec.extra_result = {"exc_message": "<img src=x onerror=alert(2)>"}
        write_run(root, spec)
    tables = build_tables(load_runs(root))
    out = root / "catalog"
    write_catalog(tables, out)
    return tables, out


def test_all_text_is_escaped(catalog):
    tables, _ = catalog
    html = render_report_html(tables)
    assert "<script>alert(1)</script>" not in html
    assert "evil&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;|&lt;/b&gt;" in html and "x = 1 &amp; 2" in html
    assert "<b>|</b>" not in html and "<img" not in html
    assert "&lt;img src=x onerror=alert(2)&gt;" in html  # the exception message is shown
    assert html.count("<script>") == 1  # ours, inline


def test_report_is_self_contained(catalog):
    html = render_report_html(catalog[0])
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert not re.search(r"<script[^>]+src", html)


def test_report_has_a_table_row_and_a_figure_per_mutant(catalog):
    tables, _ = catalog
    html = render_report_html(tables)
    body = html.split('<table id="symptom-table"', 1)[1].split("</table>", 1)[0]
    assert body.count("<tr data-severity=") == len(tables.symptoms)
    assert html.count('<article class="mutant"') == len(tables.symptoms)
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="curve"') == len(
        tables.symptoms
    )
    assert html.count("<polygon") >= len(tables.symptoms) - 1  # reference band (crash: band only)


def test_symptoms_markdown_escapes_pipes_and_lists_every_mutant(catalog):
    tables, _ = catalog
    text = render_symptoms_md(tables)
    symptoms_part, _, validity_part = text.partition("## Mutant validity")

    def table_rows(part: str) -> list[str]:
        return [line for line in part.splitlines() if line.startswith("| ") and "---" not in line]

    assert len(table_rows(symptoms_part)) == len(tables.symptoms) + 1  # + header
    widths = {row.replace("\\|", "").count("|") for row in table_rows(symptoms_part)}
    assert len(widths) == 1  # no cell broke the table
    # The validity section: one row per operator of the mutants, after its header.
    operators = tables.symptoms.loc[tables.symptoms["role"] == "mutant", "operator"].nunique()
    assert len(table_rows(validity_part)) == operators + 1
    assert "false-positive rate 0.0%" in text


def test_study_is_ordered_by_measured_severity_with_diff_check_and_fix(catalog):
    text = render_study_md(catalog[0])
    headings = re.findall(r"^## \d+\. `([^`]+)` \([^)]*\): measured (\w+)", text, flags=re.M)
    assert [name for name, _ in headings][:1] and "noop" not in [name for name, _ in headings]
    ranks = [SEVERITY_ORDER.index(severity) for _, severity in headings]
    assert ranks == sorted(ranks)
    assert text.count("```diff") == len(headings)
    assert text.count("**Fix.**") == len(headings) and text.count(
        "**Check that exposes it.**"
    ) == len(headings)
    flat = text.split("`drop_optimizer_step`", 1)[1].split("\n## ", 1)[0]
    assert "final/initial loss 1.00 [" in flat


def test_parse_doc_sections():
    title, sections = parse_doc(
        "Delete x.\n\n    Bug: a thing. Impact: loss flat.\n    Fix: add x. Check: look at y."
    )
    assert title == "Delete x."
    assert sections == {
        "Bug": "a thing.",
        "Impact": "loss flat.",
        "Fix": "add x.",
        "Check": "look at y.",
    }


def test_band_svg_marks_non_finite_losses_and_handles_empty_input():
    steps = np.arange(50, dtype=float)
    reference = [Series(steps, 2.0 - 0.02 * steps)]
    broken = Series(steps[:11], np.array([2.0] * 10 + [np.nan]), "seed 0")
    svg = band_svg(reference, [broken], title="a <title>")
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "non-finite loss at step 10" in svg and "a &lt;title&gt;" in svg
    assert "no loss recorded" in band_svg([], [], title="x")


@pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Chromium not installed (apt-get install chromium)"
)
def test_report_loads_in_headless_chromium_without_console_errors(catalog, tmp_path):
    tables, out = catalog
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
        (out / "report.html").as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    errors = [
        line
        for line in done.stderr.splitlines()
        if "Uncaught" in line or ("CONSOLE" in line and "error" in line.lower())
    ]
    assert not errors, errors
    dom = done.stdout
    n = len(tables.symptoms)
    assert f"{n} of {n} shown" in dom  # the script ran to the end
    assert dom.count("<tr data-severity=") == n
    assert dom.count('class="curve"') == n
