"""The probes of issue 15: a hostile or sloppy script, or a user's mistake, against the
harness and the CLI. Real processes throughout (runs, sweeps, the CLI), no mocks.

Each probe takes a fresh folder and returns ``(observed, held)``: what happened, in a
few words, and whether that is what ``expected`` says. ``tests/test_hostile_scripts.py``
asserts every probe holds; ``benchmarks/reliability.py`` writes them as the table of
``docs/reliability.md``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import stopping

from experiments.harness import RunSpec, load_results, run_sweep
from experiments.harness.runner import Budget
from experiments.trace import RESULT_FILE, TRACE_FILE, read_trace

ROOT = Path(__file__).resolve().parent.parent
Outcome = tuple[str, bool]
RUN = "experiments.run"
# Issue 21: Ctrl-C or SIGTERM ends a command within 5 s, also on a busy machine.
STOP_GRACE_S = 5.0

# A few steps of real training, so a run that ends well is ``ok``.
TRAIN = """
import torch
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range({steps}):
    optimizer.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
"""


@dataclass(frozen=True)
class Probe:
    name: str
    expected: str
    run: Callable[[Path], Outcome]
    slow: bool = False


def _spec(folder: Path, name: str, body: str, **fields) -> RunSpec:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return RunSpec(script=str(path), source=path.read_text(), loop=name, cwd=str(folder), **fields)


def _sweep(folder: Path, specs: list[RunSpec], **options) -> list[dict]:
    return run_sweep(specs, folder / "results", workers=2, **options)


def _cli(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _in_process(main: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def _one_line_exit_2(code: int, stderr: str, written: list[Path] = ()) -> Outcome:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    leftovers = [str(path) for path in written if path.exists()]
    shown = lines[-1] if lines else "(nothing on stderr)"
    held = code == 2 and len(lines) == 1 and "Traceback" not in stderr and not leftovers
    extra = f"; wrote {leftovers}" if leftovers else ""
    return f"exit {code}, {len(lines)} line(s): {shown[:150]}{extra}", held


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


# -- 1. output caps ---------------------------------------------------------------------
def chatty_stdout(folder: Path) -> Outcome:
    spec = _spec(
        folder,
        "chatty",
        "import sys\nwhile True:\n    sys.stdout.write('x' * 1023 + '\\n')\n",
        timeout_s=3.0,
    )
    (row,) = _sweep(folder, [spec], budget=Budget(output_cap_mb=1.0))
    stdout = Path(row["run_dir"]) / "stdout.txt"
    size, dropped = stdout.stat().st_size, row["output_dropped"]["stdout.txt"]
    text = stdout.read_bytes()
    held = size < 1.1 * 2**20 and dropped > 0 and b"bytes of output dropped" in text
    return (
        f"{row['status']}; stdout.txt {size / 2**20:.2f} MB, {dropped / 2**20:.0f} MB dropped",
        held,
    )


def trace_cap(folder: Path) -> Outcome:
    spec = _spec(folder, "tight", TRAIN.format(steps=20000))
    (row,) = _sweep(folder, [spec], budget=Budget(trace_cap_mb=0.1))
    size = (Path(row["run_dir"]) / TRACE_FILE).stat().st_size
    records = list(read_trace(row["run_dir"]))
    held = (
        row["status"] == "ok"
        and size < 0.25 * 2**20
        and (row["trace_dropped"] or 0) > 0
        and records[-1]["kind"] == "end"
    )
    return (
        f"{row['status']}; trace {size / 1024:.0f} KB, {row['trace_dropped']} records thinned, "
        f"{row['steps']} steps counted"
    ), held


# -- 2. the harness's files and rows ----------------------------------------------------
FORGER = """
import json, os
run_dir = os.path.dirname(os.readlink("/proc/self/fd/1"))  # the run folder, found anyway
row = {"status": "ok", "key": os.path.basename(run_dir)}
for place in ("result.json", os.path.join(run_dir, "result.json")):
    with open(place, "w") as handle:
        json.dump(row, handle)
with open("trace.jsonl", "a") as handle:
    handle.write(json.dumps({"kind": "end", "status": "ok"}) + "\\n")
raise RuntimeError("the real outcome")
"""


def forged_result(folder: Path) -> Outcome:
    spec = _spec(folder, "forger", FORGER)
    (row,) = _sweep(folder, [spec])
    on_disk = json.loads((Path(row["run_dir"]) / RESULT_FILE).read_text())
    held = (
        row["status"] == "crash"
        and row["exc_type"] == "RuntimeError"
        and on_disk["status"] == "crash"
        and "seal" in on_disk
    )
    return f"row {row['status']} ({row['exc_type']}); result.json says {on_disk['status']}", held


KILLER = """
import json, os, signal
run_dir = os.path.dirname(os.readlink("/proc/self/fd/1"))
with open(os.path.join(run_dir, "trace.jsonl"), "a") as handle:
    handle.write(json.dumps({"kind": "end", "status": "ok", "steps": 9}) + "\\n")
