"""Minimal strength: bisection on synthetic effects, the axes, the CLI's user errors."""

import math
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.strength.axes import AXES, Axis, axes_of, parametric
from experiments.strength.bisect import first_showing, weakest
from experiments.strength.search import Point, search
from mutations.registry import operator_classes, resolve


@pytest.mark.parametrize("threshold", [1.7, 4.0, 31.0, 99.0])
def test_bisection_brackets_a_monotone_threshold(threshold):
    calls = []

    def shows(value):
        calls.append(value)
        return value >= threshold

    found = weakest(shows, 1.25, 100.0, steps=5)
    low, high = found.bracket
    assert low < threshold <= high == found.threshold
    assert high / low == pytest.approx((100 / 1.25) ** (1 / 32))
    assert len(calls) == 6 and calls[0] == 100.0


def test_bisection_downwards_and_when_nothing_shows():
    found = weakest(lambda lr: lr <= 0.05, 0.8, 0.01, steps=6)
    assert found.threshold <= 0.05 < found.bracket[0]
    nothing = weakest(lambda value: False, 1.25, 100.0, steps=5)
    assert nothing.threshold is None and nothing.tried == [(100.0, False)]


def test_bisection_on_a_smooth_effect_with_snapped_settings():
    """An effect growing like log(x) crossing a detection level, as the search sees it."""
    effect = lambda p: 0.2 * math.log(p / 0.01)  # noqa: E731
    found = weakest(lambda p: effect(p) > 0.5, 0.01, 0.8, steps=4, snap=lambda v: round(v, 3))
    assert effect(found.threshold) > 0.5 >= effect(found.bracket[0])
    assert all(value == round(value, 3) for value, _ in found.tried)


def test_categorical_axes_walk_weakest_first():
    found = first_showing(lambda dtype: dtype == "bfloat16", ("float16", "bfloat16"))
    assert found.threshold == "bfloat16" and found.bracket == ("float16", "bfloat16")


def test_two_searches_share_the_settings_they_both_try():
    axis = Axis("scale_lr", "factor", "up", 1.25, 100.0)
    evaluated, questions = [], set()

    def evaluate(axis, value, question):
        evaluated.append(value)
        questions.add(question)
        return Point(
            value,
            axis.spec(value),
            3,
            "decided",
            "silent",
            "",
            "",
            0.9,
            shows_outcome=value >= 20,
            shows_symptom=value >= 3,
        )

    result = search(axis, evaluate, steps=3)
    assert result.outcome.threshold >= 20 > result.outcome.bracket[0]
    assert result.symptom.threshold >= 3 > result.symptom.bracket[0]
    assert evaluated.count(100.0) == 2  # the evaluator (not this stub) remembers settings
    assert questions == {"outcome", "symptom"}


def test_a_setting_one_search_asks_about_stops_when_its_question_is_decided():
    from experiments.strength.search import QUESTIONS, answered
    from experiments.symptoms.sequential import decide

    # Every seed degrades; overfits fires on 2 of 3: the outcome is decided, a label not.
    decision = decide(
        ["degrades"] * 3,
        [["worse_model", "overfits"], ["worse_model"]] * 1 + [["worse_model", "overfits"]],
    )
    assert not decision.decided and decision.undecided == ("overfits 2/3",)
    assert answered(decision, QUESTIONS["outcome"]).decided
    assert not answered(decision, QUESTIONS["symptom"]).decided
    assert not answered(decision, QUESTIONS["both"]).decided
    # The severity open, every label decided: only the symptom question is answered.
    severity_open = decide(["degrades", "silent", "degrades"], [["slow_convergence"]] * 3)
    assert any(name.startswith(">=") for name in severity_open.undecided)
    assert answered(severity_open, QUESTIONS["symptom"]).decided
    assert not answered(severity_open, QUESTIONS["outcome"]).decided
    # Fewer seeds than the rule's minimum answer nothing.
    assert not answered(decide(["silent"], [[]]), QUESTIONS["outcome"]).decided


