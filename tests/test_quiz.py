"""Study mode: drawing, the practice folder, the key, grading and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from experiments.quiz.cli import quiz_main
from experiments.quiz.draw import LEVELS, LOUD, MIN_LINE_GAP, QUIET, QuizError, draw, strip_comments
from experiments.quiz.folder import PRACTICE_FILE, QuizRequest, make_quiz
from experiments.quiz.grade import Answer, grade, parse_answers_file, parse_lines
from experiments.quiz.key import ANSWER_FILE, key_markdown, rank
from mutations.registry import all_operators, operator_classes
from mutator import SourceFile

LOOP = Path(__file__).resolve().parent.parent / "reference_loops" / "mlp_digits.py"


def expected(site) -> str:
    return site.operator.expected


@pytest.fixture(scope="module")
def parsed() -> tuple[SourceFile, list]:
    source = SourceFile(strip_comments(LOOP.read_text()), LOOP.name)
    return source, source.find_sites(all_operators())


def test_strip_comments_keeps_code_and_docstrings() -> None:
    source = '"""Doc."""\n# head\nx = 1  # why\n\n\ndef f():\n    """Inner."""\n    # gone\n    return x\n'
    stripped = strip_comments(source)
    assert "#" not in stripped
    assert '"""Doc."""' in stripped and '"""Inner."""' in stripped
    compile(stripped, "s.py", "exec")
    assert "#" not in strip_comments(LOOP.read_text())


def test_same_seed_same_quiz_other_seed_other_quiz(parsed) -> None:
    source, sites = parsed
    first = draw(source, sites, 3, "medium", 7, expected)
    again = draw(source, sites, 3, "medium", 7, expected)
    assert first.mutant.identity == again.mutant.identity
    assert first.mutant.source == again.mutant.source
    others = {draw(source, sites, 3, "medium", seed, expected).mutant.identity for seed in range(6)}
    assert len(others) > 1


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("bugs", [2, 3, 4])
def test_draw_has_no_overlap_and_fits_its_level(parsed, level: str, bugs: int) -> None:
    source, sites = parsed
    for seed in range(3):
        drawn = draw(source, sites, bugs, level, seed, expected)
        picked = [bug.site for bug in drawn.bugs]
        assert len(picked) == bugs
        assert len({site.operator.name for site in picked}) == bugs
        for index, site in enumerate(picked):
            assert not any(site.overlaps(other) for other in picked[index + 1 :])
        severities = [bug.severity for bug in drawn.bugs]
        assert severities.count("crash") <= 1
        if level == "easy":
            assert all(s in LOUD for s in severities)
            assert len({site.operator.category for site in picked}) == bugs
        elif level == "medium":
            assert any(s in LOUD for s in severities) and not all(s in LOUD for s in severities)
        else:
            assert sum(s in LOUD for s in severities) <= 1
            assert any(s in QUIET for s in severities)


def test_each_bug_owns_exactly_its_injected_lines(parsed) -> None:
    source, sites = parsed
    for seed in range(4):
        drawn = draw(source, sites, 4, "hard", seed, expected)
        union = sorted(line for bug in drawn.bugs for line in bug.mutant_lines)
        assert union == list(drawn.mutant.mutant_lines)
        everyone = [(line, i) for i, bug in enumerate(drawn.bugs) for line in bug.mutant_lines]
        for line, owner in everyone:
            assert all(abs(line - other) >= MIN_LINE_GAP for other, i in everyone if i != owner)
        # The lines outside the bugs are the correct script's lines, shifted in order.
        practice = drawn.mutant.source.splitlines()
        untouched = [text for n, text in enumerate(practice, 1) if n not in union]
        assert all(text in source.source.splitlines() for text in untouched)


def test_draw_refuses_impossible_requests(parsed) -> None:
    source, sites = parsed
    with pytest.raises(QuizError, match="between 2 and 5"):
        draw(source, sites, 7, "easy", 0, expected)
    with pytest.raises(QuizError, match="level"):
        draw(source, sites, 3, "nightmare", 0, expected)
    with pytest.raises(QuizError, match="no 2-bug easy quiz"):
        draw(source, sites, 2, "easy", 0, lambda site: "silent")


def _key(*bugs: tuple[str, list[int]]) -> dict:
    return {
        "bugs": [
            {"operator": name, "label": name, "identity": f"t::{name}#0", "lines": lines, "rank": i}
            for i, (name, lines) in enumerate(bugs, 1)
        ]
    }


def test_grading_counts_found_missed_false_alarms_and_ranking() -> None:
    key = _key(("drop_zero_grad", [12]), ("scale_lr", [31]), ("drop_no_grad", [40, 41]))
    perfect = grade(key, parse_lines("12,31,40"))
    assert (len(perfect.found), len(perfect.missed), perfect.false_alarms) == (3, 0, [])
    assert perfect.ranking_matches and perfect.score == "3/3"
    # +-1 line counts; a second line on a found bug is a repeat; 20 is a false alarm.
    mixed = grade(key, parse_lines("42,13,11,20"))
    assert [bug["operator"] for bug in mixed.found] == ["drop_no_grad", "drop_zero_grad"]
    assert [bug["operator"] for bug in mixed.missed] == ["scale_lr"]
    assert mixed.false_alarms == [20] and mixed.repeats == [11]
    assert not mixed.ranking_matches
    assert grade(key, parse_lines("10,33,43")).found == []  # two lines off is not found


def test_answers_file_with_names() -> None:
    key = _key(("drop_zero_grad", [12]), ("scale_lr", [31]))
    answers = parse_answers_file("# my answer\n12: drop zero_grad\n\n31 wrong_name\n")
    assert answers == [Answer(12, "drop zero_grad"), Answer(31, "wrong_name")]
    result = grade(key, answers)
    assert (result.names_right, result.names_given) == (1, 2)
    with pytest.raises(QuizError):
        parse_answers_file("line twelve\n")
    with pytest.raises(QuizError):
        parse_lines("12,x")


def test_rank_puts_crashes_first_then_impact() -> None:
    bugs = [
        {"severity": "degrades", "impact": 0.9, "lines": [5]},
        {"severity": "crash", "impact": 1.0, "lines": [50]},
        {"severity": "breaks_training", "impact": 0.5, "lines": [20]},
        {"severity": "breaks_training", "impact": 0.8, "lines": [30]},
    ]
    assert [bug["lines"][0] for bug in rank(bugs)] == [50, 30, 20, 5]
    assert [bug["rank"] for bug in rank(bugs)] == [1, 2, 3, 4]


def test_make_quiz_writes_practice_page_and_exact_key(tmp_path: Path, parsed, capsys) -> None:
    source, sites = parsed
    request = QuizRequest(
        bugs=3,
        seed=1,
        level="hard",
        out=tmp_path / "quiz",
        results_dir=tmp_path / "results",
        epochs=2,
        seeds=(0, 1),
        workers=2,
    )
    folder = make_quiz(request)
    drawn = draw(source, sites, 3, "hard", 1, expected)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [PRACTICE_FILE, "curves.png", "index.html", ANSWER_FILE]
    )
    assert (folder / PRACTICE_FILE).read_text() == drawn.mutant.source
    key = json.loads((folder / ANSWER_FILE).read_text())
    assert sorted(n for bug in key["bugs"] for n in bug["lines"]) == list(drawn.mutant.mutant_lines)
    assert {bug["identity"] for bug in key["bugs"]} == set(drawn.mutant.parts)
    assert all(bug["fix"] and bug["check"] for bug in key["bugs"])
    # The practice script ran under the harness on both seeds, and so did each bug alone.
    assert len(key["practice"]["statuses"]) == 2
    assert all(bug["severity"] and bug["source"] == "runs" for bug in key["bugs"])
    html = (folder / "index.html").read_text()
    assert "data:image/png;base64," in html and "@@" not in html
    assert not any(name in html for name in operator_classes())
    assert (folder / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## 1." in key_markdown(key)
    assert quiz_main(["answer", str(folder)]) == 0
    assert (folder / "answer.md").read_text().startswith("# Answer key")
    # Answering with the key's own first lines, in its order, is a perfect score.
    best = ",".join(str(bug["lines"][0]) for bug in sorted(key["bugs"], key=lambda b: b["rank"]))
    capsys.readouterr()
    assert quiz_main(["grade", str(folder), "--lines", best]) == 0
    report = capsys.readouterr().out
    assert "3/3 bugs found" in report and "false alarms: none" in report
    assert "ranking of the found bugs matches" in report


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bugs", "7"], "between 2 and 5"),
        (["--loop", "no_such_loop"], "unknown loop"),
        (["--level", "nightmare"], "invalid choice"),
        (["--seeds", "2"], "at least 3"),
        (["--epochs", "0"], "--epochs must be at least 1"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(
    tmp_path: Path, capsys, argv: list[str], message: str
) -> None:
    out, results = tmp_path / "quiz", tmp_path / "results"
    code = quiz_main([*argv, "--out", str(out), "--results-dir", str(results)])
    error = capsys.readouterr().err
    assert code == 2 and message in error and error.count("\n") == 1
    assert not out.exists() and not results.exists()


def test_interactions_bad_input(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    for argv, message in (
        (["--loop", "no_such_loop"], "unknown loop"),
        (["--quizzes", "-1"], "--quizzes"),
        (["--seeds", "2"], "at least 3"),
    ):
        code = quiz_main(["interactions", *argv, "--results-dir", str(results)])
        error = capsys.readouterr().err
        assert code == 2 and message in error and error.count("\n") == 1
    assert not results.exists()


def test_non_empty_out_dir_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "quiz"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code = quiz_main(["--out", str(out), "--results-dir", str(tmp_path / "results")])
    assert code == 2 and "not an empty folder" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert not (tmp_path / "results").exists()


def test_answer_and_grade_without_a_quiz(tmp_path: Path, capsys) -> None:
    assert quiz_main(["answer", str(tmp_path)]) == 2
    assert quiz_main(["grade", str(tmp_path), "--lines", "3"]) == 2
    assert capsys.readouterr().err.count("no quiz here") == 2


def test_catalog_numbers_are_used_when_the_catalog_has_the_site(tmp_path: Path) -> None:
    from experiments.quiz.key import catalog_entry

    catalog = tmp_path / "catalog"
    catalog.mkdir()
    site = "mlp_digits.py::train_one_epoch::drop_zero_grad#0"
    pd.DataFrame(
        {
            "loop": ["mlp_digits", "mlp_digits"],
            "identity": [site, "mlp_digits.py::main::scale_lr#0"],
            "measured": ["degrades", "crash"],
            "label_fractions": ['{"slow_convergence": 1.0}', '{"crash:RuntimeError": 1.0}'],
            "mutant_val_metric_final": [0.55, None],
            "ref_val_metric_final": [0.95, 0.95],
            "n_seeds": [3, 3],
        }
    ).to_csv(catalog / "symptoms.csv", index=False)
    entry = catalog_entry(tmp_path, "mlp_digits", site, 10)
    assert entry["severity"] == "degrades" and entry["source"] == "catalog"
    assert entry["impact"] == pytest.approx(0.4 / 0.85)
    assert entry["labels"] == {"slow_convergence": 1.0}
    assert (
        catalog_entry(tmp_path, "mlp_digits", "mlp_digits.py::main::scale_lr#0", 10)["impact"] == 1
    )
    assert catalog_entry(tmp_path, "binary_cancer", site, 10) is None
    assert catalog_entry(tmp_path / "nowhere", "mlp_digits", site, 10) is None
