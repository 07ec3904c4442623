"""The Hydra app: ``python -m experiments.run loop=mlp_digits mutation=drop_zero_grad seed=0``.

One Hydra job is one shard of a sweep: it builds its runs (``experiments.sweep``), runs
or loads them (``experiments.harness.run_sweep``, cached in ``results_dir``) and returns
a status count. A mutant that crashes, hangs or eats memory is a result row, never an
exception; only a wrong configuration (unknown loop or operator, missing script, bad
override) stops a job, before anything runs.

Config groups (``configs/`` holds the yaml, the schemas below validate it):
``loop`` (one per reference loop, plus ``custom``), ``mutation`` (``none``, ``all``,
``variants`` and one option per registered operator, generated from the registry),
``device`` (``cpu``, ``cuda``), ``budget`` (epochs, deadlines, memory, workers) and
``experiment`` (presets). From Python or the ``trainwreck`` CLI: ``main(argv)``.
"""

from __future__ import annotations

import os
import signal
import sys

from experiments import interrupt

if __name__ == "__main__":  # Ctrl-C while Hydra, omegaconf, torch load: exit 130 at once
    interrupt.while_loading()
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.utils import to_absolute_path
from omegaconf import MISSING, DictConfig, OmegaConf

from experiments import sweep as sweeps
from experiments.budgets import BudgetError
from experiments.budgets import check as check_budget
from experiments.loops import loop_paths
from mutations.registry import operator_classes

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "configs")

# configs/hydra/launcher/ completes the launcher plugins' configs under their own names
# (hydra/launcher=submitit_slurm keeps working, with our defaults); Hydra 1.3 validates
# such a file against the plugin's schema and warns about it on every run.
warnings.filterwarnings(
    "ignore", message=r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema"
)


@dataclass
class LoopConfig:
    script: str = MISSING  # path, relative to loop.cwd (or the project, for reference loops)
    # Display name; default: a reference loop's file stem, else the script's path relative
    # to loop.cwd (+ a digest of its arguments), so two projects' main.py never pool.
    name: str | None = None
    args: list[str] = field(default_factory=list)  # extra arguments, passed first
    # Script arguments as one string, split like a shell: "config/x.py --max_iters=50".
    argv: str | None = None
    # The folder the script runs from (its relative paths): default, where trainwreck ran.
    cwd: str | None = None
    # Files whose mutants run: [model.py, train.py], [auto] (the script and its local
    # imports); []: the script alone.
    mutate: list[str] = field(default_factory=list)
    epochs: int | None = None
    epochs_arg: str | None = "--epochs"  # null: the script takes no such argument
    seed_arg: str | None = "--seed"
    device_arg: str | None = "--device"
    flag_style: str = "space"  # "space": --seed 0; "equals": --seed=0 (configurator style)
    n_classes: int | None = None  # for the catalog's chance-level checks
    expected_initial_loss: float | None = None
    # "module:function" the harness runs on the trained model after the script ends (its
    # own data and metric, code the mutant cannot touch); null: the script's val metric.
    holdout: str | None = None
    # A regex with named groups val_loss / val_metric (optional train_loss, step, epoch)
    # read in the script's printed and logged lines (docs/own-script.md).
    metrics: str | None = None


@dataclass
class MutationConfig:
    # Operator specs: names, "scale_lr(factor=0.01)", "all" or "variants"; [] = none.
    operators: list[str] = field(default_factory=list)
    sites: str = "all"  # "all", "first" (one per operator) or a glob over identities
    reference: bool = True  # also run the unmutated loop (deadline and baseline)


@dataclass
class DeviceConfig:
    name: str = "cpu"


@dataclass
class BudgetConfig:
    epochs: int | None = None  # overrides loop.epochs when set
    timeout_factor: float = 5.0  # a mutant's deadline: factor x reference wall + slack
    timeout_slack_s: float = 10.0
    default_timeout_s: float = 600.0  # the reference run's (and any run without one)
    max_timeout_s: float = 3600.0
    timeout_s: float | None = None  # a fixed deadline for every run instead
    mem_cap_mb: int = 2048  # per run, above its memory at start
    threads: int = 1  # torch threads per run
    sample_every: int = 20  # gradient norm / update ratio on step 1, then every k-th
    telemetry: bool = True  # False: run without hooks (no curves), e.g. to time scripts
    workers: int | None = None  # runs at once; default: cores (1 under joblib)
    runs_per_gpu: int = 8  # device=cuda: runs at once on each visible GPU
    reuse: int = 1  # CPU runs one forked process may serve in sequence (1: a fork per run)
    output_cap_mb: float = 16.0  # per run and stream (stdout, stderr): head + tail kept
    trace_cap_mb: float = 64.0  # per run: the trace is thinned beyond this size


