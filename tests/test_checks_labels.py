"""trainwreck.checks on labels, and the public module itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from checks_fixtures import N_CLASSES, blobs, linear_targets

import experiments.checks
import trainwreck.checks
from trainwreck.checks import CheckFailed, check_labels_aligned, check_next_token_targets

ROOT = Path(__file__).resolve().parent.parent


def shuffled(y: torch.Tensor) -> torch.Tensor:
    return y[torch.randperm(len(y), generator=torch.Generator().manual_seed(1))]


@pytest.mark.parametrize("data", [blobs, linear_targets], ids=["classes", "values"])
def test_labels_aligned_passes_on_correct_pairs(data):
    check_labels_aligned(*data(128))


@pytest.mark.parametrize("data", [blobs, linear_targets], ids=["classes", "values"])
@pytest.mark.parametrize("bug", [lambda y: y.roll(1, 0), shuffled], ids=["shifted", "shuffled"])
def test_labels_aligned_fails_on_a_broken_pairing(data, bug):
    x, y = data(128)
    with pytest.raises(CheckFailed, match=r"labels look unrelated to their inputs"):
        check_labels_aligned(x, bug(y))


def test_labels_aligned_tolerates_partial_label_noise():
    # Documented limit: 30% random labels keep the relation, so this passes.
    x, y = blobs(128)
    g = torch.Generator().manual_seed(2)
    noisy = torch.where(
        torch.rand(len(y), generator=g) < 0.3, torch.randint(0, N_CLASSES, y.shape, generator=g), y
    )
    check_labels_aligned(x, noisy)


def test_labels_aligned_on_images_and_column_targets():
    x, y = blobs(128)
    images = x.reshape(128, 1, 2, 4)
    check_labels_aligned(images, y)
    xr, yr = linear_targets(128)
    check_labels_aligned(xr, yr.unsqueeze(1))
    with pytest.raises(CheckFailed):
        check_labels_aligned(xr, yr.unsqueeze(1).roll(1, 0))


def test_labels_aligned_says_what_is_wrong_with_its_input():
    x, y = blobs(128)
    with pytest.raises(CheckFailed, match=r"128 inputs and 127 labels"):
        check_labels_aligned(x, y[:-1])
    with pytest.raises(ValueError, match=r"at least 20 samples"):
        check_labels_aligned(x[:10], y[:10])


def test_next_token_targets():
    text = torch.randint(0, 50, (4, 33), generator=torch.Generator().manual_seed(0))
    check_next_token_targets(text[:, :-1], text[:, 1:])
    with pytest.raises(CheckFailed, match=r"\(the targets equal the inputs\)"):
        check_next_token_targets(text[:, :-1], text[:, :-1])
    with pytest.raises(CheckFailed, match=r"positions differ"):
        check_next_token_targets(text[:, 1:], text[:, :-1])  # shifted the wrong way
    with pytest.raises(CheckFailed, match=r"same .batch, time. shape"):
        check_next_token_targets(text[:, :-1], text[:, 1:-1])


def test_public_module_exports_every_check():
    assert trainwreck.checks.__all__ == experiments.checks.__all__
    for name in trainwreck.checks.__all__:
        assert getattr(trainwreck.checks, name) is getattr(experiments.checks, name)
        assert getattr(trainwreck.checks, name).__doc__


def test_checks_import_torch_only():
    code = (
        "import sys, trainwreck.checks; "
        "print(sorted(m for m in ('pandas', 'hydra', 'sklearn', 'libcst', 'scipy') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
