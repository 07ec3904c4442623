"""Reading printed lines and names: what is a validation number, and what is not."""

from __future__ import annotations

import pytest

from experiments.capture import keys
from experiments.capture.lines import LineReader, compile_pattern, read_lines


def read(line: str) -> dict[str, float]:
    """``split kind`` -> value of every kept number on one line (accuracy as a fraction
    where the line said n/N, else as printed)."""
    return {
        f"{number.split} {number.kind}": number.value
        for event in read_lines([line], "stdout")
        for number in event.numbers
    }


# line -> what must be read from it (the public scripts these shapes come from print them)
TRUE_MATCHES = {
    "step 250: train loss 1.9100, val loss 2.0100": {"train loss": 1.91, "val loss": 2.01},
    "| end of epoch   1 | time: 50.61s | valid loss  5.81 | valid ppl   334.12": {
        "val loss": 5.81,
        "val perplexity": 334.12,
    },
    "| End of training | test loss  5.70 | test ppl   298.87": {
        "test loss": 5.7,
        "test perplexity": 298.87,
    },
    "Test set: Average loss: 0.0326, Accuracy: 9898/10000 (99%)": {
        "test loss": 0.0326,
        "test accuracy": 0.9898,
    },
    "valid_loss=2.01": {"val loss": 2.01},
    "val/loss: 2.01": {"val loss": 2.01},
    "val_acc 0.93": {"val accuracy": 0.93},
    "eval_accuracy = 0.874": {"val accuracy": 0.874},
    "Validation: loss 0.51, acc 0.88": {"val loss": 0.51, "val accuracy": 0.88},
    "val top1 76.1 top5 92.9": {"val accuracy": 76.1, "val top5": 92.9},
    "Test: Acc@1 76.130 Acc@5 92.862": {"test accuracy": 76.13, "test acc@5": 92.862},
    "valLoss: 0.3 valAcc: 0.9": {"val loss": 0.3, "val accuracy": 0.9},
    "Epoch [3/10], Step [100/600], Loss: 0.2, Val Acc: 91.5%": {"val accuracy": 91.5},
    "val loss tensor(0.5000)": {"val loss": 0.5},
    "{'val_loss': 0.41, 'val_f1': 0.77}": {"val loss": 0.41, "val f1": 0.77},
    "test_mae 3.2 test_r2 0.61": {"test mae": 3.2, "test r2": 0.61},
    "loss: 0.30 - accuracy: 0.91 - val_loss: 0.40 - val_accuracy: 0.88": {
        "val loss": 0.4,
        "val accuracy": 0.88,
    },
    "epoch   3  train 0.4000  val 0.5000  acc 0.900": {"val accuracy": 0.9},
    "val nll 1.2e-1": {"val loss": 0.12},
}

# lines with numbers that are not a validation result
FALSE_MATCHES = (
    "train loss 0.5",  # a training number alone is not an evaluation's
    "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.302585",
    "lr 0.001",
    "learning_rate: 3e-4, val loss is computed every 250 steps",
    "Epoch 3/10",
    "iter 250: loss 1.9000, time 30.52ms, mfu 5.01%",
    "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 45.63 | loss  7.63 | ppl  2050.32",
    "best val loss 0.3120",  # the best so far, not this evaluation
    "val_loss improved from 0.5200 to 0.4100, saving model",
    "eval_interval 250 loss 3.2",  # a setting's split word does not carry over
    " * Acc@1 76.130 Acc@5 92.862",  # no split said: it may be a training number
    "top1 76.1",
    "initial loss would be ln(65) = 4.17",
    "val_batch_size 64 val_iters 20",
    "max val acc 0.99",
    "saved checkpoint to out/val_0.5.pt",
)


@pytest.mark.parametrize("line", sorted(TRUE_MATCHES))
def test_a_line_of_a_common_shape_is_read(line):
    got = read(line)
    assert got == pytest.approx(TRUE_MATCHES[line])


@pytest.mark.parametrize("line", FALSE_MATCHES)
def test_a_number_that_is_not_a_validation_result_is_not_read(line):
    assert read(line) == {}


def test_counters_are_read_and_carried_to_the_following_lines():
    reader = LineReader("stdout")
    lines = [
        "Train Epoch: 3 [0/1437 (0%)]\tLoss: 0.52",
        "",
        "Test set: Average loss: 0.4100, Accuracy: 300/360 (83%)",
        "step 250: train loss 1.91, val loss 2.01",
    ]
    events = [event for line in lines for event in reader.read(line)]
    assert [(e.epoch, e.step) for e in events] == [(3, None), (3, 250)]
    assert events[0].numbers[1].scale == "fraction"


def test_a_percent_sign_is_kept_with_the_number():
    (event,) = read_lines(["val acc 91.5 %"], "stdout")
    assert event.numbers[0].scale == "percent"


def test_names_are_what_the_script_called_the_numbers():
    (event,) = read_lines(["| end of epoch 1 | valid loss 5.81 | valid ppl 334.12"], "stdout")
    assert [n.name for n in event.numbers] == ["valid loss", "valid ppl"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Loss/val", ("val", "loss", False)),
        ("val/loss", ("val", "loss", False)),
        ("Accuracy/test", ("test", "accuracy", True)),
        ("loss/train", ("train", "loss", False)),
        ("valid_ppl", ("val", "perplexity", False)),
        ("eval/top-1", ("val", "accuracy", True)),
        ("val_mae", ("val", "mae", False)),
        ("loss", (None, "loss", False)),
        ("lr", None),
        ("val/grad_norm", None),
        ("epoch", None),
        ("val/best_loss", None),
    ],
)
def test_a_tag_or_key_names_its_split_kind_and_direction(name, expected):
    key = keys.classify(name)
    assert (key and (key.split, key.kind, key.higher_is_better)) == expected


def test_a_user_pattern_names_the_numbers_and_counters():
    pattern = compile_pattern(
        r"\[epoch (?P<epoch>\d+)\] holdout-nll (?P<val_loss>[0-9.]+) / score (?P<val_metric>[0-9.]+)"
    )
    reader = LineReader("stdout", pattern)
    (event,) = reader.read("[epoch 2] holdout-nll 0.4100 / score 91.0")
    assert event.source == "pattern" and event.epoch == 2
    assert {n.name: n.value for n in event.numbers} == {"val_loss": 0.41, "val_metric": 91.0}
    assert list(reader.read("[epoch 2] something else 0.3")) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("val loss (?P<val_loss>[0-9.]+", "is not a regular expression"),
        (r"val loss (?P<loss>[0-9.]+)", "has no named group val_loss or val_metric"),
    ],
)
def test_a_bad_user_pattern_says_what_is_wrong_and_what_would_be_right(text, message):
    with pytest.raises(ValueError, match=message) as raised:
        compile_pattern(text)
    assert "e.g. 'val loss (?P<val_loss>[0-9.]+)'" in str(raised.value)
    assert "\n" not in str(raised.value)
