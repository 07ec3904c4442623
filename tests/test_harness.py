"""The harness on real processes: one run end to end, telemetry, mutants, the cache."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from experiments.harness import RunSpec, load_results, run_dir, run_sweep
from experiments.harness import status as rules
from experiments.harness.runner import Budget
from experiments.trace import RESULT_FIELDS, STATUSES, read_trace
from mutations.registry import get_operator
from mutator import SourceFile

SCRIPTS = Path(__file__).parent / "scripts"


def spec_for(name: str, *argv: str, seed: int = 0, **fields) -> RunSpec:
    path = SCRIPTS / f"{name}.py"
    return RunSpec(
        script=str(path), source=path.read_text(), argv=argv, seed=seed, loop=name, **fields
    )


def mutant_spec(operator: str, seed: int = 0, sample_every: int = 20) -> RunSpec:
    path = SCRIPTS / "train_tiny.py"
    source = SourceFile.from_path(str(path))
    (site,) = source.find_sites([get_operator(operator)])
    mutant = source.apply([site])
    return RunSpec(
        script=str(path),
        source=mutant.source,
        argv=("--epochs", "2"),
        seed=seed,
        loop="train_tiny",
        mutant={**mutant.manifest_entry(), "diff": mutant.diff},
        sample_every=sample_every,
    )


def records(row: dict, kind: str) -> list[dict]:
    return [r for r in read_trace(row["run_dir"]) if r["kind"] == kind]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One sweep shared by the tests below: a reference, two mutants, the mode script."""
    results = tmp_path_factory.mktemp("results")
    original = (SCRIPTS / "train_tiny.py").read_bytes()
    specs = [
        spec_for("train_tiny", "--epochs", "2", sample_every=1),
        mutant_spec("drop_zero_grad"),
        mutant_spec("zero_grad_after_backward", sample_every=1),
        spec_for("mode_mixups"),
        spec_for("train_tiny", "--epochs", "2", "--bogus"),
        RunSpec(
            script=str(SCRIPTS / "train_tiny.py"),
            source="",
            loop="train_tiny",
            mutant={"identity": "train_tiny.py::main::broken#0"},
            invalid_reason="engine bug: mutant does not compile",
        ),
    ]
    progress: list[tuple[int, int, int, int]] = []
    rows = run_sweep(specs, results, workers=2, progress=lambda *a: progress.append(a))
    assert (SCRIPTS / "train_tiny.py").read_bytes() == original  # mutants ran elsewhere
    return results, specs, rows, progress


def test_every_run_has_one_complete_result_row(sweep):
    results, specs, rows, progress = sweep
    assert len(rows) == len(specs)
    for row in rows:
        assert set(RESULT_FIELDS) <= set(row), set(RESULT_FIELDS) - set(row)
        assert row["status"] in STATUSES
        assert (Path(row["run_dir"]) / "result.json").exists()
    assert progress[-1] == (len(specs), len(specs), 0, 2)  # bogus argv + engine failure
    # sorted by run id, then key (two runs may share a run id: same seed, other argv)
    assert [row["key"] for row in load_results(results)] == [
        row["key"] for row in sorted(rows, key=lambda r: (r["run_id"], r["key"]))
    ]


def test_reference_run_trace_and_row(sweep):
    row = sweep[2][0]
    assert row["status"] == "ok" and row["exc_type"] is None and row["exit_code"] == 0
    assert row["identity"] == "none" and row["run_id"] == "train_tiny/none/seed0/cpu"
    assert row["steps"] == 16 and row["backward_calls"] == 16  # 2 epochs x 8 batches
    assert row["train_forwards"] == 16 and row["eval_forwards"] == 2
    assert row["start_method"] == "fork" and row["peak_rss_mb"] > 10
    kinds = [r["kind"] for r in read_trace(row["run_dir"])]
    assert kinds[0] == "start" and kinds[-1] == "end"
    steps = records(row, "step")
    assert [s["i"] for s in steps] == list(range(1, 17))
    assert all(s["grad_norm"] > 0 and 0 < s["update_ratio"] < 1 for s in steps)
    assert all(s["rss_mb"] > 10 for s in steps)
    losses = [r["loss"] for r in records(row, "backward")]
    assert len(losses) == 16 and losses[-1] < losses[0]
    assert [r["loss"] for r in records(row, "loss_fn")][:16] == losses  # one per training loss
    reports = records(row, "report")
    assert [r["epoch"] for r in reports] == [0, 1] and reports[1]["val_loss"] < 0.69
    assert "epoch 1 val_loss" in (Path(row["run_dir"]) / "stdout.txt").read_text()


