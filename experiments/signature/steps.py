"""Features of the training steps: gradient norm and update ratio, memory growth and time
per step (``step`` records), the hooks' counters (optimizer steps, backward calls, forwards
in the wrong mode), and the run's cost (CPU time, step cost)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from experiments.signature.values import Feature, Kinds, column, floats


def step_features(steps: list[dict[str, Any]]) -> dict[str, Feature]:
    out: dict[str, Feature] = {}
    if not steps:
        return out
    index = floats([s.get("i", k + 1) for k, s in enumerate(steps)])
    grad = column(steps, "grad_norm")
    grad_ok = np.isfinite(grad)
    if grad_ok.any():
        out["grad_norm_median"] = float(np.median(grad[grad_ok]))
        out["grad_norm_max"] = float(np.max(grad[grad_ok]))
        positive = grad_ok & (grad > 0)
        if positive.sum() >= 3:
            slope = np.polyfit(index[positive], np.log10(grad[positive]), 1)[0]
            out["grad_norm_trend"] = float(slope * 100.0)
    ratio = column(steps, "update_ratio")
    if np.isfinite(ratio).any():
        out["update_ratio_median"] = float(np.median(ratio[np.isfinite(ratio)]))
    memory = column(steps, "cuda_mb")
    if not np.isfinite(memory).any():
        memory = column(steps, "rss_mb")
    # The first tenth is warm-up (allocator pools, lazy imports), not growth.
    tail = slice(len(steps) // 10, None)
    mem_x, mem_y = index[tail], memory[tail]
    mem_ok = np.isfinite(mem_y)
    if mem_ok.sum() >= 3 and np.ptp(mem_x[mem_ok]) > 0:
        out["mem_growth_mb_per_step"] = float(np.polyfit(mem_x[mem_ok], mem_y[mem_ok], 1)[0])
    times = column(steps, "step_time")[1:]
    if np.isfinite(times).any():
        out["time_per_step"] = float(np.median(times[np.isfinite(times)]))
    return out


def counter_features(kinds: Kinds, result: Mapping[str, Any]) -> dict[str, Feature]:
    counters: dict[str, Any] = {}
    # The end record, written last, holds the final counters; the result row overrides both.
    for record in [*kinds.get("forwards", ()), *kinds.get("end", ())]:
        counters.update({k: v for k, v in record.items() if isinstance(v, int | float)})
    for key in (
        "train_forwards",
        "train_forwards_eval_mode",
        "eval_forwards",
        "eval_forwards_grad",
    ):
        if result.get(key) is not None:
            counters[key] = result[key]
    out: dict[str, Feature] = {}
    steps = result.get("steps")
    if steps is None:
        steps = max((r.get("i", 0) for r in kinds.get("step", ())), default=0)
    out["optimizer_steps"] = int(steps)
    backward = result.get("backward_calls")
    out["backward_calls"] = int(
        backward if backward is not None else len(kinds.get("backward", ()))
    )
    train = counters.get("train_forwards")
    if train:
        out["eval_mode_train_frac"] = counters.get("train_forwards_eval_mode", 0) / train
    if "eval_forwards_grad" in counters:
        out["eval_forwards_grad"] = int(counters["eval_forwards_grad"])
    evals = counters.get("eval_forwards")
    if evals is not None:
        out["eval_forwards"] = int(evals)
    if evals:
        out["eval_grad_frac"] = counters.get("eval_forwards_grad", 0) / evals
    for key in ("peak_rss_mb", "wall_s"):
        if result.get(key) is not None:
            out[key] = float(result[key])
    return out


def cost_features(kinds: Kinds, source: str) -> dict[str, Feature]:
    out: dict[str, Feature] = {}
    end = kinds.get("end") or [{}]
    cpu = end[-1].get("cpu_s")
    if isinstance(cpu, int | float) and math.isfinite(cpu):
        out["cpu_time_s"] = float(cpu)
    # Per batch, not per optimizer step: a mutant that steps once per epoch does the same
    # work per batch, and its one long step interval would read as a cost.
    times = floats([r.get("t") for r in kinds.get(source, [])])
    gaps = np.diff(times[np.isfinite(times)])
    if gaps.size >= 2:
        out["step_cost_s"] = float(np.median(gaps)) * gaps.size
    return out
