"""A catalog's runs: every loop composed with the user's overrides, its mutants on the
profile's seeds and the unmutated loop on both seed sets, with the job's resources."""

from __future__ import annotations

from pathlib import Path

from experiments.catalog.errors import CatalogError


def plan(loops, seeds, noop_seeds, args, epochs):
    """RunSpecs for every loop (mutants on ``seeds``, unmutated on both seed sets)."""
    from experiments import sweep as sweeps
    from experiments.budgets import runner_budget
    from experiments.compose import compose, one_line, to_sweep
    from experiments.harness.gpu import spreads_over_gpus, visible_gpus
    from experiments.resources import check_device, workers_for

    specs, n_classes = [], {}
    cfg = None
    for loop in loops:
        try:
            profile_epochs = [f"loop.epochs={epochs[loop]}"] if loop in epochs else []
            cfg = compose([f"loop={loop}", *profile_epochs, *args.overrides])
        except Exception as error:  # Hydra's compose errors name the valid choices
            raise CatalogError(one_line(str(error))) from None
        try:
            base = to_sweep(cfg)
        except sweeps.SweepError as error:
            raise CatalogError(str(error)) from None
        n_classes[base.loops[0].label] = cfg.loop.n_classes
        try:
            mutants = sweeps.Sweep(
                loops=base.loops,
                operators=args.operators.split(",") if args.operators else [sweeps.VARIANTS],
                seeds=list(seeds),
                device=base.device,
                limits=base.limits,
            )
            control = sweeps.Sweep(
                loops=base.loops, seeds=list(noop_seeds), device=base.device, limits=base.limits
            )
            specs += sweeps.build(mutants) + sweeps.build(control)
        except sweeps.SweepError as error:
            raise CatalogError(str(error).splitlines()[0]) from None
    assert cfg is not None
    try:
        sweeps.check_results_dir(cfg.results_dir)
        check_device(cfg.device.name)
    except sweeps.SweepError as error:
        raise CatalogError(str(error)) from None
    gpus = visible_gpus() if spreads_over_gpus(cfg.device.name) else None
    budget = runner_budget(cfg.budget)
    workers = args.workers or workers_for(cfg, gpus)
    n_classes = {name: value for name, value in n_classes.items() if value}
    runs_per_gpu, reuse = int(cfg.budget.runs_per_gpu), int(cfg.budget.reuse)
    return specs, Path(cfg.results_dir), n_classes, workers, budget, gpus, runs_per_gpu, reuse
