"""A run process reused for several runs gives what a fresh fork per run gives.

Every reference loop (one epoch), real mutants of ``regression_diabetes`` and hostile
scripts (global torch state, environment, working directory, a monkeypatch, a memory
leak, a project module, a crash, a segfault, a hang, ``os._exit``) run twice: a fresh
fork per run (``reuse=1``) and processes that serve up to 8 runs (``reuse=8``), one
worker, in the same order, so each hostile script runs in a process before the next run.
Their statuses, counters, printed output and traces (every record, leaving out times,
memory and process ids) are equal byte for byte. Real processes, no mocks.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from experiments.harness import RunSpec
from experiments.harness.runner import Runner
from experiments.loops import loop_names
from experiments.sweep import Loop, Sweep, build
from experiments.trace import TRACE_FILE

ROOT = Path(__file__).resolve().parent.parent
# Fields that differ between any two runs of the same code (clocks, memory, process ids).
VOLATILE = {"t", "step_time", "rss_mb", "cuda_mb", "pid", "wall_s", "cpu_s", "nonce"}
MUTANT_OPERATORS = (
    "drop_zero_grad",
    "step_before_backward",
    "accumulate_loss_graph",
    "low_precision_loss",
    "drop_manual_seed",
    "loss_from_item",
)

TRAIN = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 4)
for step in range(12):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
    loss.backward()
    optimizer.step()
    print(f"{loss.item():.10f}", torch.get_default_dtype(), torch.is_grad_enabled())
"""
# Each changes what a later run in the same process would see; each ends ``ok``.
HOSTILE = {
    "global_state": """
        import os, signal, sys, warnings, logging
        import torch
        torch.set_default_dtype(torch.float64)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.autograd.set_detect_anomaly(True)
        torch.set_num_threads(2)
        os.environ["TRAINWRECK_REUSE_PROBE"] = "1"
        os.chdir("/")
        sys.path.insert(0, "/nonexistent")
        sys.argv.append("--extra")
        warnings.simplefilter("ignore", DeprecationWarning)
        logging.getLogger().addHandler(logging.StreamHandler())
        signal.signal(signal.SIGUSR1, lambda *args: None)
        sys.setrecursionlimit(500)
        import builtins
        builtins.leftover = 1
        {train}
        torch.set_grad_enabled(False)
    """,
    "reads_state": """
        import os, sys, warnings, logging, signal, builtins
        print(os.environ.get("TRAINWRECK_REUSE_PROBE"), "/nonexistent" in sys.path,
              len(sys.argv), warnings.filters[:1], len(logging.getLogger().handlers),
              signal.getsignal(signal.SIGUSR1), sys.getrecursionlimit(),
              hasattr(builtins, "leftover"), os.getcwd() == "/")
        import torch
        print(torch.get_num_threads(), torch.is_anomaly_enabled(),
              torch.are_deterministic_algorithms_enabled())
        {train}
    """,
    "project_module": """
        import sys, pathlib
        pathlib.Path("helper_mod.py").write_text("VALUE = 1\\n")
        sys.path.insert(0, ".")
        import helper_mod
        helper_mod.VALUE += 1
        print(helper_mod.VALUE)
        {train}
    """,
    "monkeypatch": """
        import torch
        {train}
        torch.nn.functional.relu = torch.nn.functional.gelu
    """,
    "leak": """
        import json, torch
        json._leak = torch.ones(40_000_000)  # 160 MB kept by a module nobody watches
        {train}
    """,
    "crash": """
        {train}
        raise RuntimeError("boom")
    """,
    "segfault": """
        {train}
        import ctypes
        ctypes.string_at(0)
    """,
    "os_exit": """
        {train}
        import os
        os._exit(0)
    """,
    "hang": """
        {train}
        import time
        time.sleep(60)
    """,
}


