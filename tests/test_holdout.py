"""The harness's held-out evaluation: run after the script, on the model it trained."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.harness import RunSpec, run_sweep
from experiments.harness.holdout import resolve
from experiments.trace import read_trace

SCRIPTS = Path(__file__).parent / "scripts"


def spec(name: str, holdout: str | None, *argv: str) -> RunSpec:
    path = SCRIPTS / f"{name}.py"
    return RunSpec(script=str(path), source=path.read_text(), argv=argv, loop=name, holdout=holdout)


def holdout_records(row: dict) -> list[dict]:
    return [r for r in read_trace(row["run_dir"]) if r["kind"] == "holdout"]


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    results = tmp_path_factory.mktemp("holdout")
    specs = [
        spec("train_tiny", "holdout_tiny:accuracy", "--epochs", "3"),
        spec("train_tiny", "holdout_tiny:broken", "--epochs", "3"),
        spec("crash_midway", "holdout_tiny:accuracy"),
        spec("train_tiny", None, "--epochs", "3"),
    ]
    return run_sweep(specs, results, workers=2)


def test_the_trained_model_is_evaluated_after_the_script(rows):
    row = rows[0]
    assert row["status"] == "ok"
    (record,) = holdout_records(row)
    assert record["optimizer"] == "SGD"
    assert record["metric"] > 0.8  # the tiny script learns its rule
    assert record["chance"] == 0.5 and "error" not in record
    # The evaluation's own forwards and losses are not the run's.
    end = [r for r in read_trace(row["run_dir"]) if r["kind"] == "end"][-1]
    assert end["eval_forwards"] == 3  # one per epoch, by the script


def test_an_evaluation_that_fails_is_recorded_not_fatal(rows):
    row = rows[1]
    assert row["status"] == "ok"
    (record,) = holdout_records(row)
    assert record["error"].startswith("ValueError: this evaluation does not fit")
    assert "metric" not in record


def test_a_run_that_did_not_finish_has_no_held_out_evaluation(rows):
    assert rows[2]["status"] == "crash"
    assert holdout_records(rows[2]) == []


def test_without_a_holdout_nothing_runs_and_the_cache_key_differs(rows):
    assert holdout_records(rows[3]) == []
    assert rows[0]["key"] != rows[3]["key"]


def test_resolve_rejects_a_malformed_spec():
    with pytest.raises(ValueError, match="not of the form module:function"):
        resolve("holdout_tiny.accuracy")


def test_a_holdout_that_cannot_be_imported_is_a_user_error(tmp_path):
    from experiments.sweep import Loop, Sweep, SweepError, build

    for spec in ("not_a_spec", "no_such_module_xyz:f", "reference_loops.holdout.digits:nope"):
        loop = Loop("reference_loops/mlp_digits.py", holdout=spec)
        with pytest.raises(SweepError, match=r"expected package\.module:function"):
            build(Sweep(loops=[loop]))
