"""From Hydra overrides to a checked sweep, without running anything: ``compose`` the
config, ``to_sweep`` it (loop, operators, seeds, budget checked), ``precheck`` a command
line (what is wrong, in one line), ``one_line`` for Hydra's multi-line errors. Used by
the Hydra app and by every command that composes loops (catalog, strength, quiz)."""

from __future__ import annotations

from collections.abc import Sequence

from hydra.utils import to_absolute_path
from omegaconf import DictConfig, OmegaConf

from experiments import interrupt
from experiments import sweep as sweeps
from experiments.budgets import BudgetError
from experiments.budgets import check as check_budget
from experiments.schema import CONFIG_DIR


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
        interrupt.check()
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
