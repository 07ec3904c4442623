"""The harness: isolated, instrumented, cached runs of any training script.

Public API (cheap to import; torch loads when a run starts)::

    from experiments.harness import RunSpec, run_sweep, load_results

    rows = run_sweep(specs, "results/", workers=2, progress=print)

The parent: ``runner`` (scheduling), ``budget`` (deadlines), ``cache`` (which stored
results stand), ``launch`` (starting a run's process), ``watch`` (deadlines and memory
caps in flight), ``ending`` (a run's end record, status and ``row``), ``reaper`` (no
process outlives its run), ``reuse`` and ``pool`` (a run process that serves several CPU
runs in turn), ``store`` and ``seal`` (the folders, trusted rows). The run's process:
``child``, with ``hooks`` (telemetry), ``writer`` (the trace), ``guard`` and ``workdir``
(the user's tree stays untouched), ``holdout``. ``status`` says how a status is decided.
"""

from experiments.harness.spec import HARNESS_VERSION, RunSpec, cache_key
from experiments.harness.store import load_results, run_dir

__all__ = [
    "HARNESS_VERSION",
    "Budget",
    "RunSpec",
    "cache_key",
    "load_results",
    "run_dir",
    "run_sweep",
]


def __getattr__(name: str):
    # run_sweep pulls in the runner (and, when a run starts, torch): load on use.
    if name == "Budget":
        from experiments.harness.budget import Budget

        return Budget
    if name in ("run_sweep", "Runner"):
        from experiments.harness import runner

        return getattr(runner, name)
    raise AttributeError(name)
