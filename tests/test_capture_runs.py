"""Scripts that never call report() run unchanged through the harness, and their traces
hold the numbers they print or log, tagged with the source, read like report() numbers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from experiments.harness import RunSpec, run_sweep
from experiments.outcomes import validation_notes
from experiments.signature import signature
from experiments.trace import read_trace

TESTS = Path(__file__).parent
REPORTED = TESTS / "projects" / "reported"
STYLES = TESTS / "styles"
OWN_FORMAT = r"holdout-nll (?P<val_loss>[0-9.]+) / score (?P<val_metric>[0-9.]+)"


def spec(folder: Path, name: str, *argv: str, metrics: str | None = None) -> RunSpec:
    path = folder / f"{name}.py"
    return RunSpec(
        script=str(path),
        source=path.read_text(),
        argv=argv,
        loop=name,
        cwd=str(folder),
        metrics=metrics,
    )


def reports(row: dict) -> list[dict]:
    return [r for r in read_trace(row["run_dir"]) if r["kind"] == "report"]


def summary(row: dict) -> dict:
    (record,) = [r for r in read_trace(row["run_dir"]) if r["kind"] == "capture"]
    return record


def series(row: dict, name: str) -> list[float]:
    return [r[name] for r in reports(row) if name in r]


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> dict[str, dict]:
    specs = [
        spec(STYLES, "nanogpt_trainer", "--max_iters=20", "--eval_interval=10", "--eval_iters=2"),
        spec(STYLES, "word_lm", "--epochs", "2", "--sentences", "400"),
        spec(REPORTED, "mnist_style", "--epochs", "2"),
        spec(REPORTED, "logging_info", "--epochs", "2"),
        spec(REPORTED, "own_format", "--epochs", "2", metrics=OWN_FORMAT),
        spec(TESTS / "scripts", "train_tiny", "--epochs", "3"),
        spec(TESTS / "projects" / "sgd_by_hand", "train"),
    ]
    done = run_sweep(specs, tmp_path_factory.mktemp("capture"), workers=2)
    assert [row["status"] for row in done] == ["ok"] * len(specs)
    return {row["loop"]: row for row in done}


def test_a_gpt_trainer_printing_step_lines_is_measured_by_its_val_loss(rows):
    row = rows["nanogpt_trainer"]
    assert summary(row)["measured_by"] == {"val_loss": "stdout", "val_metric": None}
    records = reports(row)
    assert [r["step"] for r in records] == [0, 10, 20]
    assert all(r["source"] == "stdout" and r["train_loss"] > 0 for r in records)
    features = signature(list(read_trace(row["run_dir"])), row, n_classes=None)
    assert features["val_loss_final"] == records[-1]["val_loss"]
    assert features["val_loss_final"] < records[0]["val_loss"]  # it learned


def test_a_word_model_is_measured_by_its_epoch_summaries_not_its_test_line(rows):
    row = rows["word_lm"]
    records = reports(row)
    assert [r["epoch"] for r in records] == [1, 2]
    assert all(r["split"] == "val" and r["val_ppl"] > 1 for r in records)
    stdout = (Path(row["run_dir"]) / "stdout.txt").read_text()
    assert f"valid loss {records[-1]['val_loss']:.2f}" in stdout


def test_an_mnist_style_test_line_gives_loss_and_accuracy(rows):
    row = rows["mnist_style"]
    records = reports(row)
    assert [r["split"] for r in records] == ["test", "test"]
    assert all(0 < r["val_metric"] < 1 and r["val_metric_kind"] == "accuracy" for r in records)
    features = signature(list(read_trace(row["run_dir"])), row, n_classes=10)
    assert features["val_metric_final"] == records[-1]["val_metric"]
    assert features["val_metric_vs_chance"] > 0.2


def test_logging_records_are_read_whatever_handlers_the_script_installs(rows):
    row = rows["logging_info"]
    capture = summary(row)
    assert capture["measured_by"] == {"val_loss": "logging", "val_metric": "logging"}
    # The last record went to a NullHandler: logging saw it, stderr did not.
    assert capture["events"] == {"logging": 3, "stderr": 2}
    assert [r["epoch"] for r in reports(row)] == [1, 2]


def test_a_user_pattern_reads_a_shape_of_its_own(rows):
    row = rows["own_format"]
    capture = summary(row)
    assert capture["measured_by"] == {"val_loss": "pattern", "val_metric": "pattern"}
    assert capture["pattern"] == OWN_FORMAT
    assert all(0.5 < value < 1 for value in series(row, "val_metric"))  # "score 82.1" is 82%


def test_a_scripts_own_report_wins_and_nothing_is_added(rows):
    row = rows["train_tiny"]
    assert summary(row)["measured_by"] == {"val_loss": "report", "val_metric": None}
    records = reports(row)
    assert len(records) == 3 and {r["source"] for r in records} == {"report"}
    # It prints "epoch N val_loss X" too: seen, and left out.
    assert summary(row)["events"] == {"stdout": 3}


def test_a_script_with_no_measure_still_gets_the_hint(rows):
    row = rows["train"]
    assert summary(row)["measured_by"] == {"val_loss": None, "val_metric": None}
    assert reports(row) == []
    notes = validation_notes(
        [{**row, "identity": "none"}, {**rows["mnist_style"], "identity": "none"}]
    )
    assert len(notes) == 1 and notes[0].startswith("train:")


def test_the_pattern_joins_the_cache_key(rows):
    bare = spec(REPORTED, "own_format", "--epochs", "2")
    assert bare.key != rows["own_format"]["key"]


def test_a_bad_loop_metrics_fails_when_the_sweep_is_built():
    from experiments.sweep import Loop, Sweep, SweepError, build

    loop = Loop(str(REPORTED / "own_format.py"), metrics="score (?P<score>[0-9.]+)")
    with pytest.raises(SweepError, match="has no named group val_loss or val_metric"):
        build(Sweep(loops=[loop]))


def test_a_process_that_serves_several_runs_captures_each(tmp_path):
    specs = [spec(REPORTED, "logging_info", "--epochs", str(n)) for n in (1, 2)]
    done = run_sweep(specs, tmp_path, workers=1, reuse=2)
    assert [row["start_method"] for row in done] == ["fork", "reused"]
    assert [len(reports(row)) for row in done] == [1, 2]
    assert all(summary(row)["measured_by"]["val_loss"] == "logging" for row in done)


# -- the structured loggers, with the real packages -----------------------------------------


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.skipif(not installed("tensorboard"), reason="tensorboard not installed (dev extra)")
def test_tensorboard_scalars_are_captured(tmp_path):
    (row,) = run_sweep(
        [spec(REPORTED, "tensorboard_logging", "--epochs", "2")], tmp_path, workers=1
    )
    assert row["status"] == "ok"
    capture = summary(row)
    assert capture["measured_by"] == {"val_loss": "tensorboard", "val_metric": "tensorboard"}
    records = reports(row)
    # add_scalar of the loss and of the accuracy at one step are one evaluation.
    assert [r["step"] for r in records] == [0, 1]
    assert all(
        r["names"] == {"val_loss": "Loss/val", "val_metric": "Accuracy/val"} for r in records
    )


@pytest.mark.skipif(not installed("wandb"), reason="wandb not installed (dev extra)")
@pytest.mark.parametrize("mode", ["online", "disabled"])
def test_wandb_logs_are_captured_and_never_go_online(tmp_path, monkeypatch, mode):
    monkeypatch.setenv("WANDB_MODE", mode)  # the shell's setting; the script asks for online
    monkeypatch.setenv("WANDB_SILENT", "true")
    script = spec(REPORTED, "wandb_logging", "--epochs", "2", "--mode", "online")
    (row,) = run_sweep([script], tmp_path, workers=1)
    assert row["status"] == "ok", row.get("exc_message")
    assert summary(row)["measured_by"] == {"val_loss": "wandb", "val_metric": "wandb"}
    records = reports(row)
    assert [r["epoch"] for r in records] == [0, 1]
    assert all(r["names"]["val_loss"] == "val/loss" and "train_loss" in r for r in records)


@pytest.mark.slow
@pytest.mark.skipif(
    not installed("lightning"),
    reason="lightning not installed (~3 s to import; not in the dev extra)",
)
def test_lightning_logs_are_averaged_per_epoch(tmp_path):
    (row,) = run_sweep([spec(REPORTED, "lightning_module", "--epochs", "2")], tmp_path, workers=1)
    assert row["status"] == "ok", row.get("exc_message")
    assert summary(row)["measured_by"] == {"val_loss": "lightning", "val_metric": "lightning"}
    records = reports(row)
    assert [r["epoch"] for r in records] == [0, 1]  # the sanity check's batches are not one
    assert 0 < records[-1]["val_metric"] <= 1


def test_each_run_row_names_the_source_that_measured_it(rows):
    """The verdicts' side (#23 phase 2): the runs table's ``outcome_source``."""
    expected = {
        "nanogpt_trainer": "stdout",
        "word_lm": "stdout",
        "mnist_style": "stdout",
        "logging_info": "logging",
        "own_format": "pattern",
        "train": "none",
    }
    for loop, source in expected.items():
        row = rows[loop]
        features = signature(list(read_trace(row["run_dir"])), row, n_classes=None)
        assert features["outcome_source"] == source, loop
