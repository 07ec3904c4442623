"""The main job: ``trainwreck catalog`` runs the sweep behind the symptom catalog and
writes it; ``trainwreck report RESULTS_DIR`` rebuilds the files from stored runs.

A profile names the loops and seeds. Every first-order mutant (each operator and its
declared variants, at every site) runs on the profile's seeds; the unmutated loop runs
on the same seeds (the reference distribution) and on a disjoint set of seeds, which the
catalog judges as if it were a mutant (the ``noop`` control, expected to be silent).
Runs come from the cache when they exist, so a rerun trains nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.cli_support import Parser, UserError
from experiments.loops import loop_names
from experiments.progress import ProgressBar
from experiments.symptoms.sequential import MAX_SEEDS, MIN_SEEDS

SWEEP_FILE = "sweep.json"  # in the catalog folder: the runs this catalog was built from


class CatalogError(UserError):
    """A user mistake (unknown profile/loop, bad override): one line, exit 2."""


@dataclass(frozen=True)
class Profile:
    loops: tuple[str, ...]
    seeds: tuple[int, ...]
    noop_seeds: tuple[int, ...]
    description: str
    # Per-loop epochs for this profile (the loop config's otherwise); a user's
    # ``budget.epochs=`` or ``loop.epochs=`` override still wins.
    epochs: tuple[tuple[str, int], ...] = ()
    # Adaptive seeds (docs/adaptive.md): ``seeds`` is then the cap, and each mutant starts
    # with the first three and gets more while the sequential rule leaves it undecided.
    adaptive: bool = False
    # The minimal-strength pass (docs/adaptive.md) after the sweep: slow, full profile only.
    strength: bool = False
    # The loops the strength pass searches (empty: every loop of the catalog).
    strength_loops: tuple[str, ...] = ()


# The unmutated loop's control runs use seeds this far above the mutants' (disjoint sets).
NOOP_SEED_OFFSET = 100
# The Hydra preset ``experiment=catalog`` (every variant, the catalog's seeds): the full
# profile is that sweep over every loop, so its seeds are read from there, not restated.
CATALOG_PRESET = Path(__file__).resolve().parent.parent / "configs" / "experiment" / "catalog.yaml"


def _preset_seeds() -> tuple[int, ...]:
    from omegaconf import OmegaConf

    return tuple(int(seed) for seed in OmegaConf.load(CATALOG_PRESET).seeds)


def _noop_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    return tuple(NOOP_SEED_OFFSET + seed for seed in range(len(seeds)))


PROFILES = {
    "quick": Profile(
        loops=("mlp_digits", "binary_cancer"),
        seeds=(0, 1, 2),
        noop_seeds=_noop_seeds((0, 1, 2)),
        description="2 loops x every mutant x 3 seeds, half budgets (about a minute on 2 cores)",
        # Half the loops' own epochs: the runs' cost halves, both references still learn
        # clearly (mlp_digits 95.8% validation accuracy at 10 epochs against 96.9% at 20;
        # binary_cancer 97.3% held-out accuracy at 15 against 96.5% at 30), and the
        # verdicts that move are listed in docs/benchmarks.md (#16).
        epochs=(("mlp_digits", 10), ("binary_cancer", 15)),
    ),
    "full": Profile(
        loops=loop_names(),
        # Up to 20 seeds per mutant, the first 5 of them the catalog preset's.
        seeds=tuple(dict.fromkeys([*_preset_seeds(), *range(MAX_SEEDS)]))[:MAX_SEEDS],
        adaptive=True,
        strength=True,
        # The strength pass on four of the eight loops (tabular, regression, two digits
        # loops), each axis searched on at least one: the language models' runs are the
        # dearest (lstm_lm was 103 of the pass's 202 s of run wall), and with them the whole
        # profile took 840 s against fixed 5's 770 s; without them, fixed 5 measured the same
        # day is not exceeded (docs/benchmarks.md #16). ``--strength-loops all`` searches
        # every loop.
        strength_loops=(
            "binary_cancer",
            "functional_digits",
            "regression_diabetes",
            "resume_digits",
        ),
        # 8 control seeds per loop: seed-sets as large as a mutant's median seeds (3 with
        # adaptive seeds: 56 distinct sets), of which the catalog judges 20 for the noop
        # false-positive rate (docs/truth.md).
        noop_seeds=_noop_seeds(range(8)),
        description=f"every loop x every mutant x 3 to {MAX_SEEDS} seeds (adaptive)",
        # At their own default budgets the eight loops need 21 min of CPU on 2 cores, 44% of
        # it char_lm; these budgets fit 15 min and every loop still learns clearly (char_lm
        # val loss 2.86 at 3 epochs against a 3.33 unigram entropy; docs/benchmarks.md).
        epochs=(("char_lm", 3), ("lstm_lm", 3), ("cnn_digits", 8)),
    ),
}


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="trainwreck catalog",
        description="Run every first-order mutant of the reference loops and write the symptom catalog.",
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--loops", help="comma-separated loops instead of the profile's")
    parser.add_argument("--seeds", type=int, help="number of seeds instead of the profile's")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--adaptive",
        action="store_const",
        const=True,
        dest="adaptive",
        help="3 seeds per mutant, more while undecided, up to --seeds (docs/adaptive.md)",
    )
    mode.add_argument(
        "--fixed",
        action="store_const",
        const=False,
        dest="adaptive",
        help="every seed for every mutant",
    )
    parser.add_argument(
        "--strength",
        action=argparse.BooleanOptionalAction,
        help="search each parametric operator's weakest showing setting (full profile: on)",
    )
    parser.add_argument(
        "--strength-loops",
        metavar="LOOPS",
        help="comma-separated loops the strength pass searches, or 'all' (default: the "
        "profile's; docs/adaptive.md)",
    )
    parser.add_argument(
        "--operators",
        help="comma-separated operator specs instead of every operator and variant",
    )
    parser.add_argument("--workers", type=int, help="runs at once (default: all cores)")
    parser.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N (mutants split by identity, I from 0); then the same "
        "command without --shard writes the catalog from the cache (docs/adaptive.md)",
    )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="rerun cached timeouts, OOMs and killed runs (else only after a budget change)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="Hydra overrides applied to every loop, e.g. results_dir=DIR device=cuda budget.epochs=5",
    )
    return parser


def catalog_main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    profile = PROFILES[args.profile]
    loops = tuple(args.loops.split(",")) if args.loops else profile.loops
    seeds = profile.seeds
    noop_seeds = profile.noop_seeds
    adaptive = profile.adaptive if args.adaptive is None else args.adaptive
    if args.seeds is not None:
        if args.seeds < 2:
            raise CatalogError("--seeds must be at least 2 (symptoms are judged against a spread)")
        if args.seeds > NOOP_SEED_OFFSET:
            raise CatalogError(f"--seeds must be at most {NOOP_SEED_OFFSET}, got {args.seeds}")
        seeds = tuple(range(args.seeds))
        if not adaptive:
            noop_seeds = _noop_seeds(seeds)
    if adaptive and len(seeds) < MIN_SEEDS:
        raise CatalogError(f"--adaptive needs --seeds of at least {MIN_SEEDS}, got {len(seeds)}")
    for override in args.overrides:
        if "=" not in override:
            raise CatalogError(
                f"bad override {override!r}: expected key=value, e.g. results_dir=out/"
            )
    shard = _shard_arg(args.shard)
    strength_loops(profile, loops, args.strength_loops)  # a bad list fails before any run
    specs, results_dir, n_classes, workers, budget, gpus, runs_per_gpu, reuse = _plan(
        loops, seeds, noop_seeds, args, dict(profile.epochs)
    )
    if shard is not None:
        from experiments.adaptive import shard_mutants

        specs = shard_mutants(specs, *shard)
    started = time.monotonic()
    planned = (
        f"adaptive: {MIN_SEEDS} to {len(seeds)} seeds per mutant, at most {len(specs)} runs"
        if adaptive
        else f"{len(specs)} runs"
    )
    # The profile's own budgets, unless an override sets the epochs (it wins, see _plan).
    own_epochs = [
        f"{loop}={epochs}"
        for loop, epochs in profile.epochs
        if loop in loops and not any("epochs=" in override for override in args.overrides)
    ]
    print(
        f"[trainwreck] catalog ({args.profile}"
        + (f", shard {shard[0]}/{shard[1]}" if shard else "")
        + f"): {len(loops)} loops, seeds {list(seeds)}, "
        f"noop seeds {list(noop_seeds)}, {planned}, {workers} at once"
        + (f"; epochs {', '.join(own_epochs)}" if own_epochs else ""),
        file=sys.stderr,
    )
    from experiments.harness import run_sweep
    from experiments.reference_gate import ReferenceFailed, gated_sweep

    def run(chosen):
        bar = ProgressBar(sys.stderr)
        try:
            return run_sweep(
                chosen,
                results_dir,
                workers=workers,
                progress=bar,
                budget=budget,
                gpus=gpus,
                runs_per_gpu=runs_per_gpu,
                retry_failed=args.retry_failed,
                reuse=reuse,
            )
        finally:
            bar.close()

    def say(note: str) -> None:
        print(f"[trainwreck] {note}", file=sys.stderr)

    try:  # the unmutated runs first: no table on a reference that fails
        if adaptive:
            rows = _adaptive(
                specs,
                seeds,
                lambda chosen: gated_sweep(chosen, run, say),
                results_dir,
                n_classes,
                say,
            )
        else:
            rows = gated_sweep(specs, run, say=say)
    except ReferenceFailed as failure:
        print(f"[trainwreck] {failure}", file=sys.stderr)
        return 1
    strength_failed = False
    if profile.strength if args.strength is None else args.strength:
        from experiments.strength.catalog_pass import strength_pass

        epochs = dict(profile.epochs)

        def overrides_of(loop: str) -> list[str]:
            own = [f"loop.epochs={epochs[loop]}"] if loop in epochs else []
            return [*own, *args.overrides]

        searched = strength_loops(profile, loops, args.strength_loops)
        if shard is None and not gpus and workers > 1:
            from experiments.strength.catalog_pass import parallel_strength_pass

            failed = parallel_strength_pass(searched, overrides_of, workers, len(seeds), say)
            if failed:
                say(
                    f"strength pass: {failed} of {workers} processes failed (the error is "
                    "above); the catalog shows the searches that finished"
                )
                strength_failed = True
        else:
            strength_pass(searched, overrides_of, args.workers, len(seeds), say, shard=shard)
    if shard is not None:
        # A shard's tables would hold its mutants only, and shards may share a folder: the
        # catalog is written once, by the unsharded command, from the cache.
        say(
            f"shard {shard[0]}/{shard[1]}: {len(rows)} runs in "
            f"{time.monotonic() - started:.0f} s; once every shard is done, the same command "
            "without --shard writes the catalog (its runs come from the cache)"
        )
        return 0
    written = _write(results_dir, rows, n_classes, started)
    return written or int(strength_failed)


def strength_loops(profile: Profile, loops: Sequence[str], given: str | None) -> tuple[str, ...]:
    """The loops the strength pass searches: ``--strength-loops``, else the profile's (those
    in this catalog), else every loop of the catalog."""
    if given is not None:
        if given == "all":
            return tuple(loops)
        chosen = tuple(given.split(","))
        unknown = [loop for loop in chosen if loop not in loops]
        if unknown:
            raise CatalogError(
                f"--strength-loops {unknown[0]!r} is not a loop of this catalog "
                f"(its loops: {', '.join(loops)}), or pass 'all'"
            )
        return chosen
    own = tuple(loop for loop in profile.strength_loops if loop in loops)
    return own if profile.strength_loops else tuple(loops)


def _shard_arg(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    index, slash, count = text.partition("/")
    if slash and index.isdigit() and count.isdigit() and 0 <= int(index) < int(count):
        return int(index), int(count)
    raise CatalogError(f"bad --shard {text!r}: expected I/N with 0 <= I < N, e.g. --shard 0/4")


def _adaptive(specs, seeds, run, results_dir: Path, n_classes, say) -> list[dict]:
    """The sweep in rounds (experiments.adaptive); the catalog judges what each round ran."""
    from experiments.adaptive import adaptive_sweep
    from experiments.catalog import load_runs, stopping_decisions

    def judge(rows: list[dict]):
        keys = {row["key"] for row in rows}
        return stopping_decisions(load_runs(results_dir, n_classes=n_classes, keys=keys))

    rows, progress = adaptive_sweep(specs, seeds, run, judge, say=say)
    say(f"adaptive: {progress.summary()}")
    return rows


def report_main(argv: Sequence[str]) -> int:
    parser = Parser(
        prog="trainwreck report",
        description="Rebuild the catalog files (tables, study.md, report.html) from stored runs.",
    )
    parser.add_argument("results_dir", help="a results folder written by trainwreck catalog/sweep")
    parser.add_argument(
        "--all-runs", action="store_true", help="use every stored run, not only the last catalog's"
    )
    args = parser.parse_args(list(argv))
    results = Path(args.results_dir)
    if not (results / "runs").is_dir():
        raise CatalogError(f"{results}: no stored runs here (expected {results / 'runs'}/)")
    from experiments.catalog import rebuild_report

    keys, n_classes = None, None
    sweep_file = results / "catalog" / SWEEP_FILE
    if sweep_file.exists() and not args.all_runs:
        keys, n_classes = _read_sweep(sweep_file)
    summary = rebuild_report(
        results,
        n_classes=n_classes,
        keys=keys,
        progress=lambda m: print(f"[trainwreck] {m}", file=sys.stderr),
    )
    if keys is not None:
        _record_sweep(summary.out_dir, keys, n_classes)
    _print_summary(summary)
    return 0


def _read_sweep(path: Path) -> tuple[list[str], Any]:
    """The runs a catalog was built from; a damaged record is one line, not a traceback."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        keys = recorded["keys"]
        if not (isinstance(keys, list) and all(isinstance(key, str) for key in keys)):
            raise TypeError("keys is not a list of run keys")
        return keys, recorded.get("n_classes")
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise CatalogError(
            f"{path} is damaged ({type(error).__name__}: {error}); delete it, or pass "
            "--all-runs to rebuild from every stored run"
        ) from None


