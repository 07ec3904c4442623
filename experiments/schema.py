"""The Hydra app's typed config: one dataclass schema per config group (``configs/`` holds
the yaml; the schemas validate it, so a typo or a wrong type fails at compose time) and
their registration in Hydra's ConfigStore, with one ``mutation`` option per registered
operator and a ``loop`` option per reference loop. Registered on import."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from experiments import sweep as sweeps
from experiments.loops import loop_paths
from mutations.registry import operator_classes

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "configs")


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
    # Multiruns (experiments.launch_callback): size the launcher's request to what the
    # machine or cluster has; say why when no job has started after launcher_wait_s.
    launcher_fit: bool = True
    launcher_wait_s: float = 300.0


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
