"""The leaderboard with known inputs: detection at a fixed false-positive rate, the
clean-code column, the curves in Markdown, CSV and the HTML section."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.bench.api import DynamicDetector, Finding, RunInput, ScriptInput, StaticDetector
from experiments.bench.corpus import Case, Truth
from experiments.bench.leaderboard import (
    curve_rows,
    html_section,
    leaderboard_markdown,
    leaderboard_rows,
    write_leaderboard,
)
from experiments.bench.score import run_detector
from experiments.bench.styles import style_cases


def run_case(loop: str, identity: str, seed: int, value: float, status: str = "ok") -> Case:
    truth = Truth(
        identity, ("op",) if identity != "none" else (), ("gradient",) * (identity != "none")
    )
    result = {"loop": loop, "identity": identity, "seed": seed, "status": status, "value": value}
    case = Case(f"{loop}/{identity}/{seed}", loop, truth, None, None, result, seed)
    case.load_run = lambda: RunInput([], result)  # type: ignore[method-assign]
    return case


# 40 clean runs scored 0.00..0.39 and 20 mutants: 10 scored 0.5 (above every clean run),
# 10 scored 0.37 (among the top clean runs).
CASES = [run_case("a", "none", seed, seed / 100) for seed in range(40)] + [
    run_case("a", f"m{index}", 0, 0.5 if index < 10 else 0.37) for index in range(20)
]


class FlagsEverything(DynamicDetector):
    name = "flags-everything"

    def check_run(self, run):
        return [Finding("gradient")]


class Scored(DynamicDetector):
    """Flags above 0.355 (4 of 40 clean runs: 10%), scores every run by its value."""

    name = "scored"
    scored = True

    def check_run(self, run):
        return [Finding("gradient")] if run.result["value"] > 0.355 else []

    def suspicion(self, run):
        return run.result["value"]


def test_a_detector_that_flags_everything_gets_zero_at_five_percent():
    [row] = leaderboard_rows([run_detector(FlagsEverything(), CASES)])
    assert row["detection_rate"] == 1.0 and row["fp_rate"] == 1.0
    assert row["detection_at_5fpr"] == 0.0
    assert row["clean_code_fp"] is None  # runs are not code
    assert "not established: 40 of 40" in row["note"]


def test_a_scored_detector_is_cut_below_its_own_operating_point():
    report = run_detector(Scored(), CASES)
    [row] = leaderboard_rows([report])
    assert row["detection_rate"] == 1.0  # its own threshold flags all 20 ...
    assert row["fp_rate"] == pytest.approx(0.1)  # ... at 10% false positives
    assert row["detection_at_5fpr"] == pytest.approx(0.5)  # >= 0.38: 2 clean runs (5%), 10 mutants
    assert row["fp_ci95"].startswith("0.028-")
    by_budget = {r["max_fpr"]: r for r in curve_rows(report)}
    assert by_budget[0.05]["detection"] == pytest.approx(0.5)
    assert by_budget[1.0]["detection"] == 1.0
    markdown = leaderboard_markdown([report])
    assert "## scored: detection within a false-positive budget" in markdown


def test_unreached_mutants_are_not_scored():
    cases = [*CASES, run_case("a", "m-unreached", 0, 0.0, status="unreached")]
    [row] = leaderboard_rows([run_detector(Scored(), cases)])
    assert row["mutants"] == 20


class Keyword(StaticDetector):
    name = "keyword"

    def check_source(self, script: ScriptInput):
        return [Finding("data", None, 1, None, "", "KW1")] if "FLAGME" in script.source else []


def test_static_detectors_get_a_clean_code_column_from_the_style_scripts(tmp_path: Path):
    styles = tmp_path / "styles"
    styles.mkdir()
    (styles / "good.py").write_text("x = 1\n")
    (styles / "bad.py").write_text("FLAGME = 1\n")
    (styles / "__init__.py").write_text("")
    style = style_cases(styles)
    assert [case.loop for case in style] == ["styles/bad", "styles/good"]
    loop = Case("l/none", "l", Truth(), ScriptInput("x = 2\n", "l.py", "l"))
    mutant = Case(
        "l/m", "l", Truth("m", ("op",), ("data",), (1,), (1,)), ScriptInput("FLAGME\n", "l.py", "l")
    )
    report = run_detector(Keyword(), [loop, mutant, *style])
    [row] = leaderboard_rows([report])
    assert row["clean_code_fp"] == pytest.approx(1 / 3)  # bad.py of loop + 2 style scripts
    assert row["clean"] == 1 and row["fp_rate"] == 0.0  # style scripts are not loop cases
    assert row["note"] == ""  # no FPR claim about a handful of scripts
    markdown = leaderboard_markdown([report])
    assert f"- {styles / 'bad.py'}: KW1" in markdown


def test_html_section_has_the_curve_and_no_scripts(tmp_path: Path):
    reports = [run_detector(Scored(), CASES), run_detector(FlagsEverything(), CASES)]
    section = html_section(reports)
    assert section.startswith('<section id="detector-benchmark">')
    assert "<svg" in section and "<polyline" in section and "<script" not in section
    assert "detection_at_5fpr" in section
    written = write_leaderboard(reports, tmp_path / "bench")
    curves = (tmp_path / "bench" / "curves.csv").read_text().splitlines()
    assert curves[0].startswith("detector,max_fpr,threshold,fpr,detection")
    assert len(curves) == 1 + 2 * 8
    assert tmp_path / "bench" / "curves.csv" in written


def test_bench_command_runs_the_linter_on_the_style_scripts(tmp_path: Path, capsys):
    import csv

    from experiments.bench.cli import STYLES_DIR, bench_main

    argv = [
        "--detector",
        "trainwreck-lint",
        "--loops",
        "mlp_digits",
        "--operator",
        "drop_zero_grad",
    ]
    assert bench_main([*argv, "--clean-code", str(tmp_path / "nowhere")]) == 2
    assert "--clean-code" in capsys.readouterr().err
    assert bench_main([*argv, "--results-dir", str(tmp_path)]) == 0
    [row] = csv.DictReader((tmp_path / "bench" / "leaderboard.csv").read_text().splitlines())
    styles = [p for p in STYLES_DIR.glob("*.py") if not p.name.startswith("_")]
    assert len(styles) >= 3
    outcomes = list(csv.DictReader((tmp_path / "bench" / "outcomes.csv").read_text().splitlines()))
    assert sum(o["loop"].startswith("styles/") for o in outcomes) == len(styles)
    assert float(row["clean_code_fp"]) == 0.0  # the linter stays silent on clean code


class NeverFits(DynamicDetector):
    name = "never-fits"
    learned = True

    def fit(self, runs):
        raise ValueError("needs more loops")

    def check_run(self, run):  # pragma: no cover - never called
        raise AssertionError


def test_a_detector_that_failed_on_clean_runs_claims_no_false_positive_rate():
    cases = [*CASES, run_case("b", "none", 0, 0.0), run_case("b", "m", 0, 0.5)]
    [row] = leaderboard_rows([run_detector(NeverFits(), cases)])
    assert row["fp_rate"] == 0.0  # unflagged ...
    assert "FPR not measured: the detector failed on 41 of 41 clean runs" in row["note"]
    assert "fit failed: needs more loops" in row["note"]


def test_svg_curve_corners_are_the_best_detection_at_each_rate():
    from experiments.bench.leaderboard import _envelope
    from experiments.bench.operating import curve

    points = curve([0.0, 0.2, 0.4, 0.6], [0.1, 0.3, 0.5, 0.9])
    # at rate 0 the best is 1 of 4 mutants (>= 0.9), at 0.25 2 of 4 (>= 0.5); cut there
    assert _envelope(points, 0.25) == [(0.0, 0.25), (0.25, 0.5)]
    # held flat to the axis's end
    assert _envelope(points, 0.3) == [(0.0, 0.25), (0.25, 0.5), (0.3, 0.5)]
    assert _envelope([], 0.25) == []