os.kill(os.getpid(), signal.SIGKILL)
"""


def forged_end_record(folder: Path) -> Outcome:
    (row,) = _sweep(folder, [_spec(folder, "end_forger", KILLER)])
    return f"{row['status']} ({row['exc_type']})", row["status"] == "killed"


def tampered_cache(folder: Path) -> Outcome:
    spec = _spec(folder, "crasher", TRAIN.format(steps=3) + "raise ValueError('late')\n")
    (first,) = _sweep(folder, [spec])
    path = Path(first["run_dir"]) / RESULT_FILE
    observed = []
    for name, change in (
        ("status flipped to ok", lambda row: {**row, "status": "ok"}),
        ("no status", lambda row: {k: v for k, v in row.items() if k != "status"}),
        ("a list", lambda row: [row]),
    ):
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
        (again,) = _sweep(folder, [spec])
        observed.append((name, again["cached"], again["status"]))
    held = all(not cached and status == "crash" for _, cached, status in observed)
    shown = "; ".join(f"{name}: rerun={not cached}, {status}" for name, cached, status in observed)
    return shown, held


def report_skips_junk(folder: Path) -> Outcome:
    from experiments.catalog.report_cmd import report_main

    _sweep(folder, [_spec(folder, "fine", TRAIN.format(steps=5))])
    junk = folder / "results" / "runs" / "zz" / "zzjunk"
    junk.mkdir(parents=True)
    (junk / RESULT_FILE).write_text(json.dumps({"status": 3, "key": ["x"]}))
    code, stderr = _in_process(report_main, [str(folder / "results"), "--all-runs"])
    rows = load_results(folder / "results")
    held = code == 0 and "Traceback" not in stderr and len(rows) == 1
    return f"report --all-runs exit {code}, {len(rows)} row(s) loaded", held


# -- 3. transient statuses --------------------------------------------------------------
def transient_retry(folder: Path) -> Outcome:
    hang = "import time\nwhile True:\n    time.sleep(0.1)\n"
    first = _sweep(folder, [_spec(folder, "hang", hang, timeout_s=1.0)])[0]
    same = _sweep(folder, [_spec(folder, "hang", hang, timeout_s=1.0)])[0]
    longer = _sweep(folder, [_spec(folder, "hang", hang, timeout_s=1.5)])[0]
    asked = _sweep(folder, [_spec(folder, "hang", hang, timeout_s=1.5)], retry_failed=True)[0]
    held = (
        first["status"] == "timeout"
        and same["cached"]
        and not longer["cached"]
        and longer["timeout_s"] == 1.5
        and not asked["cached"]
    )
    return (
        f"same budget cached={same['cached']}; longer deadline rerun={not longer['cached']}; "
        f"retry_failed rerun={not asked['cached']}"
    ), held


def invalid_budget(folder: Path) -> Outcome:
    results = folder / "results"
    outcomes = []
    for override in ("budget.timeout_s=-1", "budget.mem_cap_mb=-5", "budget.timeout_factor=0"):
        done = _cli(
            ["-m", "experiments.run", "loop=mlp_digits", override, f"results_dir={results}"],
            folder,
        )
        outcomes.append(_one_line_exit_2(done.returncode, done.stderr, [results]))
    return outcomes[0][0], all(held for _, held in outcomes)


# -- 4. descendants ---------------------------------------------------------------------
SPAWNER = """
import os, subprocess, sys, time
daemon = subprocess.Popen(["sleep", "120"], start_new_session=True)
print("pid", daemon.pid, flush=True)
if os.fork() == 0:  # a double-forked daemon: its parent exits, it calls setsid
    os.setsid()
    if os.fork() == 0:
        print("pid", os.getpid(), flush=True)
        time.sleep(120)
    os._exit(0)
