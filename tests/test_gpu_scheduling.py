"""GPU placement without a GPU: which GPUs are visible, how runs fill them, and that each
run starts with its own ``CUDA_VISIBLE_DEVICES`` (a fake device list; no CUDA is used)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from experiments.harness import gpu
from experiments.harness.runner import run_sweep
from experiments.harness.spec import RunSpec

# Prints the GPU it was given and when it held it, so the test can check placement and
# overlap from the run's stdout; one CPU backward makes it a training run (status ok).
PROBE = """\
import os, time
import torch
start = time.time()
weight = torch.zeros(1, requires_grad=True)
(weight * 2).sum().backward()
time.sleep(0.4)
print("probe", os.environ.get("CUDA_VISIBLE_DEVICES"), start, time.time(), flush=True)
"""


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0,1,2", ["0", "1", "2"]),
        (" 3 , 1 ", ["3", "1"]),
        ("", []),
        ("-1", []),
        ("0,-1,2", ["0"]),  # CUDA stops at the first invalid entry
        ("GPU-8f1c,MIG-2a", ["GPU-8f1c", "MIG-2a"]),
        ("nonsense,0", []),
    ],
)
def test_visible_devices_are_read_as_cuda_reads_them(value, expected):
    assert gpu.parse_visible_devices(value) == expected
    assert gpu.visible_gpus({gpu.VISIBLE_DEVICES: value}) == expected


def test_without_the_variable_a_forked_child_counts_and_this_process_stays_cuda_free():
    import torch

    # No GPU on a CPU machine; with one, the child's count. Either way, not initialised here.
    assert gpu.visible_gpus({}) == [str(i) for i in range(gpu._count_in_a_child())]
    assert not torch.cuda.is_initialized()


def test_only_a_bare_cuda_device_is_spread():
    assert gpu.spreads_over_gpus("cuda")
    assert not gpu.spreads_over_gpus("cuda:1")
    assert not gpu.spreads_over_gpus("cpu")


def test_slots_fill_gpus_evenly_then_refuse_and_take_back():
    slots = gpu.GpuSlots(["0", "1", "2"], runs_per_gpu=2)
    assert slots.capacity == 6
    taken = [slots.acquire() for _ in range(6)]
    assert taken[:3] == ["0", "1", "2"]  # one on each before a second on any
    assert Counter(taken) == {"0": 2, "1": 2, "2": 2}
    assert slots.acquire() is None
    slots.release("1")
    assert slots.acquire() == "1"
    with pytest.raises(ValueError, match="no run to release"):
        gpu.GpuSlots(["0"]).release("0")


@pytest.mark.parametrize(
    ("gpus", "runs_per_gpu", "message"),
    [([], 8, "no GPU is visible"), (["0"], 0, "at least 1"), (["0", "0"], 2, "listed twice")],
)
def test_slots_reject_impossible_settings(gpus, runs_per_gpu, message):
    with pytest.raises(ValueError, match=message):
        gpu.GpuSlots(gpus, runs_per_gpu)


def _probe_specs(tmp_path: Path, count: int, device: str) -> list[RunSpec]:
    script = tmp_path / "probe.py"
    script.write_text(PROBE, encoding="utf-8")
    return [
        RunSpec(script=str(script), source=PROBE, argv=(f"--run={i}",), device=device, seed=i)
        for i in range(count)
    ]


def _probe_output(row: dict) -> tuple[str, float, float]:
    line = (Path(row["run_dir"]) / "stdout.txt").read_text().split()
    assert line[0] == "probe", line
    return line[1], float(line[2]), float(line[3])


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_cuda_runs_get_one_gpu_each_and_never_more_than_runs_per_gpu(tmp_path, start_method):
    specs = _probe_specs(tmp_path, 6, "cuda")
    rows = run_sweep(
        specs,
        tmp_path / "results",
        workers=16,  # capped by the GPU places (2 GPUs x 2), not by this number
        start_method=start_method,
        gpus=["3", "5"],
        runs_per_gpu=2,
    )
    assert [row["status"] for row in rows] == ["ok"] * 6
    placed = [_probe_output(row) for row in rows]
    # How the last two spread depends on which runs end first; the first four fill both.
    assert {gpu_id for gpu_id, _, _ in placed} == {"3", "5"}
    for gpu_id in ("3", "5"):
        spans = [(start, end) for placed_on, start, end in placed if placed_on == gpu_id]
        assert _most_at_once(spans) <= 2
    assert _most_at_once([(start, end) for _, start, end in placed]) <= 4


def test_cpu_runs_and_explicit_cuda_indices_keep_the_parents_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(gpu.VISIBLE_DEVICES, raising=False)
    specs = _probe_specs(tmp_path, 1, "cpu") + _probe_specs(tmp_path, 1, "cuda:1")
    rows = run_sweep(specs, tmp_path / "results", workers=2, gpus=["0", "1"])
    assert [row["status"] for row in rows] == ["ok", "ok"]
    assert [_probe_output(row)[0] for row in rows] == ["None", "None"]
    assert os.environ.get(gpu.VISIBLE_DEVICES) is None  # the parent's own stays untouched


def test_cuda_sweeps_default_to_runs_per_gpu_on_every_gpu_capped_by_cores(monkeypatch):
    from experiments.compose import compose
    from experiments.harness.runner import Runner
    from experiments.resources import workers_for

    cfg = compose(["device=cuda", "budget.runs_per_gpu=3"])
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(64)))
    assert workers_for(cfg, ["0", "1"]) == 6
    assert workers_for(compose(["device=cuda"]), ["0"]) == gpu.DEFAULT_RUNS_PER_GPU
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    assert workers_for(cfg, ["0", "1"]) == 4  # each run needs a core as well as a GPU place
    assert workers_for(compose(["device=cuda", "budget.workers=2"]), ["0", "1"]) == 2
    assert Runner("unused", workers=16, gpus=["0"], runs_per_gpu=3).workers == 3
    assert Runner("unused", workers=16).workers == 16  # no GPUs given: no cap


def test_side_by_side_jobs_start_filling_different_gpus():
    gpus = ["0", "1", "2"]
    firsts = [gpu.GpuSlots(gpu.rotated(gpus, job)).acquire() for job in range(4)]
    assert firsts == ["0", "1", "2", "0"]
    assert gpu.rotated([], 5) == []
