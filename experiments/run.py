"""The Hydra app: ``python -m experiments.run loop=mlp_digits mutation=drop_zero_grad seed=0``.

One Hydra job is one shard of a sweep: it builds its runs (``experiments.sweep``), runs
or loads them (``experiments.harness.run_sweep``, cached in ``results_dir``) and returns
a status count. A mutant that crashes, hangs or eats memory is a result row, never an
exception; only a wrong configuration (unknown loop or operator, missing script, bad
override) stops a job, before anything runs.

Config groups (``configs/`` holds the yaml, the schemas in ``experiments.schema`` validate
it; ``experiments.compose`` turns overrides into a checked sweep):
``loop`` (one per reference loop, plus ``custom``), ``mutation`` (``none``, ``all``,
``variants`` and one option per registered operator, generated from the registry),
``device`` (``cpu``, ``cuda``), ``budget`` (epochs, deadlines, memory, workers) and
``experiment`` (presets). From Python or the ``trainwreck`` CLI: ``main(argv)``.
"""

from __future__ import annotations

import sys

from experiments import interrupt

if __name__ == "__main__":  # Ctrl-C or SIGTERM while Hydra, omegaconf, torch load
    interrupt.install()
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import hydra
from hydra.utils import to_absolute_path
from omegaconf import DictConfig, OmegaConf

from experiments import sweep as sweeps
from experiments.compose import precheck, to_sweep
from experiments.resources import check_device, job_number, workers_for
from experiments.schema import CONFIG_DIR

# configs/hydra/launcher/ completes the launcher plugins' configs under their own names
# (hydra/launcher=submitit_slurm keeps working, with our defaults); Hydra 1.3 validates
# such a file against the plugin's schema and warns about it on every run.
warnings.filterwarnings(
    "ignore", message=r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema"
)


def run_job(cfg: DictConfig) -> dict[str, Any]:
    """One job: build the runs, run or load them, summarise. Raises only for a wrong
    configuration (``SweepError``), never for a run."""
    from experiments.budgets import runner_budget
    from experiments.harness import run_sweep
    from experiments.harness.gpu import rotated, spreads_over_gpus, visible_gpus
    from experiments.outcomes import status_line, validation_notes
    from experiments.reference_gate import gated_sweep

    if OmegaConf.is_missing(cfg.loop, "script"):
        raise sweeps.SweepError("loop.script is required: loop=custom loop.script=path/to/train.py")
    sweep = to_sweep(cfg)
    specs = sweeps.build(sweep)
    check_device(sweep.device)
    gpus = visible_gpus() if spreads_over_gpus(sweep.device) else None
    if gpus:  # jobs running side by side (joblib) start on different GPUs
        gpus = rotated(gpus, job_number())
    # Relative to where the sweep was launched, not where a launcher runs the job (a
    # SLURM node, a Ray worker): every job of a sweep shares one cache.
    results_dir = to_absolute_path(str(cfg.results_dir))
    sweeps.check_results_dir(results_dir)
    budget = runner_budget(cfg.budget)
    quiet = cfg.quiet
    progress = _progress_printer(quiet)

    def run(chosen: list) -> list[dict[str, Any]]:
        return run_sweep(
            chosen,
            results_dir,
            workers=workers_for(cfg, gpus),
            progress=progress,
            budget=budget,
            gpus=gpus,
            runs_per_gpu=cfg.budget.runs_per_gpu,
            retry_failed=bool(cfg.retry_failed),
            reuse=int(cfg.budget.reuse),
        )

    def say(note: str) -> None:
        if not quiet:
            print(f"[trainwreck] {note}", file=sys.stderr)

    # The unmutated runs first: mutants of a script that fails unmutated say nothing.
    rows = gated_sweep(specs, run, say)
    statuses = Counter(row["status"] for row in rows)
    summary = {
        "runs": len(rows),
        "cached": sum(bool(row.get("cached")) for row in rows),
        "statuses": dict(sorted(statuses.items())),
        "results_dir": results_dir,
    }
    if not quiet:
        print(f"[trainwreck] {summary}", file=sys.stderr)
        say(status_line(rows))
        for note in validation_notes(rows):
            say(note)
    return summary


def _progress_printer(quiet: bool):
    """``progress(done, total, cached, failed)``: one line rewritten in place on a terminal;
    elsewhere (a launcher's log, Ray's forwarded output) a line per tenth and the last."""
    on_terminal = sys.stderr.isatty()
    shown: set[int] = set()

    def progress(done: int, total: int, cached: int, failed: int) -> None:
        if quiet:
            return
        line = f"[trainwreck] {done}/{total} runs ({cached} cached, {failed} not ok)"
        if on_terminal:
            print(f"\r{line}", end="\n" if done == total else "", file=sys.stderr, flush=True)
            return
        tenth = 10 * done // max(total, 1)
        if done == total or tenth not in shown:
            shown.add(tenth)
            print(line, file=sys.stderr, flush=True)

    return progress


# An absolute path: "../configs" would resolve as a package when the module is imported
# by name (as launchers do), and configs/ is no package.
@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def app(cfg: DictConfig) -> dict[str, Any]:
    from experiments.reference_gate import ReferenceFailed

    try:
        return run_job(cfg)
    except ReferenceFailed as failure:  # not a configuration mistake: a failing script
        print(f"[trainwreck] {failure}", file=sys.stderr)
        raise SystemExit(1) from None
    except sweeps.SweepError as error:
        # A configuration mistake: one clear message, not a traceback.
        print(f"[trainwreck] configuration error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    except PermissionError as error:  # a shared results folder this user may not write
        from experiments.files import permission_message

        print(f"[trainwreck] {permission_message(error)}", file=sys.stderr)
        raise SystemExit(2) from None


def main(argv: Sequence[str] | None = None) -> None:
    """Entry for ``python -m experiments.run`` and for ``trainwreck sweep ARGS...``:
    ``argv`` are Hydra overrides (and flags such as ``-m``)."""
    if argv is not None:
        sys.argv = [sys.argv[0] if sys.argv else "experiments.run", *argv]
    with interrupt.handling():
        try:
            error = precheck(sys.argv[1:])
            if error is not None:  # Hydra would print several lines and exit 1
                print(f"[trainwreck] configuration error: {error}", file=sys.stderr)
                raise SystemExit(2)
            app()
        except KeyboardInterrupt as stop:  # the runner already ended every run; no traceback
            print("[trainwreck] interrupted", file=sys.stderr)
            raise SystemExit(interrupt.exit_status(stop)) from None


if __name__ == "__main__":
    # Run the importable module's copy: launchers that pickle the task and its configs
    # (joblib, submitit) must find them as ``experiments.run.*``, not ``__main__.*``.
    from experiments.run import main as importable_main

    importable_main()