def test_mutant_rows_carry_identity_and_diff(sweep):
    reference, dropped = sweep[2][:2]
    assert dropped["identity"] == "train_tiny.py::main::drop_zero_grad#0"
    assert dropped["operators"] == ["drop_zero_grad"] and dropped["categories"] == ["gradient"]
    assert "-            optimizer.zero_grad()" in dropped["diff"]
    assert dropped["sha256"] != reference["sha256"]
    ran = (Path(dropped["run_dir"]) / "mutant.py").read_text()
    assert "zero_grad" not in ran
    assert dropped["status"] == "ok"


def test_zero_grad_after_backward_shows_no_update(sweep):
    moved = sweep[2][2]
    steps = records(moved, "step")
    assert len(steps) == 16
    assert all(s["grad_norm"] == 0.0 and s["update_ratio"] == 0.0 for s in steps)


def test_forward_counters_tell_train_and_eval_forwards_apart(sweep):
    row = sweep[2][3]
    assert row["status"] == "ok"
    assert row["train_forwards"] == 3 and row["train_forwards_eval_mode"] == 2
    assert row["eval_forwards"] == 3 and row["eval_forwards_grad"] == 1
    assert row["loss_fn_calls"] == 3 and row["backward_calls"] == 3


def test_bad_arguments_and_engine_failures_are_invalid_rows(sweep):
    bogus, broken = sweep[2][4:6]
    assert bogus["status"] == "invalid" and bogus["exc_type"] == "SystemExit"
    assert bogus["exit_code"] == 2
    assert "unrecognized arguments" in (Path(bogus["run_dir"]) / "stderr.txt").read_text()
    assert broken["status"] == "invalid" and "does not compile" in broken["exc_message"]
    assert not (Path(broken["run_dir"]) / "trace.jsonl").exists()


def test_unchanged_sweep_reruns_nothing(sweep):
    results, specs, rows, _ = sweep
    stamps = {row["key"]: os.stat(Path(row["run_dir"]) / "result.json").st_mtime_ns for row in rows}
    again = run_sweep(specs, results, workers=2)
    assert all(row["cached"] for row in again)
    assert [row["key"] for row in again] == [row["key"] for row in rows]
    for row in again:
        assert os.stat(Path(row["run_dir"]) / "result.json").st_mtime_ns == stamps[row["key"]]


def test_stale_folder_is_cleared_and_rerun(tmp_path):
    spec = spec_for("train_tiny", "--epochs", "1")
    folder = run_dir(tmp_path, spec.key)
    folder.mkdir(parents=True)
    (folder / "trace.jsonl").write_text('{"kind": "start", "t": 0}\n{"kind": "backw')
    (folder / "leftover.txt").write_text("from a killed sweep")
    (row,) = run_sweep([spec], tmp_path, workers=1)
    assert row["status"] == "ok" and not row["cached"]
    assert not (folder / "leftover.txt").exists()
    assert sum(r["kind"] == "start" for r in read_trace(folder)) == 1


def test_same_spec_twice_in_one_sweep_runs_once(tmp_path):
    spec = spec_for("train_tiny", "--epochs", "1")
    rows = run_sweep([spec, spec], tmp_path, workers=2)
    assert len(rows) == 1 and len(load_results(tmp_path)) == 1


