"""Lint-only clean fixtures: correct training scripts in the spellings public code uses
(AMP with a GradScaler, GANs, schedulers per batch, k-fold optimizers, ...). They are never
mutated; the linter must report nothing on any of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.bench.lint import lint_source

CLEAN = sorted((Path(__file__).resolve().parent / "lint_clean").glob("*.py"))


def test_the_clean_fixture_folder_is_not_empty():
    # An empty parametrisation would skip the check below silently: fail instead.
    assert CLEAN, "tests/lint_clean/ holds no *.py fixture"


@pytest.mark.parametrize("path", CLEAN, ids=[path.name for path in CLEAN])
def test_a_clean_fixture_gets_no_finding(path: Path):
    findings = lint_source(path.read_text(encoding="utf-8"), str(path))
    assert [finding.format() for finding in findings] == []
