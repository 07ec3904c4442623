"""Operators against hand-written ground truth on public-style scripts (issue 14).

Every script in tests/styles with an expected file (tests/styles/expected/<script>.toml)
is checked per operator: a site the engine finds that the file does not accept is a false
site, an expected entry no found site matches is a missed site; either fails. Cases that
are wrong today are strict xfails naming what is wrong, so fixing one without unmarking it
fails too. The scripts themselves must also run: each trains on CPU with tiny arguments and
its losses stay finite (and fall, where the script is a plain minimisation).
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from benchmark_modules import load

from mutations.registry import operator_classes

ROOT = Path(__file__).resolve().parent.parent
bench_sites = load("bench_sites")

I14 = "issue 14: "
# script -> operator -> what the engine gets wrong today on that script.
KNOWN_WRONG = {
    "channels_last_cifar.py": {
        "label_noise": "misses the training targets passed to a Dataset class (66)",
        "no_shuffle": "misses the DistributedSampler's default shuffle (70)",
        "shift_labels": "misses the training targets passed to a Dataset class (66)",
        "shuffle_labels": "misses the training targets passed to a Dataset class (66)",
    },
    "dcgan.py": {
        "drop_input_normalization": "misses the [-1, 1] pixel scaling images * 2 - 1 (19)",
        "drop_input_to_device": "misses real = real.to(device) (105): 'real' is not a known input name",
    },
    "fit_library.py": {
        "detach_hidden": "misses the body's output nested in forward's return (21)",
        "optimizer_recreated_each_epoch": "misses an optimizer built in __init__ with the epoch loop in fit() (27)",
        "step_before_backward": "misses the step of an accumulation run, in an if below its backward (49)",
        "step_outside_batch_loop": "misses the step of an accumulation run, in an if of the batch loop (49)",
        "zero_grad_after_backward": "misses zero_grad after the step of an accumulation run (50)",
    },
    "imagenet_trainer.py": {
        "accumulate_loss_graph": "misses AverageMeter.update(loss.item(), n) (192)",
        "label_noise": "misses the training targets passed to a Dataset class (124)",
        "no_shuffle": "misses shuffle=(train_sampler is None) (138)",
        "shuffle_labels": "misses the training targets passed to a Dataset class (124)",
        "validate_on_training_data": "fires on the --evaluate branch (148), not the default run",
    },
    "lbfgs_sine.py": {
        "drop_training_data": "slices draw()'s plotting code (50); misses data[3:] (66-67)",
        "optimizer_recreated_each_epoch": "misses LBFGS outside the steps loop (74)",
        "train_val_leakage": "slices draw()'s plotting code (50); misses data[3:] (66-67)",
    },
    "manual_sgd_regression.py": {
        "normalize_with_full_stats": "misses statistics over x[train_idx] (31)",
        "zero_grad_after_backward": "misses param.grad.zero_() (58)",
        "zero_init": "misses a model without optimizer (45)",
    },
    "mnist_nll.py": {
        "drop_input_normalization": "misses (images / 16.0 - 0.3) / 0.4 (90)",
    },
    "nanogpt_trainer.py": {
        "clip_before_backward": "misses clipping after an accumulation loop (222)",
        "step_before_backward": "misses the step after an accumulation loop (223)",
        "validate_on_training_data": "misses the val split of get_batch (67)",
        "zero_grad_after_backward": "misses zero_grad after the step with accumulation (225)",
    },
    "padded_char_lm.py": {
        "mix_batch_dims": "misses the logits flattened for a criterion module (50)",
        "unshifted_lm_targets": "misses a shift written as [BOS] + ids / ids + [EOS] (23)",
    },
    "rnn_digits.py": {
        "drop_input_normalization": "misses (images / 16.0 - 0.3) / 0.4 (75)",
    },
    "segmentation_callbacks.py": {
        "loss_from_item": "misses a loss returned by a training_step() method (102/116)",
        "normalize_with_full_stats": "misses mean, std over images[:n_train] (144)",
        "optimizer_recreated_each_epoch": "misses an optimizer handed to a Trainer whose fit() has the epoch loop (150)",
    },
    "siamese.py": {
        "detach_hidden": "misses forward_once, the tower's forward (51)",
        "drop_input_normalization": "misses the pixel scaling / 16.0 (99)",
        "low_precision_loss": "misses a custom criterion module (117)",
        "no_shuffle": "shuffle=False where the Dataset draws random pairs anyway (103): no effect",
        "reduction_sum": "misses torch.mean in a custom loss (70)",
    },
    "vae.py": {
        "detach_hidden": "misses encode()/decode(), forward's helpers (41, 50)",
        "drop_input_normalization": "misses the pixel scaling digits / 16.0 (26)",
    },
    "word_lm.py": {
        "drop_input_to_device": "misses batchify's .to(device) (76)",
        "drop_scheduler_step": "misses the manual annealing lr /= 4.0 (181)",
        "zero_init": "misses a model without optimizer (116)",
    },
}


@cache
def _found(script: str) -> dict:
    return bench_sites.found_sites(bench_sites.STYLES / script)


def _cases():
    for path in bench_sites.expected_files():
        script = bench_sites.script_of(path).name
        for op in sorted(bench_sites.load_expected(path)):
            wrong = KNOWN_WRONG.get(script, {}).get(op)
            marks = [pytest.mark.xfail(strict=True, reason=I14 + wrong)] if wrong else []
            yield pytest.param(path, op, marks=marks, id=f"{script}-{op}")


@pytest.mark.parametrize(("expected_file", "operator"), list(_cases()))
def test_operator_sites_match_the_expected_file(expected_file: Path, operator: str):
    script = bench_sites.script_of(expected_file).name
    expected = bench_sites.load_expected(expected_file)[operator]
    score = bench_sites.compare(expected, _found(script).get(operator, set()))
    problems = [f"false site {f.describe()}" for f in score.false]
    problems += [f"missed site {e.describe()}" for e in score.missed]
    assert not problems, f"{script} {operator}: " + "; ".join(problems)


def test_known_wrong_cases_name_real_cases():
    cases = {
        (bench_sites.script_of(p).name, op)
        for p in bench_sites.expected_files()
        for op in bench_sites.load_expected(p)
    }
    assert {(script, op) for script, ops in KNOWN_WRONG.items() for op in ops} <= cases


@pytest.mark.parametrize("expected_file", bench_sites.expected_files(), ids=lambda p: p.name)
def test_expected_file_reviews_every_operator(expected_file: Path):
    """A newly registered operator needs a hand decision (lines or []) in every file."""
    listed = set(bench_sites.load_expected(expected_file))
    registered = set(operator_classes())
    assert listed == registered, (
        f"{expected_file.name}: unreviewed {sorted(registered - listed)}, unknown {sorted(listed - registered)}"
    )


@pytest.mark.parametrize("expected_file", bench_sites.expected_files(), ids=lambda p: p.name)
def test_expected_lines_point_at_code(expected_file: Path):
    """Guards the files against typos: every named line is a line of code in the script."""
    lines = bench_sites.script_of(expected_file).read_text(encoding="utf-8").splitlines()
    for op, entries in bench_sites.load_expected(expected_file).items():
        for entry in entries:
            for number in entry.lines | (entry.after or frozenset()):
                assert 1 <= number <= len(lines), f"{op}: line {number} is past the end"
                text = lines[number - 1].strip()
                assert text and not text.startswith("#"), (
                    f"{op}: line {number} is not code: {text!r}"
                )


def test_the_compare_counts_false_missed_and_landing():
    entry = bench_sites.Entry(frozenset([10]), frozenset([12]))
    score = bench_sites.compare(
        [entry, bench_sites.Entry(frozenset([20, 21]))],
        {bench_sites.Found(10, 11), bench_sites.Found(21), bench_sites.Found(30)},
    )
    assert [f.line for f in score.true] == [21]
    assert [f.line for f in score.false] == [10, 30]  # 10 lands in the wrong place
    assert score.missed == [entry]


# -- the scripts run -----------------------------------------------------------------------
# script -> (tiny argv, what the losses must do: "fall" from first to last, or stay "finite")
RUNS = {
    "channels_last_cifar.py": (["--epochs", "2"], "fall"),
    "dcgan.py": (["--niter", "2", "--n-images", "128"], "finite"),
    "vae.py": (["--epochs", "2"], "fall"),
    "siamese.py": (["--epochs", "2", "--pairs", "512"], "fall"),
    "imagenet_trainer.py": (["--epochs", "1"], "fall"),
    "rnn_digits.py": (["--epochs", "2"], "fall"),
    "word_lm.py": (["--epochs", "2", "--sentences", "400"], "fall"),
    "lbfgs_sine.py": (["--steps", "2", "--waves", "8", "--length", "30", "--future", "5"], "fall"),
    "manual_sgd_regression.py": (["--epochs", "5"], "fall"),
    "nanogpt_trainer.py": (["--max_iters=20", "--eval_interval=10", "--eval_iters=2"], "fall"),
    "padded_char_lm.py": (["--epochs", "2"], "fall"),
    "mnist_nll.py": (["--epochs", "1"], "fall"),
    "segmentation_callbacks.py": (["--epochs", "2", "--n-images", "128"], "fall"),
    "fit_library.py": (["--epochs", "2"], "fall"),
}
LOSS = re.compile(r"loss\w*[:\s]+(-?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf))", re.IGNORECASE)


def test_every_script_with_an_expected_file_is_run():
    assert {bench_sites.script_of(p).name for p in bench_sites.expected_files()} == set(RUNS)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RUNS))
def test_style_script_trains_on_cpu(script: str, tmp_path: Path):
    argv, expectation = RUNS[script]
    done = subprocess.run(
        [sys.executable, str(bench_sites.STYLES / script), *argv],
        cwd=tmp_path,  # checkpoints and saved models land here, not in the tree
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    losses = [float(v) for v in LOSS.findall(done.stdout)]
    assert len(losses) >= 2, f"no loss lines in:\n{done.stdout[-1000:]}"
    assert all(math.isfinite(v) for v in losses), losses
    if expectation == "fall":
        assert losses[-1] < losses[0], f"loss did not fall: {losses}"
