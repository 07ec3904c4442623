"""From captured events to report records: one series per field, precedence, scale."""

from __future__ import annotations

import json

import pytest

from experiments.capture import measured_by, read_run
from experiments.capture.events import Event, Number
from experiments.capture.keys import classify
from experiments.capture.resolve import resolve


def event(source: str, *numbers: tuple[str, float], epoch: int | None = None, scale=None) -> Event:
    made = []
    for name, value in numbers:
        key = classify(name)
        assert key is not None, name
        made.append(Number.of(name, key, value, scale))
    return Event(source, tuple(made), epoch=epoch)


def fields(records: list[dict], name: str) -> list:
    return [record.get(name) for record in records if name in record]


def test_one_epoch_seen_by_two_sources_counts_once_from_the_better_source():
    events = [
        event("stdout", ("val_loss", 0.9), epoch=0),
        event("tensorboard", ("Loss/val", 0.9), ("Accuracy/val", 0.7), epoch=0),
        event("stdout", ("val_loss", 0.5), epoch=1),
        event("tensorboard", ("Loss/val", 0.5), ("Accuracy/val", 0.8), epoch=1),
    ]
    resolution = resolve(events, set())
    assert fields(resolution.records, "val_loss") == [0.9, 0.5]
    assert {record["source"] for record in resolution.records} == {"tensorboard"}
    assert resolution.summary["measured_by"] == {
        "val_loss": "tensorboard",
        "val_metric": "tensorboard",
    }
    assert resolution.summary["events"] == {"stdout": 2, "tensorboard": 2}


@pytest.mark.parametrize(
    ("sources", "winner"),
    [
        (("stderr", "stdout"), "stdout"),
        (("stdout", "logging"), "logging"),
        (("logging", "lightning"), "lightning"),
        (("lightning", "wandb"), "wandb"),
        (("wandb", "tensorboard"), "tensorboard"),
        (("tensorboard", "pattern"), "pattern"),
    ],
)
def test_precedence_between_sources(sources, winner):
    events = [event(source, ("val_loss", 1.0 + i)) for i, source in enumerate(sources)]
    assert resolve(events, set()).summary["measured_by"]["val_loss"] == winner


def test_a_scripts_own_report_is_never_overridden_but_may_be_completed():
    events = [event("tensorboard", ("val/loss", 0.4), ("val/acc", 0.9), epoch=0)]
    resolution = resolve(events, {"val_loss"})
    assert fields(resolution.records, "val_loss") == []
    assert fields(resolution.records, "val_metric") == [0.9]
    assert resolution.summary["measured_by"] == {"val_loss": "report", "val_metric": "tensorboard"}
    assert resolve(events, {"val_loss", "val_metric"}).records == []


def test_validation_comes_before_a_final_test_number():
    events = [
        event("stdout", ("valid loss", 5.8), epoch=1),
        event("stdout", ("valid loss", 5.6), epoch=2),
        event("stdout", ("test loss", 5.7)),
    ]
    resolution = resolve(events, set())
    assert fields(resolution.records, "val_loss") == [5.8, 5.6]
    assert {record["split"] for record in resolution.records} == {"val"}


def test_a_test_split_stands_in_when_there_is_no_validation_split():
    (record,) = resolve([event("stdout", ("test loss", 0.03), ("test acc", 0.98))], set()).records
    assert record["split"] == "test" and record["val_loss"] == 0.03


def test_percentages_become_fractions_and_what_is_no_accuracy_is_passed_over():
    percent = [event("stdout", ("val acc", 55.0)), event("stdout", ("val acc", 0.5))]
    assert fields(resolve(percent, set()).records, "val_metric") == [0.55, 0.005]
    signed = [event("stdout", ("val acc", 0.9), scale="percent")]
    assert fields(resolve(signed, set()).records, "val_metric") == [0.009]
    too_large = [event("stdout", ("val top1", 350.0)), event("tensorboard", ("val_f1", 0.6))]
    resolution = resolve(too_large, set())
    assert fields(resolution.records, "val_metric") == [0.6]
    assert resolution.records[0]["val_metric_kind"] == "f1"


def test_an_accuracy_comes_before_another_metric_and_lower_is_better_is_no_val_metric():
    events = [event("tensorboard", ("val_f1", 0.7)), event("stdout", ("val acc", 0.8))]
    assert fields(resolve(events, set()).records, "val_metric") == [0.8]
    assert resolve([event("stdout", ("val_mae", 3.0))], set()).records == []


def test_companions_ride_along_and_nothing_is_written_without_an_evaluation():
    line = event("stdout", ("train loss", 1.9), ("valid loss", 2.0), ("valid ppl", 7.4), epoch=3)
    (record,) = resolve([line], set()).records
    assert record["train_loss"] == 1.9 and record["val_ppl"] == 7.4 and record["epoch"] == 3
    assert record["names"] == {"val_loss": "valid loss"}
    nothing = resolve([], set())
    assert nothing.records == []
    assert nothing.summary["measured_by"] == {"val_loss": None, "val_metric": None}


def test_measured_by_reads_the_summary_or_else_the_reports():
    summary = {"kind": "capture", "measured_by": {"val_loss": "stdout", "val_metric": None}}
    assert measured_by([summary])["val_loss"] == "stdout"
    old = [{"kind": "report", "epoch": 0, "val_loss": 0.3, "val_acc": 0.9}]
    assert measured_by(old) == {"val_loss": "report", "val_metric": "report"}
    assert measured_by([{"kind": "backward", "loss": 1.0}]) == {
        "val_loss": None,
        "val_metric": None,
    }


def test_a_run_killed_before_its_end_is_resolved_from_its_folder(tmp_path):
    streamed = event("logging", ("val_loss", 0.7), epoch=0)
    record = {"kind": "metric", "t": 0.5, **streamed.record(), "at": 0.5}
    (tmp_path / "trace.jsonl").write_text(json.dumps(record) + "\n")
    (tmp_path / "stdout.txt").write_text("epoch 1: val_loss=0.6\n[1] score 80.0\n")
    resolution = read_run(tmp_path, pattern=r"score (?P<val_metric>[0-9.]+)")
    assert fields(resolution.records, "val_loss") == [0.7]  # logging outranks stdout
    assert fields(resolution.records, "val_metric") == [0.8]
    assert resolution.summary["events"] == {"logging": 1, "stdout": 1, "pattern": 1}
