"""``tests/projects/fit_api``: a ``fit()``-style trainer whose tests use the plateau, fit-step,
evaluation and loader checks (issue 30's kill rates, ``benchmarks/bench_checks.py
--project``). Its tests pass on the package as written, and a mutant of its training module
fails the test of the check made for that bug, with ``CheckFailed``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mutations.registry import get_operator
from mutator import SourceFile

REPO = Path(__file__).resolve().parents[1]
PROJECT = REPO / "tests" / "projects" / "fit_api"
TRAINING = "fitkit/training.py"


def _copy(tmp_path: Path) -> Path:
    """The project in a private folder (its runs leave nothing in the repository)."""
    project = tmp_path / "fit_api"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "OMP_NUM_THREADS": "1",  # as trainwreck test runs it; torch's threads fight on 2 cores
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)


def _mutate(project: Path, operator: str, scope: str) -> None:
    """Write the mutant of ``operator``'s one site in ``scope`` over the copy's module."""
    path = project / TRAINING
    parsed = SourceFile(path.read_text(encoding="utf-8"), "training.py")
    found = [s for s in parsed.find_sites([get_operator(operator)]) if s.scope == scope]
    assert len(found) == 1, [site.identity for site in found]
    path.write_text(parsed.apply(found).source, encoding="utf-8")


def test_the_project_tests_pass_on_the_package_as_written(tmp_path: Path) -> None:
    done = _pytest(_copy(tmp_path), "tests/")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "8 passed" in done.stdout


@pytest.mark.slow  # a fresh interpreter with torch per mutant: ~5 s each on 2 busy cores
@pytest.mark.parametrize(
    ("operator", "scope", "test", "message"),
    [
        # the ReduceLROnPlateau is never stepped: the learning rate never falls
        ("drop_scheduler_step", "Trainer.fit", "test_plateau_reaction", "to fall within 4"),
        # predict() without model.eval(): dropout stays on in prediction
        ("drop_eval_mode", "Trainer.predict", "test_evaluation_predict", "in eval mode"),
        # predict() without torch.no_grad(): its outputs carry a graph
        ("drop_no_grad", "Trainer.predict", "test_evaluation_predict", "no autograd graph"),
        # optimizer.step() removed from fit()'s loop
        ("drop_optimizer_step", "Trainer.train_epoch", "test_fit_step_params_change", "change"),
        # model.train() removed: fit() after an evaluation trains in eval mode
        ("drop_train_mode", "Trainer.train_epoch", "test_fit_step_train_mode", "eval mode"),
    ],
)
def test_a_mutant_fails_the_test_of_its_check(
    tmp_path: Path, operator: str, scope: str, test: str, message: str
) -> None:
    project = _copy(tmp_path)
    _mutate(project, operator, scope)
    done = _pytest(project, f"tests/test_checks.py::{test}")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "trainwreck.checks.CheckFailed" in done.stdout, done.stdout[-3000:]
    assert message in done.stdout, done.stdout[-3000:]
