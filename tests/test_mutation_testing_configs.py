"""``trainwreck test`` on projects configured as people configure pytest: pytest-cov in
``addopts`` or on the command line, coverage.py or a tracer of the project's own, xdist,
pytest-timeout, a conftest that moves into its folder and seeds
(``tests/projects/pytest_configs/``, each laid over a copy of ``tested_pkg``).

Each must give what the plain project gives: ``drop_zero_grad`` in ``train_step`` killed by
the overfit test alone (the baseline recorded which test ran the line), the one in
``finetune`` unreached (no test runs it), and the user's files untouched. On two public
projects with pytest-cov in ``addopts`` every mutant came out ``unreached``: the coverage
tracer had replaced the recorder's, and the baseline recorded nothing.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from test_mutation_testing_project import FINETUNE, OVERFIT, STEP, _digest, _rows, _test

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "tests" / "projects" / "pytest_configs"
FIXTURE = REPO / "tests" / "projects" / "tested_pkg"

pytestmark = pytest.mark.slow


def _configured(tmp_path: Path, config: str) -> Path:
    project = tmp_path / "tested_pkg"
    shutil.copytree(FIXTURE, project)
    shutil.copytree(CONFIGS / config, project, dirs_exist_ok=True)
    return project


def _needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]' installs it)")


ARGV = ["--mutate", "tinynet/train.py", "--operators", "drop_zero_grad", "--workers", "2"]


@pytest.mark.parametrize(
    ("config", "plugin", "command", "note"),
    [
        ("cov_addopts", "pytest_cov", [], "pytest-cov (--cov): off in every run"),
        (None, "pytest_cov", ["python", "-m", "pytest", "-x", "-q", "--cov=tinynet"], "pytest-cov"),
        ("xdist_addopts", "xdist", [], "pytest-xdist (-n 2)"),
        ("timeout_addopts", "pytest_timeout", [], None),
        ("coverage_conftest", "coverage", [], None),
        ("tracer_conftest", None, [], None),
        ("chdir_conftest", None, [], None),
    ],
)
def test_each_configuration_records_which_test_ran_the_line(
    tmp_path: Path, config: str | None, plugin: str | None, command: list[str], note: str | None
) -> None:
    if plugin:
        _needs(plugin)
    project = _configured(tmp_path, config) if config else _configured(tmp_path, "tracer_conftest")
    if not config:  # the plain project, coverage asked for on the command line
        (project / "tests" / "conftest.py").unlink()
    before = _digest(project)
    done = _test(project, *ARGV, *(["--", *command] if command else []))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(project)
    assert rows[STEP]["status"] == "killed", rows[STEP]
    assert rows[STEP]["killed_by"] == OVERFIT
    assert rows[FINETUNE]["status"] == "unreached"
    assert rows[FINETUNE]["detail"] == "no test executed the changed lines"
    report = (project / "results" / "mutation-testing" / "mutation-report.md").read_text()
    if note:
        assert f"- note: {note}" in report
    assert _digest(project) == before


def test_a_disabled_plugins_option_gets_advice(tmp_path: Path) -> None:
    """``-p no:cov`` leaves ``--cov`` of ``addopts`` unknown to pytest: the baseline fails
    with a usage error, and the message says how to turn the plugin off instead."""
    _needs("pytest_cov")
    project = _configured(tmp_path, "cov_addopts")
    done = _test(project, *ARGV, "--", "python", "-m", "pytest", "-q", "-p", "no:cov")
    assert done.returncode == 1
    first = done.stderr.strip().splitlines()[0]
    assert "pytest did not recognise --cov=tinynet, an option of pytest-cov" in first
    assert "--no-cov" in first and "Traceback" not in done.stderr


# -- the warm project ------------------------------------------------------------------------


def test_the_warm_project_gives_the_cold_verdicts(tmp_path: Path) -> None:
    """Forked from a server that imported and collected once, with the mutant swapped into
    the live functions, every mutant ends as in a child that imports and collects afresh;
    a mutant whose changed line ran at collection (a model built at a test module's top
    level) goes to such a child, or the model built by the original would hide it."""
    project = _configured(tmp_path, "built_at_import")
    argv = ["--mutate", "tinynet/train.py", "--mutate", "tinynet/model.py", "--workers", "2"]
    warm = _test(project, *argv, "--out", "warm")
    cold = _test(project, *argv, "--out", "cold", "--cold-project")
    assert warm.returncode == 0 and cold.returncode == 0, warm.stderr[-3000:] + cold.stderr[-3000:]
    rows = _rows(project, "warm")
    assert {k: r["status"] for k, r in rows.items()} == {
        k: r["status"] for k, r in _rows(project, "cold").items()
    }
    built = "tinynet/model.py::MLP.__init__::dropout_too_high#0"
    assert rows[built]["warm"] == "False"
    # The test that fails checks the attribute (MODEL.drop.p == 0.2) and trains nothing:
    # no dropout ran there with another rate, so the failure is no kill (the witness).
    assert rows[built]["status"] == "unconfirmed"
    assert rows[built]["witness"].startswith("a test failed, but its bug did not run there")
    assert "test_built.py::test_dropout_rate_is_kept" in rows[built]["detail"]
    assert rows[STEP]["warm"] == "True" and rows[STEP]["status"] == "killed"
    ran = [row for row in rows.values() if float(row["wall_s"]) > 0]
    assert sum(row["warm"] == "True" for row in ran) >= len(ran) - 3


def test_tests_that_fail_warm_run_cold_with_a_note(tmp_path: Path) -> None:
    """A test writing beside its own file writes into the server's shared copy, which its
    runs may not: the warm check (the unmutated tests the warm runs will run, here all of
    them) fails, the session says why and runs every mutant cold."""
    project = _configured(tmp_path, "writes_beside")
    done = _test(project, *ARGV, "--all-tests")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(project)
    assert rows[STEP]["status"] == "killed" and rows[STEP]["warm"] == "False"
    assert rows[FINETUNE]["status"] == "unreached"  # by its probes: it ran, the lines did not
    report = (project / "results" / "mutation-testing" / "mutation-report.md").read_text()
    assert "could not be imported and collected once for every mutant" in report
    assert "test_writes_a_sample_beside_itself" in report


def test_a_thread_started_at_collection_keeps_every_run_cold(tmp_path: Path) -> None:
    """Forking a process in which another thread runs copies only the forking thread: a
    lock that thread held stays held in the run. The server declines, and says why."""
    project = _configured(tmp_path, "thread_conftest")
    done = _test(project, *ARGV)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(project)
    assert rows[STEP]["status"] == "killed" and rows[STEP]["warm"] == "False"
    report = (project / "results" / "mutation-testing" / "mutation-report.md").read_text()
    assert "threads run after collection (watchdog)" in report
