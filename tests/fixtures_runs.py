"""Synthetic run folders in the harness's format (see ``experiments/trace.py``).

The traces look like a small 10-class classifier trained for ``steps`` optimizer steps in
``EPOCHS`` epochs: an exponentially decaying minibatch loss with multiplicative noise,
gradient norms, update ratios, memory, step times, forward counters and one ``report``
per epoch. Behaviours reproduce what known bugs do to such a run, so symptom tests can
check labels against runs whose truth is known by construction.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

N_CLASSES = 10
EPOCHS = 5
LOOP = "toy_mlp"
REFERENCE_SEEDS = (0, 1, 2, 3, 4)
NOOP_SEEDS = (100, 101, 102, 103, 104)
BEHAVIOURS = (
    "healthy",
    "flat",
    "diverge",
    "nan",
    "crash_start",
    "slow",
    "spiky",
    "eval_mode",
    "grad_in_eval",
    "leak_memory",
    "slow_steps",
    "leak_labels",
)


@dataclass
class RunSpec:
    behaviour: str = "healthy"
    seed: int = 0
    loop: str = LOOP
    identity: str = "none"
    operators: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    diff: str = ""
    steps: int = 300
    device: str = "cpu"
    extra_result: dict[str, Any] = field(default_factory=dict)
    # The validation numbers the script reports each epoch (none: a script that prints only
    # its training loss), and where a capture found them (None: a report() call).
    reported: tuple[str, ...] = ("val_loss", "val_metric")
    source: str | None = None

    @property
    def run_id(self) -> str:
        return f"{self.loop}/{self.identity}/seed{self.seed}/{self.device}"


def write_run(results_dir: Path, spec: RunSpec) -> Path:
    """Write one run folder (trace.jsonl + result.json) and return it."""
    folder = Path(results_dir) / "runs" / spec.loop / _slug(spec.identity) / f"seed{spec.seed}"
    folder.mkdir(parents=True, exist_ok=True)
    records, result = simulate(spec)
    with open(folder / "trace.jsonl", "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    (folder / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return folder


def simulate(spec: RunSpec) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(trace records, result row) of one synthetic run."""
    if spec.behaviour not in BEHAVIOURS:
        raise ValueError(f"unknown behaviour {spec.behaviour!r}")
    salt = zlib.crc32(f"{spec.loop}/{spec.identity}/{spec.behaviour}".encode())
    rng = np.random.default_rng([spec.seed, salt])
    clock = _Clock()
    records: list[dict[str, Any]] = [
        {
            "kind": "start",
            "t": 0.0,
            "pid": 1000 + spec.seed,
            "device": spec.device,
            "torch": "2.13.0",
            "seed": spec.seed,
            "argv": ["--seed", str(spec.seed)],
        },
    ]
    status, exc_type, exc_message = "ok", None, None
    if spec.behaviour == "crash_start":
        status, exc_type = "crash", "RuntimeError"
        exc_message = "mat1 and mat2 shapes cannot be multiplied (64x784 and 28x128)"
        records.append({"kind": "end", "t": 0.2, "status": status})
        return records, _result(spec, records, status, exc_type, exc_message, steps=0, backward=0)

    losses = _loss_curve(spec, rng)
    takes_steps = spec.behaviour != "flat"
    per_epoch = max(1, spec.steps // EPOCHS)
    val_batches = 10
    counters = {
        "train_forwards": 0,
        "train_forwards_eval_mode": 0,
        "eval_forwards": 0,
        "eval_forwards_grad": 0,
    }
    rss = 310.0 + rng.normal(0, 2)
    optimizer_steps = 0
    epoch_losses: list[float] = []
    for i, loss in enumerate(losses):
        counters["train_forwards"] += 1
        if spec.behaviour == "eval_mode":
            counters["train_forwards_eval_mode"] += 1
        step_time = 0.004 * (3.0 if spec.behaviour == "slow_steps" else 1.0) * rng.lognormal(0, 0.1)
        records.append(
            {
                "kind": "backward",
                "t": clock.tick(step_time),
                "i": i,
                "loss": _encode(loss),
                "step": optimizer_steps,
            }
        )
        if not math.isfinite(loss):
            status = "nan"
            break
        epoch_losses.append(loss)
        if takes_steps:
            optimizer_steps += 1
            rss += rng.normal(0, 0.05) + (0.25 if spec.behaviour == "leak_memory" else 0.0)
            grad = 1.2 * loss * rng.lognormal(0, 0.15)
            records.append(
                {
                    "kind": "step",
                    "t": clock.now,
                    "i": optimizer_steps,
                    "grad_norm": grad,
                    "update_ratio": 1e-3 * rng.lognormal(0, 0.2),
                    "rss_mb": rss,
                    "cuda_mb": None,
                    "step_time": step_time,
                }
            )
        if (i + 1) % per_epoch == 0:
            epoch = (i + 1) // per_epoch
            counters["eval_forwards"] += val_batches
            if spec.behaviour == "grad_in_eval":
                counters["eval_forwards_grad"] += val_batches
            records.append({"kind": "forwards", "t": clock.now, **counters})
            records.append(_report(spec, rng, epoch, float(np.mean(epoch_losses))))
            epoch_losses = []
    records.append({"kind": "end", "t": clock.now, "status": status, **counters})
    backward = sum(1 for r in records if r["kind"] == "backward")
    result = _result(spec, records, status, exc_type, exc_message, optimizer_steps, backward)
    result.update(counters)
    return records, result


def write_study(
    results_dir: Path,
    mutants: Iterable[tuple[str, str, tuple[str, ...]]] = (
        ("flat", "toy_mlp.py::train::drop_optimizer_step#0", ("drop_optimizer_step",)),
        ("diverge", "toy_mlp.py::main::scale_lr(factor=100.0)#0", ("scale_lr",)),
        ("crash_start", "toy_mlp.py::Net.forward::swap_view#0", ("swap_view",)),
        ("nan", "toy_mlp.py::train::drop_grad_clip#0", ("drop_grad_clip",)),
    ),
    seeds: tuple[int, ...] = REFERENCE_SEEDS,
    noop_seeds: tuple[int, ...] = NOOP_SEEDS,
    steps: int = 300,
    loop: str = LOOP,
    control: str = "healthy",
    **fields: Any,
) -> dict[str, list[Path]]:
    """A small study: reference and mutants on ``seeds``, the unmutated loop on ``noop_seeds``.

    The unmutated runs on ``noop_seeds`` are written as plain reference runs (identity
    ``none``): the catalog recognises them as the noop control because no mutant uses
    those seeds. ``control`` is their behaviour (a control that is not silent); ``fields``
    go to every run's ``RunSpec`` (e.g. ``reported=()``: a script that reports nothing).
    Returns the written folders by identity.
    """
    written: dict[str, list[Path]] = {}
    for seed in (*seeds, *noop_seeds):
        behaviour = control if seed in noop_seeds else "healthy"
        spec = RunSpec(behaviour, seed, loop=loop, steps=steps, **fields)
        written.setdefault("none", []).append(write_run(results_dir, spec))
    for behaviour, identity, operators in mutants:
        for seed in seeds:
            spec = RunSpec(
                behaviour,
                seed,
                loop=loop,
                identity=identity,
                operators=operators,
                categories=("optim",),
                diff=_diff_for(identity),
                steps=steps,
                **fields,
            )
            written.setdefault(identity, []).append(write_run(results_dir, spec))
    return written


def _loss_curve(spec: RunSpec, rng: np.random.Generator) -> list[float]:
    n = spec.steps
    t = np.arange(n, dtype=float)
    initial = math.log(N_CLASSES) * (1 + rng.normal(0, 0.01))
    floor = 0.25
    tau = n / 6
    if spec.behaviour == "slow":
        tau = n * 1.5
    if spec.behaviour == "leak_labels":
        floor = 0.01
    clean = floor + (initial - floor) * np.exp(-t / tau)
    noise = rng.lognormal(0, 0.08, n)
    if spec.behaviour == "flat":
        clean = np.full(n, initial)
        noise = rng.lognormal(0, 0.005, n)
    if spec.behaviour == "diverge":
        clean = initial * np.exp(np.minimum(t, n / 2) / (n / 12))
        noise = rng.lognormal(0, 0.3, n)
    curve = clean * noise
    curve[0] = initial
    if spec.behaviour == "spiky":
        for index in rng.choice(np.arange(30, n), size=6, replace=False):
            curve[index] = initial * 4
    values = [float(v) for v in curve]
    if spec.behaviour == "nan":
        cut = n // 3 + int(rng.integers(0, 10))
        values = [*values[:cut], math.nan]
    return values


def _report(
    spec: RunSpec, rng: np.random.Generator, epoch: int, train_loss: float
) -> dict[str, Any]:
    accuracy = 1.0 / N_CLASSES
    val_loss = train_loss * 1.15 + rng.normal(0, 0.01)
    if spec.behaviour != "flat":
        progress = 1 - train_loss / math.log(N_CLASSES)
        accuracy = 0.1 + 0.8 * min(1.0, max(0.0, progress))
    if spec.behaviour == "leak_labels":
        accuracy, val_loss = 0.995, train_loss
    accuracy += rng.normal(0, 0.005)
    record = {
        "kind": "report",
        "t": 0.0,
        "epoch": epoch,
        "train_loss": train_loss,
        "val_loss": val_loss,
        "val_metric": accuracy,
        "n_classes": N_CLASSES,
    }
    for name in ("val_loss", "val_metric"):
        if name not in spec.reported:
            del record[name]
    if spec.source is not None:
        record["source"] = spec.source
    return record


def _result(
    spec: RunSpec,
    records: list[dict[str, Any]],
    status: str,
    exc_type: str | None,
    exc_message: str | None,
    steps: int,
    backward: int,
) -> dict[str, Any]:
    rss = [r["rss_mb"] for r in records if r.get("kind") == "step"]
    result = {
        "key": f"{zlib.crc32(spec.run_id.encode()):08x}",
        "run_id": spec.run_id,
        "loop": spec.loop,
        "identity": spec.identity,
        "operators": list(spec.operators),
        "categories": list(spec.categories),
        "params": [{}] * len(spec.operators),
        "lines": [12] if spec.operators else [],
        "mutant_lines": [12] if spec.operators else [],
        "diff": spec.diff,
        "sha256": f"{zlib.crc32(spec.identity.encode()):064x}",
        "argv": ["--epochs", str(EPOCHS), "--seed", str(spec.seed), "--device", spec.device],
        "seed": spec.seed,
        "device": spec.device,
        "status": status,
        "exc_type": exc_type,
        "exc_message": exc_message,
        "steps": steps,
        "backward_calls": backward,
        "wall_s": records[-1]["t"] + 1.5,
        "peak_rss_mb": max(rss, default=300.0),
        "peak_cuda_mb": None,
        "train_forwards": 0,
        "train_forwards_eval_mode": 0,
        "eval_forwards": 0,
        "eval_forwards_grad": 0,
        "exit_code": 0 if status == "ok" else 1,
        "torch_version": "2.13.0",
        "harness_version": "test",
    }
    result.update(spec.extra_result)
    return result


def _diff_for(identity: str) -> str:
    name = identity.split("::")[-1]
    return (
        "--- a/toy_mlp.py\n+++ b/toy_mlp.py\n@@ -10,3 +10,2 @@\n"
        f"     loss.backward()\n-    optimizer.step()  # {name}\n     total += loss.item()\n"
    )


def _encode(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _slug(identity: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in identity)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.5

    def tick(self, seconds: float) -> float:
        self.now += seconds
        return self.now
