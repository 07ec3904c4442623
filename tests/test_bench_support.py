"""Helpers for the benchmark tests: synthetic run folders in the format of experiments/trace.py.

Kept importable (``from test_bench_support import ...``) and tested here so a drift of the
trace format shows up as a failure of the writer, not as puzzling scorer numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.trace import RESULT_FILE, TRACE_FILE, encode_float, read_trace

CLEAN_SEED_LOSS = 2.3


def synthetic_records(
    losses: Sequence[float],
    *,
    grad_norm: float | None = 1.0,
    update_ratio: float | None = 1e-3,
    eval_mode_fraction: float = 0.0,
    eval_forwards_grad: int = 0,
    rss_start: float = 300.0,
    rss_per_step: float = 0.0,
    steps: bool = True,
) -> list[dict[str, Any]]:
    """A trace: one backward and (optionally) one optimizer step per loss value."""
    records: list[dict[str, Any]] = [
        {"kind": "start", "t": 0.0, "pid": 1, "device": "cpu", "torch": "x", "seed": 0, "argv": []}
    ]
    step = 0
    for index, loss in enumerate(losses):
        records.append(
            {
                "kind": "backward",
                "t": index * 0.01,
                "i": index,
                "loss": encode_float(loss),
                "step": step,
            }
        )
        if steps:
            step += 1
            records.append(
                {
                    "kind": "step",
                    "t": index * 0.01,
                    "i": step,
                    "grad_norm": grad_norm,
                    "update_ratio": update_ratio,
                    "rss_mb": rss_start + rss_per_step * step,
                    "cuda_mb": None,
                    "step_time": 0.01,
                }
            )
    train = len(losses)
    records.append(
        {
            "kind": "forwards",
            "t": 1.0,
            "train_forwards": train,
            "train_forwards_eval_mode": int(train * eval_mode_fraction),
            "eval_forwards": 10,
            "eval_forwards_grad": eval_forwards_grad,
        }
    )
    records.append({"kind": "end", "t": 1.0, "status": "ok"})
    return records


def decreasing(n: int = 120, start: float = CLEAN_SEED_LOSS, seed: int = 0) -> list[float]:
    """A healthy, noisy, decreasing loss curve."""
    return [start * math.exp(-i / 40) + 0.01 * ((i * 7 + seed) % 5) for i in range(n)]


def write_run(
    results_dir: Path,
    key: str,
    records: list[dict[str, Any]],
    *,
    loop: str = "toy",
    identity: str = "none",
    operators: Sequence[str] = (),
    categories: Sequence[str] = (),
    mutant_lines: Sequence[int] = (),
    seed: int = 0,
    status: str = "ok",
) -> Path:
    """A run folder ``<results_dir>/runs/<key[:2]>/<key>`` with trace.jsonl and result.json."""
    folder = results_dir / "runs" / key[:2] / key
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / TRACE_FILE, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    steps = max((r["i"] for r in records if r["kind"] == "step"), default=0)
    result = {
        "key": key,
        "run_id": f"{loop}/{identity}/seed{seed}/cpu",
        "loop": loop,
        "identity": identity,
        "operators": list(operators),
        "categories": list(categories),
        "params": [],
        "lines": list(mutant_lines),
        "mutant_lines": list(mutant_lines),
        "seed": seed,
        "device": "cpu",
        "status": status,
        "steps": steps,
        "backward_calls": sum(1 for r in records if r["kind"] == "backward"),
    }
    (folder / RESULT_FILE).write_text(json.dumps(result), encoding="utf-8")
    return folder


def test_written_runs_read_back_through_the_trace_reader(tmp_path: Path):
    folder = write_run(tmp_path, "ab12", synthetic_records([2.0, float("nan")]), identity="m#0")
    records = list(read_trace(folder))
    assert [r["kind"] for r in records] == [
        "start",
        "backward",
        "step",
        "backward",
        "step",
        "forwards",
        "end",
    ]
    assert records[3]["loss"] == "nan"
    result = json.loads((folder / RESULT_FILE).read_text())
    assert result["identity"] == "m#0" and result["steps"] == 2
    assert folder == tmp_path / "runs" / "ab" / "ab12"