def test_same_seed_gives_bitwise_identical_trace_and_spawn_matches_fork(tmp_path):
    spec = spec_for("train_tiny", "--epochs", "2", "--seed", "3", seed=3)
    first = run_sweep([spec], tmp_path / "a", workers=1)[0]
    second = run_sweep([spec], tmp_path / "b", workers=1)[0]
    fresh = run_sweep([spec], tmp_path / "c", workers=1, start_method="spawn")[0]
    assert fresh["start_method"] == "spawn" and first["start_method"] == "fork"

    def curve(row):
        return [
            (r["kind"], r.get("loss"), r.get("grad_norm"), r.get("update_ratio"))
            for r in read_trace(row["run_dir"])
            if r["kind"] in ("backward", "loss_fn", "step")
        ]

    assert len(curve(first)) == 48
    sampled = [r["i"] for r in records(first, "step") if r["grad_norm"] is not None]
    assert sampled == [1]  # step 1, then every 20th by default
    assert records(first, "step")[0]["update_ratio"] > 0
    assert curve(first) == curve(second) == curve(fresh)
    other = spec_for("train_tiny", "--epochs", "2", "--seed", "4", seed=4)
    other_seed = run_sweep([other], tmp_path / "a")[0]
    assert curve(other_seed) != curve(first)


def test_parent_never_initialises_cuda(sweep):
    import torch

    assert not torch.cuda.is_initialized()


def test_deadline_comes_from_the_reference_run(tmp_path):
    budget = Budget(factor=3.0, slack_s=2.0, default_timeout_s=123.0)
    reference = spec_for("train_tiny", "--epochs", "1")
    rows = run_sweep([mutant_spec("drop_zero_grad"), reference], tmp_path, budget=budget)
    mutant_row, reference_row = rows
    assert reference_row["timeout_s"] == 123.0
    expected = 3.0 * reference_row["wall_s"] + 2.0
    assert mutant_row["timeout_s"] == pytest.approx(expected, abs=1e-3)


# -- the status rules alone --------------------------------------------------------------
TRAINED = {"steps": 3, "backward_calls": 3}


@pytest.mark.parametrize(
    ("error", "counters", "nonfinite", "expected"),
    [
        (None, TRAINED, False, "ok"),
        (None, TRAINED, True, "nan"),
        (None, {}, False, "invalid"),
        (SystemExit(0), TRAINED, False, "ok"),
        (SystemExit(2), {}, False, "invalid"),
        (SystemExit(2), TRAINED, False, "crash"),
        (ValueError("x"), TRAINED, True, "crash"),
        (ValueError("x"), {}, False, "crash"),  # fails at its first forward: a crash
        (SyntaxError("x"), {}, False, "invalid"),
        (MemoryError(), TRAINED, False, "oom"),
        (RuntimeError("CUDA out of memory. Tried to allocate"), TRAINED, False, "oom"),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory"), {}, False, "oom"),
    ],
)
def test_status_after_the_script_ends(error, counters, nonfinite, expected):
    assert rules.after_exception(error, counters, nonfinite)[0] == expected


def test_status_after_an_abrupt_end():
    segv = signal.SIGSEGV.value  # wait status of a signalled process is the signal number
    assert rules.after_abrupt_end(segv, TRAINED, False)[:2] == ("crash", "SIGSEGV")
    assert rules.after_abrupt_end(signal.SIGKILL.value, TRAINED, False)[0] == "killed"
    assert rules.after_abrupt_end(3 << 8, TRAINED, False)[::3] == ("crash", 3)
    assert rules.after_abrupt_end(3 << 8, {}, False)[0] == "invalid"
    assert rules.after_abrupt_end(0, TRAINED, True)[0] == "nan"


def test_result_json_is_plain_json(sweep):
    for row in sweep[2]:
        text = (Path(row["run_dir"]) / "result.json").read_text()
        assert json.loads(text)["key"] == row["key"]
        assert "NaN" not in text


def test_run_without_telemetry_has_no_hooks_and_its_own_key(tmp_path):
    plain = spec_for("train_tiny", "--epochs", "1", telemetry=False)
    assert plain.key != spec_for("train_tiny", "--epochs", "1").key
    (row,) = run_sweep([plain], tmp_path)
    assert row["status"] == "ok" and row["telemetry"] is False and row["steps"] == 0
    kinds = {r["kind"] for r in read_trace(row["run_dir"])}
    assert kinds == {"start", "report", "end"}
