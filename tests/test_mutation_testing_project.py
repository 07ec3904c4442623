"""``trainwreck test`` end to end on ``tests/projects/tested_pkg`` (a package with
``model.py``, ``train.py`` and its own pytest tests), run unchanged from a copy.

Its tests: a shape test, a "fit returns finite losses" test and an overfit-one-batch
test. ``drop_zero_grad`` in ``train_step`` is caught by the overfit test alone; the one
in ``finetune`` sits in a function no test calls.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_mutation_testing import _git

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "projects" / "tested_pkg"
OVERFIT = "tests/test_overfit.py::test_overfits_one_batch"
STEP = "tinynet/train.py::train_step::drop_zero_grad#0"
FINETUNE = "tinynet/train.py::finetune::drop_zero_grad#0"

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "tested_pkg"
    shutil.copytree(FIXTURE, project)
    return project


def _test(project: Path, *argv: str, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", "test", *argv],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _rows(project: Path, out: str = "results/mutation-testing") -> dict[str, dict[str, str]]:
    with open(project / out / "mutants.csv", newline="") as handle:
        return {row["identity"]: row for row in csv.DictReader(handle)}


def _digest(folder: Path, skip: str = "results") -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if relative.parts[0] == skip or "__pycache__" in relative.parts:
            continue
        digest.update(str(relative).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def test_statuses_killed_by_unreached_and_a_rerun_that_runs_nothing(tmp_path: Path) -> None:
    project = _project(tmp_path)
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "first")
    before = _digest(project)
    argv = ["--mutate", "tinynet/train.py", "--operators", "drop_zero_grad", "--workers", "2"]
    done = _test(project, *argv)
    assert done.returncode == 0, done.stderr[-3000:]
    # The results folder sits in the user's tree; git ignores it, and the first run says so.
    assert "which git ignores" in done.stderr
    status = subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True)
    assert status.stdout == b""
    rows = _rows(project)
    assert rows[STEP]["status"] == "killed"
    assert rows[STEP]["killed_by"] == OVERFIT
    assert rows[STEP]["failed_with"] == "call:AssertionError"  # its own assert, in the test
    if importlib.util.find_spec("pytest_randomly") is None:  # else its (pinned) order decides
        assert rows[STEP]["tests_run"] == "1"  # -x: the overfit test failed first
    assert rows[FINETUNE]["status"] == "unreached"
    assert done.stdout.strip().splitlines()[-1].startswith("mutation score: 1/1 (100.0%)")
    for name in ("mutants.csv", "mutation-report.md", "mutation-report.html"):
        assert (project / "results" / "mutation-testing" / name).is_file()
    assert _digest(project) == before  # the user's files: never written

    again = _test(project, *argv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 run, 2 cached" in again.stderr and "which git ignores" not in again.stderr
    assert {key: row["status"] for key, row in _rows(project).items()} == {
        STEP: "killed",
        FINETUNE: "unreached",
    }

    # Without the overfit test the same bug survives; the report shows its check.
    weaker = _test(
        project,
        *argv,
        "--fail-under",
        "50",
        "--",
        "python",
        "-m",
        "pytest",
        "-x",
        "-q",
        "tests/test_train.py",
        "tests/test_model.py",
    )
    assert weaker.returncode == 1, weaker.stderr[-3000:]  # score 0% < 50%
    assert weaker.stdout.strip().splitlines()[-1] == "--fail-under 50: failed, 0.0% < 50%"
    assert _rows(project)[STEP]["status"] == "survived"
    report = (project / "results" / "mutation-testing" / "mutation-report.md").read_text()
    assert f"### `{STEP}`" in report and "-    optimizer.zero_grad()" in report
    assert "Check: " in report

    # Another file: the cached baseline recorded lines of train.py only, so it needs its own.
    other = _test(project, "--mutate", "tinynet/model.py", "--operators", "drop_activation")
    assert other.returncode == 0, other.stderr[-3000:]
    assert _rows(project)["tinynet/model.py::MLP.forward::drop_activation#0"]["status"] == "killed"


CUSTOM = '''
"""Two rewrites no shipped operator makes: an import that breaks, a loop without end."""
import sys
from pathlib import Path

import libcst as cst

from experiments.mutation_testing import command, discovery, session
from mutator import Swap


class BreakImport(Swap):
    """Bug: imports a name the model module lacks. Impact: none. Fix: none. Check: none."""

    name = "test_break_import"
    category = "numerics"
    summary = "imports a missing name"
    expected = "silent"
    node_types = (cst.ImportAlias,)

    def swap(self, node, ctx):
        # ``MLPX as MLP``: the name stays bound, so only running it shows the break (the
        # static gate rejects a rewrite that leaves ``MLP`` unbound before it is listed).
        if isinstance(node.name, cst.Name) and node.name.value == "MLP":
            return node.with_changes(
                name=cst.Name("MLPX"), asname=cst.AsName(name=cst.Name("MLP"))
            )
        return None


class EndlessEpochs(Swap):
    """Bug: the epoch loop never ends. Impact: hangs. Fix: none. Check: none."""

    name = "test_endless_epochs"
    category = "optim"
    summary = "endless epochs"
    expected = "timeout"
    node_types = (cst.Call,)

    def swap(self, node, ctx):
        args = node.args
        if isinstance(node.func, cst.Name) and node.func.value == "range" and len(args) == 1:
            if isinstance(args[0].value, cst.Name) and args[0].value.value == "epochs":
                return cst.parse_expression("iter(int, 1)")
        return None


root = Path.cwd()
targets = discovery.targets(root, ["tinynet/train.py"])
jobs = discovery.jobs(targets, [BreakImport(), EndlessEpochs()])
options = session.Options(
    root=root, out=root / "out", command=command.parse([]), workers=2, timeout_factor=1.0
)
for row in session.run(options, targets, jobs).rows:
    print(row.identity, row.status, row.detail)
'''


def test_stillborn_and_timeout(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (tmp_path / "custom.py").write_text(CUSTOM)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "custom.py")],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = {line.split()[0]: line.split(maxsplit=2)[1:] for line in done.stdout.splitlines()}
    status, detail = found["tinynet/train.py::<module>::test_break_import#0"]
    assert status == "stillborn" and detail.startswith("ImportError at line 6")
    assert found["tinynet/train.py::fit::test_endless_epochs#0"][0] == "timeout"


def test_since_runs_only_mutants_of_changed_lines(tmp_path: Path) -> None:
    project = _project(tmp_path)
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "first")
    train = project / "tinynet" / "train.py"
    text = train.read_text()
    train.write_text(text.replace("    model.train()\n", "    model.train()  # mode first\n", 1))
    done = _test(
        project, "--mutate", "tinynet/train.py", "--since", "HEAD", "--operators",
        "drop_zero_grad,drop_train_mode,scale_lr",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(_rows(project)) == ["tinynet/train.py::train_step::drop_train_mode#0"]


def test_a_failing_baseline_stops_before_any_mutant(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "tests" / "test_broken.py").write_text("def test_broken():\n    assert 1 == 2\n")
    done = _test(project, "--mutate", "tinynet/model.py")
    assert done.returncode == 1
    first = done.stderr.strip().splitlines()[0]
    assert first.startswith("trainwreck test: the unmutated command `python -m pytest -x -q`")
    assert "assert 1 == 2" in done.stderr and "Traceback" not in done.stderr
    assert not (project / "results" / "mutation-testing" / "mutants.csv").exists()


def test_sigterm_ends_every_run_within_5_s(tmp_path: Path) -> None:
    project = _project(tmp_path)
    out = tmp_path / "sigterm-results"  # a unique marker in every process's command line
    process = subprocess.Popen(
        [sys.executable, "-m", "experiments.cli", "test", "--mutate", "tinynet/train.py",
         "--workers", "2", "--out", str(out)],
        cwd=project, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith("[2/"):  # two mutants done, others running
            break
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    rest = process.stderr.read()
    process.wait(timeout=30)
    assert process.returncode == 143
    assert time.monotonic() - sent < 5
    assert "Traceback" not in rest
    time.sleep(0.2)
    left = [
        pid for pid in os.listdir("/proc") if pid.isdigit() and str(out).encode() in _cmdline(pid)
    ]
    assert left == []
    cache = (out / "cache" / "results.jsonl").read_text()
    assert cache.endswith("\n") and len(cache.splitlines()) >= 2


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_any_command_runs_in_a_new_process_with_the_mutant_and_its_probes(tmp_path: Path) -> None:
    """Not pytest: every test runs for every mutant, the exit status decides, and the
    sitecustomize boot gives the reach probes (``finetune`` runs, its lines do not)."""
    project = _project(tmp_path)
    before = _digest(project)
    done = _test(
        project, "--mutate", "tinynet/train.py", "--operators", "drop_zero_grad", "--",
        "sh", "-c", "python -m pytest -q -p no:cacheprovider tests/test_overfit.py",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(project)
    assert rows[STEP]["status"] == "killed" and rows[STEP]["killed_by"] == "<exit status 1>"
    assert rows[FINETUNE]["status"] == "unreached"
    assert rows[FINETUNE]["detail"] == "the changed lines never ran"  # it ran: probes said so
    assert _digest(project) == before