def _plan(loops, seeds, noop_seeds, args, epochs):
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


def _write(results_dir: Path, rows: list[dict], n_classes: dict, started: float) -> int:
    from experiments.catalog import rebuild_report

    keys = sorted({row["key"] for row in rows})
    summary = rebuild_report(results_dir, n_classes=n_classes, keys=keys)
    _record_sweep(summary.out_dir, keys, n_classes)
    from experiments.outcomes import status_line, validation_notes

    cached = sum(bool(row.get("cached")) for row in rows)
    print(
        f"[trainwreck] {len(rows)} runs ({cached} cached) in {time.monotonic() - started:.0f} s; "
        + status_line(rows),
        file=sys.stderr,
    )
    for note in validation_notes(rows):
        print(f"[trainwreck] {note}", file=sys.stderr)
    _print_summary(summary)
    return 0


def _record_sweep(out_dir: Path, keys: Sequence[str], n_classes) -> None:
    from experiments.files import write_text_atomic

    payload = {"keys": list(keys), "n_classes": n_classes}
    write_text_atomic(Path(out_dir) / SWEEP_FILE, json.dumps(payload))


def _print_summary(summary) -> None:
    control = summary.control or {}
    rate, interval = control.get("set_fpr"), control.get("set_fpr_ci")
    noop = (
        f"; noop control: {control.get('noop_sets_not_silent')} of "
        f"{control.get('noop_sets')} seed-sets not silent (false-positive rate {rate:.0%}, "
        f"95% CI {interval[0]:.0%}-{interval[1]:.0%})"
        if isinstance(rate, float) and interval
        else ""
    )
    agree, declared = summary.agreement
    verdicts = (
        f"[trainwreck] measured severity agrees with the declared one for {agree} of "
        f"{declared} mutants ({agree / declared:.0%}); {summary.misleads} mutants mislead "
        "(model fine, a reported number wrong)\n"
        if declared
        else ""
    )
    print(
        f"[trainwreck] catalog: {summary.n_mutants} mutants over {summary.n_loops} loops{noop}\n"
        + verdicts
        + f"[trainwreck] wrote {summary.out_dir}/ (symptoms.md, study.md, report.html, runs.parquet, ...)",
        file=sys.stderr,
    )
