"""The harness: isolated, instrumented, cached runs of any training script.

Public API (cheap to import; torch loads when a run starts)::

    from experiments.harness import RunSpec, run_sweep, load_results

    rows = run_sweep(specs, "results/", workers=2, progress=print)

See ``runner`` (scheduling, deadlines, caching), ``child`` (the run's process),
``reuse`` and ``pool`` (a run process that serves several CPU runs in turn),
``hooks`` (telemetry), ``status`` (how a status is decided), ``store`` (the folders).
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
    # run_sweep/Budget pull in the runner (and, when a run starts, torch): load on use.
    if name in ("run_sweep", "Budget", "Runner"):
        from experiments.harness import runner

        return getattr(runner, name)
    raise AttributeError(name)
