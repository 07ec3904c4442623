"""The result row: one per run, in ``result.json``, the same shape for every status (the
catalog and the seal read every field); what fills it comes from ``ending``."""

from __future__ import annotations

from typing import Any

from experiments.harness.spec import HARNESS_VERSION, RunSpec, torch_version

COUNTERS = (
    "steps",
    "backward_calls",
    "loss_fn_calls",
    "train_forwards",
    "train_forwards_eval_mode",
    "eval_forwards",
    "eval_forwards_grad",
)


def result_row(
    spec: RunSpec,
    key: str,
    status: str,
    exc_type: str | None,
    message: str | None,
    counters: dict[str, Any],
) -> dict[str, Any]:
    mutant = spec.mutant or {}
    return {
        "key": key,
        "run_id": spec.run_id,
        "loop": spec.loop_name,
        "script": spec.script,
        "target": spec.target or spec.script,
        "identity": spec.identity,
        "operators": list(mutant.get("operators", [])),
        "categories": list(mutant.get("categories", [])),
        "contexts": list(mutant.get("contexts", [])),
        "params": list(mutant.get("params", [])),
        "lines": list(mutant.get("lines", [])),
        "mutant_lines": list(mutant.get("mutant_lines", [])),
        "reached": None,  # did the mutated statements run (None: unknown, or no mutant)
        "reach_hits": None,  # how many times they ran
        "reach_eval_hits": None,  # how many while evaluating (autograd off, no forward)
        "seed_insensitive": None,  # set on reference runs by experiments.reference_gate
        "witness": None,  # the witness probes' facts (harness/probes.py; None: not observed)
        "diff": mutant.get("diff", ""),
        "sha256": spec.sha256,
        "argv": list(spec.argv),
        "seed": spec.seed,
        "device": spec.device,
        "status": status,
        "exc_type": exc_type,
        "exc_message": message,
        **{name: int(counters.get(name, 0) or 0) for name in COUNTERS},
        "wall_s": None,
        "peak_rss_mb": None,
        "peak_cuda_mb": None,
        "nonfinite_at": None,
        "exit_code": None,
        "timeout_s": None,
        "mem_cap_mb": spec.mem_cap_mb,
        "budget": {},  # what produced a timeout or an OOM (``Budget.of``)
        "output_dropped": {},  # stream file -> bytes dropped from its middle
        "trace_dropped": None,  # trace records thinned away (None: unknown)
        "telemetry": spec.telemetry,
        "start_method": None,
        "torch_version": torch_version(),
        "harness_version": HARNESS_VERSION,
    }
