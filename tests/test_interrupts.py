"""Ctrl-C (SIGINT) or SIGTERM at any moment of sweep, catalog, quiz, bench or test ends it within 5 s
with exit 130 (143), no traceback, and no process of it left; the cache stays consistent, so
the same command again resumes (issue 21). Each command starts with SIGINT *ignored*, as a
background job of a non-interactive shell inherits it, the state in which trainwreck once
shrugged off Ctrl-C; run under ``TRAINWRECK_TEST_LOAD=2`` in CI (both cores busy)."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest
import stopping

PROJECTS = Path(__file__).resolve().parent / "projects"
HANG = "import time\nwhile True:\n    time.sleep(0.1)\n"
# Real training, slow enough that a signal lands during a run.
SLOW_TRAIN = """
import argparse, time, torch
parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
torch.manual_seed(args.seed)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    optimizer.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    time.sleep(0.1)
"""


def _sweep(results):
    return ["sweep", "loop=custom", "loop.script=hang.py", f"results_dir={results}"]


def _catalog(results):
    return ["catalog", "--loops", "custom", "loop.script=hang.py", f"results_dir={results}"]


def _quiz(results):
    out = results.parent / "quiz"
    return ["quiz", "--loop", "mlp_digits", "--results-dir", str(results), "--out", str(out)]


def _bench(results):
    # Static detectors score in this process (no runs to wait for): stopped a while in.
    return ["bench", "--detector", "trainwreck-lint", "--results-dir", str(results)]


def _test(results):
    # Run from a copy of the fixture project (``start`` runs in tmp_path); results in ``results``.
    return ["test", "--mutate", "tinynet/train.py", "--out", str(results)]


COMMANDS = {"sweep": _sweep, "catalog": _catalog, "quiz": _quiz, "bench": _bench, "test": _test}
# Where each command shows that it is working (a run started, a mutant tested).
WORKING = {"test": "cache/results.jsonl"}
CASES = [
    ("sweep", signal.SIGINT, "running"),
    ("sweep", signal.SIGTERM, "running"),
    ("sweep", signal.SIGTERM, "loading"),
    ("catalog", signal.SIGINT, "running"),
    ("catalog", signal.SIGTERM, "running"),
    ("catalog", signal.SIGINT, "loading"),
    ("quiz", signal.SIGINT, "running"),
    ("quiz", signal.SIGTERM, "running"),
    ("bench", signal.SIGINT, "working"),
    ("bench", signal.SIGTERM, "loading"),
    ("test", signal.SIGINT, "running"),
    ("test", signal.SIGTERM, "loading"),
]
EXPECTED = {signal.SIGINT: 130, signal.SIGTERM: 143}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "number", "moment"),
    CASES,
    ids=[f"{c}-{signal.Signals(n).name}-{m}" for c, n, m in CASES],
)
def test_a_signal_ends_the_command_cleanly(command, number, moment, tmp_path):
    (tmp_path / "hang.py").write_text(HANG)
    if command == "test":
        shutil.copytree(PROJECTS / "tested_pkg", tmp_path, dirs_exist_ok=True)
    results = tmp_path / "results"
    started = stopping.start(COMMANDS[command](results), tmp_path, sigint="ignored")
    if moment == "running":
        working = WORKING.get(command, "runs/*/*/trace.jsonl")
        running = stopping.wait_for(started, lambda: any(results.glob(working)))
        assert running, f"{command} never started a run"
        time.sleep(0.3)
    else:
        time.sleep({"loading": 1.0, "working": 8.0}[moment])
    stopped = stopping.stop(started, number, grace_s=stopping_grace())
    assert stopped.code == EXPECTED[number], stopped.describe()
    assert "Traceback" not in stopped.stderr, stopped.stderr
    assert not stopped.leftovers, stopped.describe()


def stopping_grace() -> float:
    from hostile import STOP_GRACE_S

    return STOP_GRACE_S


@pytest.mark.slow
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_sweep_resumes_where_it_stopped(number, tmp_path):
    """The runs that finished stay cached; the one cut off reruns; nothing runs twice."""
    (tmp_path / "slow_train.py").write_text(SLOW_TRAIN)
    results = tmp_path / "results"
    args = [
        "sweep", "loop=custom", "loop.script=slow_train.py", f"results_dir={results}",
        "seeds=[0,1,2,3]", "budget.workers=1",
    ]  # fmt: skip
    first = stopping.start(args, tmp_path)
    done = stopping.wait_for(first, lambda: any(results.glob("runs/*/*/result.json")))
    assert done, "no run finished"
    stopped = stopping.stop(first, number, grace_s=stopping_grace())
    assert stopped.code == EXPECTED[number], stopped.describe()
    assert not stopped.leftovers
    finished_before = {p.parent.name for p in results.glob("runs/*/*/result.json")}
    assert 0 < len(finished_before) < 4

    again = stopping.start([*args], tmp_path)
    _, stderr = again.process.communicate(timeout=300)
    assert again.process.returncode == 0, stderr
    rows = [json.loads(p.read_text()) for p in results.glob("runs/*/*/result.json")]
    assert len(rows) == 4 and all(row["status"] == "ok" for row in rows)
    summary = [line for line in stderr.splitlines() if "runs (" in line][-1]
    assert f"({len(finished_before)} cached" in summary, summary