@dataclass
class ShardConfig:
    index: int = 0
    count: int = 1


@dataclass
class Config:
    loop: LoopConfig = MISSING
    mutation: MutationConfig = MISSING
    device: DeviceConfig = MISSING
    budget: BudgetConfig = MISSING
    seed: int = 0
    seeds: list[int] | None = None  # several seeds in one job (overrides seed)
    shard: ShardConfig = field(default_factory=ShardConfig)
    results_dir: str = "results/"
    quiet: bool = False
    retry_failed: bool = False  # rerun cached timeouts, OOMs and killed runs


def register_configs() -> None:
    """Schemas, and one ``mutation`` option per registered operator (so
    ``mutation=scale_lr`` works for every operator without a yaml file each)."""
    store = ConfigStore.instance()
    # The group yaml files merge into the typed fields of ``Config``: that is what
    # validates them (an unknown key or a wrong type fails at compose time).
    store.store(name="base_config", node=Config)
    store.store(group="mutation", name="none", node=MutationConfig(operators=[]))
    store.store(group="mutation", name="all", node=MutationConfig(operators=[sweeps.ALL]))
    store.store(group="mutation", name="variants", node=MutationConfig(operators=[sweeps.VARIANTS]))
    for name in operator_classes():
        store.store(group="mutation", name=name, node=MutationConfig(operators=[name]))
    # A reference loop without its yaml (yet) is still a loop option, with its defaults.
    for script in loop_paths():
        if not (Path(CONFIG_DIR) / "loop" / f"{script.stem}.yaml").exists():
            node = LoopConfig(script=f"reference_loops/{script.name}")
            store.store(group="loop", name=script.stem, node=node)


register_configs()


def to_sweep(cfg: DictConfig) -> sweeps.Sweep:
    loop_cfg, budget = cfg.loop, cfg.budget
    try:
        check_budget(budget)
    except BudgetError as error:
        raise sweeps.SweepError(str(error)) from None
    epochs = budget.epochs if budget.epochs is not None else loop_cfg.epochs
    loop = sweeps.Loop(
        script=loop_cfg.script,
        name=loop_cfg.name,
        args=tuple(str(arg) for arg in loop_cfg.args),
        epochs=epochs,
        epochs_arg=loop_cfg.epochs_arg,
        seed_arg=loop_cfg.seed_arg,
        device_arg=loop_cfg.device_arg,
        argv_text=loop_cfg.argv,
        # Relative to where the sweep was launched (a launcher may run the job elsewhere).
        cwd=to_absolute_path(loop_cfg.cwd or "."),
        mutate=tuple(str(entry) for entry in loop_cfg.mutate),
        flag_style=loop_cfg.flag_style,
        holdout=loop_cfg.holdout,
        metrics=loop_cfg.metrics,
    )
    seeds = list(cfg.seeds) if cfg.seeds is not None else [cfg.seed]
    return sweeps.Sweep(
        loops=[loop],
        operators=list(cfg.mutation.operators),
        sites=cfg.mutation.sites,
        seeds=seeds,
        device=cfg.device.name,
        reference=cfg.mutation.reference,
        limits=sweeps.Limits(
            mem_cap_mb=budget.mem_cap_mb,
            threads=budget.threads,
            sample_every=budget.sample_every,
            telemetry=budget.telemetry,
            timeout_s=budget.timeout_s,
        ),
        shard=(cfg.shard.index, cfg.shard.count),
    )


def _workers(cfg: DictConfig, gpus: Sequence[str] | None = None) -> int:
    if cfg.budget.workers is not None:
        return int(cfg.budget.workers)
    launcher = _launcher_target()
    # joblib already runs one job per core: more runs per job would oversubscribe.
    if "joblib" in launcher:
        return 1
    if "ray_launcher" in launcher:
        cores = _ray_task_cpus() or 1  # the CPUs Ray reserved for this task, not the node's
    else:
        # The cores this job may use (a SLURM allocation, a taskset), not all the machine's.
        affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        cores = len(affinity) if affinity else (os.cpu_count() or 1)
    if gpus:  # every GPU run needs a core too: more at once than cores only queue up
        return min(cores, len(gpus) * int(cfg.budget.runs_per_gpu))
    return cores