def _hostile_specs(folder: Path) -> list[RunSpec]:
    """Each hostile script, then a plain training run (its own group: all run in order)."""
    specs = []
    plain = folder / "plain.py"
    plain.write_text(TRAIN, encoding="utf-8")
    for number, (name, body) in enumerate(HOSTILE.items()):
        path = folder / f"{name}.py"
        text = textwrap.dedent(body).replace("{train}", TRAIN.strip())
        path.write_text(text, encoding="utf-8")
        for script, loop in ((path, name), (plain, f"plain_after_{number}")):
            specs.append(
                RunSpec(
                    script=str(script),
                    source=script.read_text(),
                    loop=loop,
                    seed=number,  # a key of its own (the key does not hold the loop name)
                    cwd=str(folder),
                    timeout_s=8.0 if name == "hang" else None,
                )
            )
    return specs


def _loop_specs() -> list[RunSpec]:
    loops = [Loop(script=str(ROOT / "reference_loops" / f"{n}.py"), epochs=1) for n in loop_names()]
    mutants = Sweep(
        loops=[Loop(script=str(ROOT / "reference_loops" / "regression_diabetes.py"), epochs=1)],
        operators=MUTANT_OPERATORS,
        sites="first",
        seeds=(0, 1),
    )
    return build(Sweep(loops=loops, seeds=(0,))) + build(mutants)


def _comparable(run_dir: str) -> list[dict]:
    """The trace without volatile fields. Forward counters are written at each flush of a
    timer, wherever the run is then: only their last values are compared."""
    records, forwards = [], None
    for line in (Path(run_dir) / TRACE_FILE).read_text(encoding="utf-8").splitlines():
        record = {k: v for k, v in json.loads(line).items() if k not in VOLATILE}
        if record["kind"] == "forwards":
            forwards = record
        else:
            records.append(record)
    return [*records, forwards]


def _sweep(results: Path, specs: list[RunSpec], reuse: int) -> tuple[list[dict], dict]:
    runner = Runner(results, workers=1, reuse=reuse)
    return runner.run(specs), runner.retired


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    base = tmp_path_factory.mktemp("reuse")
    project = base / "project"
    project.mkdir()
    specs = _hostile_specs(project) + _loop_specs()
    isolated = _sweep(base / "isolated", specs, reuse=1)
    reused = _sweep(base / "reused", specs, reuse=8)
    return isolated, reused


@pytest.mark.slow
def test_reused_runs_equal_isolated_runs_byte_for_byte(both):
    (isolated, _), (reused, _) = both
    assert [row["key"] for row in isolated] == [row["key"] for row in reused]
    for one, other in zip(isolated, reused, strict=True):
        name = f"{one['loop']} {one['identity']} seed {one['seed']}"
        for field in ("status", "exc_type", "exc_message", "exit_code", "steps", "reached"):
            assert one[field] == other[field], (name, field, one[field], other[field])
        assert one["backward_calls"] == other["backward_calls"], name
        assert _comparable(one["run_dir"]) == _comparable(other["run_dir"]), name
        out = [Path(row["run_dir"], "stdout.txt").read_bytes() for row in (one, other)]
        assert out[0] == out[1], name


@pytest.mark.slow
def test_processes_were_reused_and_retired_where_they_must(both):
    (isolated, _), (reused, retired) = both
    assert {row["start_method"] for row in isolated} == {"fork"}
    by_loop = {row["loop"]: row for row in reused}
    methods = [row["start_method"] for row in reused]
    assert methods.count("reused") >= len(methods) // 3, methods
    # Put back, so the next run reuses the process (and still equals its isolated twin).
    for name in ("global_state", "project_module"):
        after = list(HOSTILE).index(name)
        assert by_loop[f"plain_after_{after}"]["start_method"] == "reused", name
    # Not put back: the process retires after the run, the next run is a fresh fork.
    for name in ("monkeypatch", "leak", "crash", "segfault", "os_exit", "hang"):
        after = list(HOSTILE).index(name)
        assert by_loop[f"plain_after_{after}"]["start_method"] == "fork", name
    assert any("attributes" in reason for reason in retired), retired
    assert any("memory" in reason for reason in retired), retired
    statuses = {name: by_loop[name]["status"] for name in HOSTILE}
    assert statuses["crash"] == "crash" and statuses["segfault"] == "crash"
    assert statuses["hang"] == "timeout" and statuses["global_state"] == "ok"