def test_every_axis_is_a_declared_parameter_and_runs_as_a_spec():
    classes = operator_classes()
    for axis in AXES:
        assert axis.param in classes[axis.operator].parameters
        for value in (axis.weak, axis.strong, *axis.values):
            given = resolve(axis.spec(value)).params[axis.param]
            assert given == (value if isinstance(value, str) else pytest.approx(value, rel=1e-2))
    assert {a.direction for a in axes_of("scale_lr")} == {"up", "down"}
    assert "drop_zero_grad" not in parametric()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--loop", "mlp_digits", "--operator", "nope"], "unknown operator 'nope'"),
        (["--loop", "mlp_digits", "--operator", "drop_zero_grad"], "has no parameters"),
        (
            ["--loop", "mlp_digits", "--operator", "label_noise", "--direction", "down"],
            "has no direction 'down'",
        ),
        (["--loop", "nope", "--operator", "label_noise"], "valid: "),
    ],
)
def test_strength_cli_user_errors_are_one_line_and_exit_2(argv, message, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "strength", *argv, f"results_dir={tmp_path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert lines[0].startswith("trainwreck strength: error:")
    assert not any(tmp_path.iterdir())  # nothing written


def test_detector_weakest_is_where_the_detected_tail_starts():
    import pandas as pd

    from experiments.bench.strength import _summary

    table = pd.DataFrame(
        {
            "loop": ["l"] * 4,
            "operator": ["scale_lr"] * 4,
            "direction": ["up"] * 4,
            "factor": [2.0, 5.0, 20.0, 100.0],
        }
    )
    assert _summary("d", table, [False, False, True, True])["weakest detected"] == "factor=20.0"
    gap = _summary("d", table, [True, False, True, True])
    assert gap["weakest detected"] == "factor=20.0" and gap["monotone"] is False
    assert _summary("d", table, [False] * 4)["weakest detected"] == "not detected"
    assert _summary("d", table, [None, None, True, True])["tried"] == 2


@pytest.mark.parametrize("factor", [1.99, 5.03, 0.62, 8.0, 0.125])
def test_batch_size_settings_between_the_declared_ones_stay_integers(factor):
    """A bisection tries x1.99: ``batch_size * 1.99`` made every such setting a crash
    (DataLoader wants an int) that the search read as the bug showing."""
    from mutator import SourceFile

    source = (
        "from torch.utils.data import DataLoader\n"
        "def make(train_ds, batch_size):\n"
        "    return DataLoader(train_ds, batch_size=batch_size, shuffle=True)\n"
    )
    parsed = SourceFile(source, "loop.py")
    operator = resolve(f"change_batch_size(factor={factor})")
    (site,) = parsed.find_sites([operator])
    changed = parsed.apply([site]).source
    seen = {}

    class Loader:
        def __init__(self, dataset, batch_size, shuffle):
            seen["batch_size"] = batch_size

    namespace = {}
    exec(
        compile(changed.replace("from torch.utils.data import DataLoader\n", ""), "m", "exec"),
        namespace,
    )
    namespace["DataLoader"] = Loader
    namespace["make"](None, 64)
    assert isinstance(seen["batch_size"], int)
    assert seen["batch_size"] == max(1, int(64 * factor))


def _fake_searches(monkeypatch, log: Path, fail_on: str | None = None) -> None:
    """``prepare``/``search_and_store`` that only note which (loop, axis) ran, from
    whichever process ran it (no training)."""
    from experiments.strength import catalog_pass

    def prepare(loop, axis, overrides, workers, max_seeds, harness):
        if f"{loop}/{axis.operator}/{axis.direction}" == fail_on:
            raise RuntimeError("search broke")
        with log.open("a") as out:
            out.write(f"{loop}/{axis.operator}/{axis.direction} workers={workers}\n")
        return loop

    monkeypatch.setattr(catalog_pass, "prepare", prepare)
    monkeypatch.setattr(catalog_pass, "search_and_store", lambda session, loop, steps: (0, 0, 0))
    monkeypatch.setattr(catalog_pass, "summary_line", lambda result: "fake")


def test_the_parallel_strength_pass_runs_every_search_once_one_run_at_a_time(monkeypatch, tmp_path):
    from experiments.strength.catalog_pass import parallel_strength_pass, strength_pass

    serial, parallel = tmp_path / "serial.txt", tmp_path / "parallel.txt"
    loops = ("mlp_digits", "binary_cancer")
    _fake_searches(monkeypatch, serial)
    strength_pass(loops, lambda loop: [], 2, 20, lambda note: None)
    _fake_searches(monkeypatch, parallel)
    assert parallel_strength_pass(loops, lambda loop: [], 2, 20, lambda note: None) == 0
    ran = parallel.read_text().splitlines()
    assert sorted(line.split()[0] for line in ran) == sorted(
        line.split()[0] for line in serial.read_text().splitlines()
    )
    assert len(ran) == 2 * len(AXES)
    assert {line.split()[1] for line in ran} == {"workers=1"}  # 2 processes x 1 run


def test_a_failing_strength_process_is_counted_not_hidden(monkeypatch, tmp_path, capfd):
    from experiments.strength.catalog_pass import parallel_strength_pass

    _fake_searches(monkeypatch, tmp_path / "log.txt", fail_on="mlp_digits/scale_lr/up")
    assert parallel_strength_pass(("mlp_digits",), lambda loop: [], 2, 20, lambda n: None) == 1
    assert "search broke" in capfd.readouterr().err


def test_ctrl_c_in_a_strength_process_ends_it_without_a_traceback(monkeypatch, tmp_path, capfd):
    from experiments.strength import catalog_pass

    def interrupted(*args):
        raise KeyboardInterrupt

    _fake_searches(monkeypatch, tmp_path / "log.txt")
    monkeypatch.setattr(catalog_pass, "prepare", interrupted)
    failed = catalog_pass.parallel_strength_pass(("mlp_digits",), lambda loop: [], 2, 20, print)
    assert failed == 2
    assert "Traceback" not in capfd.readouterr().err