time.sleep(0.5)
"""


def setsid_grandchildren(folder: Path) -> Outcome:
    (row,) = _sweep(folder, [_spec(folder, "spawner", SPAWNER)])
    lines = (Path(row["run_dir"]) / "stdout.txt").read_text().split()
    pids = [int(lines[i + 1]) for i, word in enumerate(lines) if word == "pid"]
    time.sleep(0.2)
    alive = [pid for pid in pids if _alive(pid)]
    for pid in alive:  # never leave them behind, whatever the outcome
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return f"{len(pids)} setsid descendants started, {len(alive)} alive after the run", bool(
        len(pids) == 2 and not alive
    )


HOG = """
import subprocess, sys, time
grab = "x = b'x' * (220 * 2**20); import time; time.sleep(60)"
children = [subprocess.Popen([sys.executable, "-c", grab]) for _ in range(3)]
time.sleep(30)
"""


def memory_of_descendants(folder: Path) -> Outcome:
    (row,) = _sweep(folder, [_spec(folder, "hog", HOG, mem_cap_mb=300, timeout_s=25.0)])
    return f"{row['status']} after {row['wall_s']:.1f} s", row["status"] == "oom"


# -- 5. user errors ---------------------------------------------------------------------
def operator_params(folder: Path) -> Outcome:
    from experiments.cli import main

    script = str(ROOT / "reference_loops" / "mlp_digits.py")
    results = []
    for spec in (
        "scale_lr:factor=nan",
        "scale_lr:factor=1e999",
        "change_batch_size:factor=0",
        "adam_eps_too_small:eps=nan",
        "optimizer_partial_params:keep=-1",
        "drop_training_data:fraction=2",
        "dropout_too_high:p=7",
        "label_noise:p=5",
    ):
        out = folder / spec.replace(":", "_")
        code, stderr = _in_process(main, ["mutate", script, "--operator", spec, "--out", str(out)])
        results.append(_one_line_exit_2(code, stderr, [out]))
    failed = [observed for observed, held in results if not held]
    return (failed[0] if failed else f"8/8 rejected, e.g. {results[4][0]}"), not failed


def sweep_user_errors(folder: Path) -> Outcome:
    (folder / "latin1.py").write_bytes("# caf\xe9\nprint('x')\n".encode("latin-1"))
    (folder / "a_file").write_text("not a folder")
    results = folder / "results"
    cases = [
        ["loop=custom", "loop.script=latin1.py", f"results_dir={results}"],
        ["loop=mlp_digits", f"results_dir={folder / 'a_file'}"],
        ["loop=mlp_digits", "budget.nope=1", f"results_dir={results}"],
        ["loop=nope", f"results_dir={results}"],
    ]
    outcomes = []
    for overrides in cases:
        done = _cli(["-m", "experiments.run", *overrides], folder)
        outcomes.append(_one_line_exit_2(done.returncode, done.stderr, [results]))
    failed = [observed for observed, held in outcomes if not held]
    return (failed[0] if failed else f"4/4 one line, e.g. {outcomes[0][0]}"), not failed


def quiz_user_errors(folder: Path) -> Outcome:
    from experiments.catalog.report_cmd import report_main
    from experiments.quiz.cli import quiz_main
    from experiments.quiz.key import ANSWER_FILE, KEY_VERSION

    (folder / "a_file").write_text("x")
    quiz = folder / "quiz"
    quiz.mkdir()
    key = {"version": KEY_VERSION, "loop": "x", "practice": {}, "bugs": [{"rank": 1, "lines": [3]}]}
    (quiz / ANSWER_FILE).write_text(json.dumps(key))  # a sound key: the answers are wrong
    (folder / "answers.txt").write_bytes(b"12 \xff\xfe\n")
    catalog = folder / "results" / "catalog"
    catalog.mkdir(parents=True)
    (folder / "results" / "runs").mkdir()
    (catalog / "sweep.json").write_text('{"keys": 7}')
    outcomes = [
        _one_line_exit_2(*_in_process(quiz_main, ["--out", str(folder / "a_file" / "q")])),
        _one_line_exit_2(*_in_process(quiz_main, ["grade", str(quiz), "--lines", "\u00b2"])),
        _one_line_exit_2(
            *_in_process(quiz_main, ["grade", str(quiz), "--answers", str(folder / "answers.txt")])
        ),
        _one_line_exit_2(*_in_process(report_main_guarded(report_main), [str(folder / "results")])),
    ]
    for damaged in ("{not json", json.dumps({**key, "bugs": [{"rank": 1}]})):
        (quiz / ANSWER_FILE).write_text(damaged)
        outcomes.append(
            _one_line_exit_2(*_in_process(quiz_main, ["grade", str(quiz), "--lines", "3"]))
        )
    failed = [observed for observed, held in outcomes if not held]
    return (failed[0] if failed else f"6/6 one line, e.g. {outcomes[1][0]}"), not failed


def report_main_guarded(report_main: Callable[[list[str]], int]) -> Callable[[list[str]], int]:
    from experiments.cli_support import guarded

    return lambda argv: guarded("trainwreck report", report_main, argv)


def ctrl_c(folder: Path) -> Outcome:
    """Ctrl-C during a run, in a process that inherited SIGINT ignored (a background job of
    a non-interactive shell, e.g. ``python3 -m pytest &``: how these probes once failed)."""
    return _ctrl_c(folder, during_run=True)


def ctrl_c_while_loading(folder: Path) -> Outcome:
    """Ctrl-C one second in, while Hydra and torch are still loading (native imports)."""
    return _ctrl_c(folder, during_run=False)


def _ctrl_c(folder: Path, during_run: bool) -> Outcome:
    (folder / "hang.py").write_text("import time\nwhile True:\n    time.sleep(0.1)\n")
    results = folder / "results"
    args = ["loop=custom", "loop.script=hang.py", f"results_dir={results}"]
    command = stopping.start([*args, "budget.default_timeout_s=60"], folder, "ignored", RUN)
    if during_run:
        started = stopping.wait_for(command, lambda: any(results.glob("runs/*/*/trace.jsonl")))
        time.sleep(0.5)
    else:
        started = True
        time.sleep(1.0)
    stopped = stopping.stop(command, signal.SIGINT, grace_s=STOP_GRACE_S)
    where = "" if started else " (no run had started)"
    held = stopped.code == 130 and "Traceback" not in stopped.stderr and not stopped.leftovers
    return stopped.describe() + where, held


# -- 6. shared folders ------------------------------------------------------------------
def group_readable(folder: Path) -> Outcome:
    from experiments.files import write_text_atomic

    previous = os.umask(0o077)
    try:
        (row,) = _sweep(folder, [_spec(folder, "fine", TRAIN.format(steps=3))])
        write_text_atomic(folder / "sweep.json", "{}")
    finally:
        os.umask(previous)
    modes = {
        "result.json": (Path(row["run_dir"]) / RESULT_FILE).stat().st_mode & 0o777,
        "sweep.json": (folder / "sweep.json").stat().st_mode & 0o777,
    }
    held = all(mode & 0o044 == 0o044 for mode in modes.values())
    return ", ".join(f"{name} {mode:o}" for name, mode in modes.items()) + " under umask 077", held


def permission_denied(folder: Path) -> Outcome:
    from experiments.cli_support import guarded

    def write_into_shared(argv: list[str]) -> int:
        shared = folder / "shared"
        shared.mkdir(exist_ok=True)
        shared.chmod(0o555)
        try:
            (shared / "result.json").write_text("{}")
            if os.geteuid() == 0:  # root writes anyway: the error a user would get
                raise PermissionError(13, "Permission denied", str(shared / "result.json"))
        finally:
            shared.chmod(0o755)
        return 0

    return _one_line_exit_2(
        *_in_process(lambda argv: guarded("trainwreck", write_into_shared, argv), [])
    )


PROBES: tuple[Probe, ...] = (
    Probe("endless stdout (1 MB cap)", "head+tail kept, marked, row says how much", chatty_stdout),
    Probe("tight loop trace (0.1 MB cap)", "trace thinned, end record kept, ok", trace_cap),
    Probe(
        "script writes result.json (relative and via /proc/self/fd/1) and an end record",
        "the harness's own row: crash (RuntimeError)",
        forged_result,
    ),
    Probe("script appends an end record, then SIGKILLs itself", "killed", forged_end_record),
    Probe(
        "result.json edited after the run (status ok, no status, a list)",
        "not trusted: rerun, real status",
        tampered_cache,
    ),
    Probe(
        "junk result.json in the results folder", "report --all-runs skips it", report_skips_junk
    ),
    Probe(
        "timeout, then same budget / longer deadline / retry_failed",
        "cached / rerun / rerun",
        transient_retry,
        slow=True,
    ),
    Probe(
        "budget.timeout_s=-1, mem_cap_mb=-5, timeout_factor=0",
        "exit 2, one line, nothing written",
        invalid_budget,
    ),
    Probe("setsid and double-forked grandchildren", "none outlives the run", setsid_grandchildren),
    Probe("3 children holding 220 MB each, cap 300 MB", "oom", memory_of_descendants),
    Probe(
        "operator params nan, 1e999, 0, out of range",
        "exit 2, one line, nothing written",
        operator_params,
    ),
    Probe(
        "non-UTF-8 script, results_dir a file, unknown key, unknown loop",
        "exit 2, one line, nothing written",
        sweep_user_errors,
    ),
    Probe(
        "quiz --out under a file, --lines ², non-UTF-8 answers, damaged sweep.json, damaged key",
        "exit 2, one line",
        quiz_user_errors,
    ),
    Probe(
        "Ctrl-C in python -m experiments.run (SIGINT inherited ignored)",
        "exit 130 within 5 s, no traceback, no process left",
        ctrl_c,
        slow=True,
    ),
    Probe(
        "Ctrl-C while python -m experiments.run is still loading",
        "exit 130 within 5 s, no traceback, no process left",
        ctrl_c_while_loading,
        slow=True,
    ),
    Probe("result.json and sweep.json under umask 077", "group-readable (0644)", group_readable),
    Probe("PermissionError on a shared folder", "exit 2, one line", permission_denied),
)
