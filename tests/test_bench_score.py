"""The scorer on hand-made cases with known answers, and detectors that misbehave."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_bench_support import decreasing, synthetic_records, write_run

from experiments.bench.api import (
    Detector,
    DynamicDetector,
    Finding,
    ScriptInput,
    StaticDetector,
    detector_classes,
    get_detector,
)
from experiments.bench.corpus import Case, Truth, run_cases
from experiments.bench.leaderboard import html_section, leaderboard_rows, write_leaderboard
from experiments.bench.score import per_group, run_detector, summarize


def case(
    loop: str, identity: str, operator: str = "", category: str = "", lines=(), source="x = 1\n"
):
    truth = Truth(
        identity, (operator,) if operator else (), (category,) if category else (), lines, lines
    )
    return Case(f"{loop}/{identity}", loop, truth, ScriptInput(source, f"{loop}.py", loop))


CASES = [
    case("a", "none"),
    case("b", "none", source="BAD\n"),
    case("a", "m1", "drop_zero_grad", "gradient", (3,), "ZERO 3\n"),
    case("a", "m2", "drop_zero_grad", "gradient", (5,), "ZERO 4\n"),
    case("b", "m3", "mse_for_classification", "loss", (7,), "MSE 7\n"),
    case("b", "m4", "drop_eval_mode", "mode", (9,), "nothing\n"),
]


class KeywordDetector(StaticDetector):
    """Reports ZERO as gradient, MSE as loss (wrongly as mode), BAD as a false positive."""

    name = "keyword"

    def check_source(self, script: ScriptInput) -> list[Finding]:
        word, _, line = script.source.strip().partition(" ")
        if word == "ZERO":
            return [Finding("gradient", "drop_zero_grad", int(line))]
        if word == "MSE":
            return [Finding("mode", None, int(line))]
        if word == "BAD":
            return [Finding("data", None, 1)]
        return []


def test_scores_on_known_answers():
    report = run_detector(KeywordDetector(), CASES)
    summary = summarize(report.outcomes)
    assert summary["mutants"] == 4 and summary["detected"] == 3
    assert summary["detection_rate"] == pytest.approx(0.75)
    assert summary["clean"] == 2 and summary["false_positives"] == 1
    assert summary["fp_rate"] == pytest.approx(0.5)
    # m1 at line 3 (hit), m2 reported at 4 for line 5 (miss), m3 at 7 (hit)
    assert summary["localization"] == pytest.approx(2 / 3)
    assert summary["category_accuracy"] == pytest.approx(2 / 3)  # MSE called "mode"
    assert summary["errors"] == 0
    assert summarize(report.outcomes, tolerance=1)["localization"] == pytest.approx(1.0)
    by_operator = {row["operator"]: row for row in per_group(report.outcomes, "operator")}
    assert by_operator["drop_zero_grad"]["detection_rate"] == 1.0
    assert by_operator["drop_eval_mode"]["detected"] == 0
    by_category = {row["category"]: row for row in per_group(report.outcomes, "category")}
    assert by_category["loss"]["category_accuracy"] == 0.0


class Crashing(StaticDetector):
    name = "crashing"

    def check_source(self, script):
        if "ZERO" in script.source:
            raise ValueError("boom")
        return []


class Hanging(StaticDetector):
    name = "hanging"

    def check_source(self, script):
        if "MSE" in script.source:
            time.sleep(30)
        return [Finding("gradient")] if "ZERO" in script.source else []


class Garbage(StaticDetector):
    name = "garbage"

    def check_source(self, script):
        if "ZERO 3" in script.source:
            return "ZERO!!"  # not a list of findings
        if "ZERO 4" in script.source:
            return [Finding("no-such-category")]
        return []


def test_crash_hang_and_garbage_score_as_no_finding_and_the_run_goes_on():
    crashed = run_detector(Crashing(), CASES)
    assert [o.error_kind for o in crashed.outcomes].count("crash") == 2
    assert summarize(crashed.outcomes)["detected"] == 0
    assert len(crashed.outcomes) == len(CASES)

    started = time.perf_counter()
    hung = run_detector(Hanging(), CASES, timeout_s=0.5)
    # Cut off at its 0.5 s timeout, not left hanging (a generous margin for a busy machine).
    assert time.perf_counter() - started < 60
    timeouts = [o for o in hung.outcomes if o.error_kind == "timeout"]
    assert [o.case.truth.identity for o in timeouts] == ["m3"]
    assert summarize(hung.outcomes)["detected"] == 2  # the other cases were still scored

    garbage = run_detector(Garbage(), CASES)
    errors = {o.case.truth.identity: o for o in garbage.outcomes if o.error}
    assert set(errors) == {"m1", "m2"} and all(o.error_kind == "garbage" for o in errors.values())
    assert not any(o.findings for o in errors.values())


class Unavailable(StaticDetector):
    name = "absent-tool"

    def unavailable(self):
        return "the tool is not installed"

    def check_source(self, script):  # pragma: no cover - never called
        raise AssertionError


def test_unavailable_detectors_get_a_row_with_the_reason_and_no_numbers(tmp_path: Path):
    reports = [run_detector(Unavailable(), CASES), run_detector(KeywordDetector(), CASES)]
    rows = leaderboard_rows(reports)
    assert rows[0]["note"] == "unavailable: the tool is not installed"
    assert rows[0]["detection_rate"] is None
    written = write_leaderboard(reports, tmp_path / "bench")
    names = sorted(p.name for p in written)
    assert names == [
        "curves.csv",
        "leaderboard.csv",
        "leaderboard.md",
        "outcomes.csv",
        "per_operator.csv",
        "section.html",
    ]
    markdown = (tmp_path / "bench" / "leaderboard.md").read_text()
    assert "| keyword | static | 4 | 0.750 |" in markdown
    section = html_section(reports)
    assert section.startswith('<section id="detector-benchmark">') and "<script" not in section
    assert "unavailable: the tool is not installed" in section


class LoopMemorizer(DynamicDetector):
    """Learns which categories appear in the training loops; predicts the most common one."""

    name = "memorizer"
    learned = True

    def fit(self, runs):
        labels = [c for run in runs for c in run.result.get("categories", [])]
        if not labels:
            raise ValueError("nothing to learn")
        self.label = max(set(labels), key=labels.count)
        self.seen_loops = {run.result["loop"] for run in runs}

    def check_run(self, run):
        assert run.result["loop"] not in self.seen_loops, "trained on the held-out loop"
        return [Finding(self.label)]


def test_learned_detectors_are_scored_leaving_one_loop_out(tmp_path: Path):
    write_run(
        tmp_path,
        "k1",
        synthetic_records(decreasing()),
        loop="a",
        identity="m",
        categories=["gradient"],
    )
    write_run(
        tmp_path, "k2", synthetic_records(decreasing()), loop="b", identity="m", categories=["loss"]
    )
    write_run(
        tmp_path, "k3", synthetic_records(decreasing()), loop="c"
    )  # clean only: fit fails for a, b
    cases = run_cases(tmp_path)
    report = run_detector(LoopMemorizer(), cases)
    by_loop = {o.case.loop: o for o in report.outcomes}
    assert by_loop["a"].findings == [Finding("loss")]  # learned from loop b only
    assert by_loop["b"].findings == [Finding("gradient")]
    assert by_loop["c"].error is None


def test_run_cases_read_the_results_folder(tmp_path: Path):
    write_run(
        tmp_path,
        "k1",
        synthetic_records([1.0]),
        loop="a",
        identity="a.py::f::op#0",
        operators=["op"],
        categories=["loss"],
        mutant_lines=[4],
        seed=2,
    )
    (tmp_path / "runs" / "zz" / "torn").mkdir(parents=True)
    (tmp_path / "runs" / "zz" / "torn" / "result.json").write_text("{not json")
    [only] = run_cases(tmp_path)
    assert only.truth.operators == ("op",) and only.truth.mutant_lines == (4,)
    assert only.seed == 2 and next(r["kind"] for r in only.load_run().records) == "start"
    assert run_cases(tmp_path, ["other"]) == []


def test_registry_has_the_shipped_detectors_and_suggests_names():
    names = set(detector_classes())
    assert {
        "trainwreck-lint",
        "trainwreck-rules",
        "trainwreck-diagnoser",
        "torchfix",
        "torcheck",
        "traincheck",
    } <= names
    assert all(issubclass(cls, Detector) for cls in detector_classes().values())
    with pytest.raises(KeyError, match="did you mean trainwreck-lint"):
        get_detector("trainwreck-lnt")