def _launcher_target() -> str:
    try:
        return str(HydraConfig.get().launcher.get("_target_", "")).lower()
    except ValueError:  # not inside a Hydra job
        return ""


def _job_number() -> int:
    try:
        return int(HydraConfig.get().job.get("num") or 0)
    except ValueError:  # not inside a Hydra job
        return 0


def _ray_task_cpus() -> int:
    try:
        import ray

        return int(ray.get_runtime_context().get_assigned_resources().get("CPU", 0))
    except Exception:  # not inside a Ray task (e.g. a job rerun by hand)
        return 0


def check_device(device: str) -> None:
    """Fail early on ``device=cuda`` without a GPU, asking a forked child (so this
    process never initialises CUDA and its later forks stay safe)."""
    if not device.startswith("cuda"):
        return
    import torch  # imported here (not initialising CUDA), so the child only asks

    del torch
    pid = os.fork()
    if pid == 0:
        try:
            import torch

            os._exit(0 if torch.cuda.is_available() else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise sweeps.SweepError(f"device={device} but torch sees no CUDA device here")


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
        gpus = rotated(gpus, _job_number())
    # Relative to where the sweep was launched, not where a launcher runs the job (a
    # SLURM node, a Ray worker): every job of a sweep shares one cache.
    results_dir = to_absolute_path(str(cfg.results_dir))
    sweeps.check_results_dir(results_dir)
    budget = runner_budget(cfg.budget)
    quiet = cfg.quiet

    def progress(done: int, total: int, cached: int, failed: int) -> None:
        if not quiet:
            print(
                f"\r[trainwreck] {done}/{total} runs ({cached} cached, {failed} not ok)",
                end="\n" if done == total else "",
                file=sys.stderr,
                flush=True,
            )

    def run(chosen: list) -> list[dict[str, Any]]:
        return run_sweep(
            chosen,
            results_dir,
            workers=_workers(cfg, gpus),
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
    previous = signal.getsignal(signal.SIGINT)
    interrupt.while_loading()  # until the runner's warm parent is ready (interrupt.ready)
    try:
        error = precheck(sys.argv[1:])
        if error is not None:  # Hydra would print several lines and exit 1
            print(f"[trainwreck] configuration error: {error}", file=sys.stderr)
            raise SystemExit(2)
        app()
    except KeyboardInterrupt:  # the runner already ended every run; no traceback
        print("[trainwreck] interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    finally:  # an in-process caller (``trainwreck sweep`` in a test) gets its handler back
        signal.signal(signal.SIGINT, previous)


def precheck(args: Sequence[str]) -> str | None:
    """Compose the config the overrides in ``args`` ask for (a multirun's first job) and
    check its budget: what is wrong, in one line, or None. Flags other than ``-m`` (Hydra's
    ``--help``, ``--cfg``...) are left to Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if any(arg.startswith("-") and arg not in ("-m", "--multirun") for arg in args):
        return None
    overrides = [arg for arg in args if not arg.startswith("-")]
    try:
        first = []
        for override in OverridesParser.create().parse_overrides(overrides):
            text = override.input_line
            if override.is_sweep_override():
                value = next(iter(override.sweep_string_iterator()), "")
                text = f"{override.get_key_element()}={value}"
            first.append(text)
        if any(override.startswith("hydra") for override in first):
            return None  # launcher and sweeper settings: Hydra checks those itself
        cfg = compose(first)
        to_sweep(cfg)
        sweeps.check_results_dir(cfg.results_dir)
    except sweeps.SweepError as error:
        return str(error).splitlines()[0]
    except Exception as error:  # Hydra's override and compose errors
        cause = str(error.__cause__ or "").strip().splitlines()
        return one_line(str(error)) + (f": {cause[0]}" if cause else "")
    return None


def one_line(message: str) -> str:
    """Hydra's multi-line error as one line that keeps the valid choices."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return "invalid configuration"
    if "Config search path:" in lines:
        lines = lines[: lines.index("Config search path:")]
    head = lines[0]
    starts = [i for i, line in enumerate(lines) if line.startswith("Available options")]
    if starts:
        return f"{head}; valid: {', '.join(lines[starts[0] + 1 :])}"
    return " ".join(lines)


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """The composed config without running anything (tests, tools)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=list(overrides))
    OmegaConf.resolve(cfg)
    return cfg


if __name__ == "__main__":
    # Run the importable module's copy: launchers that pickle the task and its configs
    # (joblib, submitit) must find them as ``experiments.run.*``, not ``__main__.*``.
    from experiments.run import main as importable_main

    importable_main()
