"""``trainwreck catalog``: runs the sweep behind the symptom catalog and writes it.

A profile names the loops and seeds. Every first-order mutant (each operator and its
declared variants, at every site) runs on the profile's seeds; the unmutated loop runs
on the same seeds (the reference distribution) and on a disjoint set of seeds, which the
catalog judges as if it were a mutant (the ``noop`` control, expected to be silent).
Runs come from the cache when they exist, so a rerun trains nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from experiments.catalog.errors import CatalogError
from experiments.catalog.plan import plan
from experiments.catalog.profiles import NOOP_SEED_OFFSET, PROFILES, noop_seeds_for, strength_loops
from experiments.catalog.report_cmd import print_summary, record_sweep
from experiments.cli_support import Parser
from experiments.progress import ProgressBar
from experiments.symptoms.sequential import MIN_SEEDS


def catalog_parser() -> argparse.ArgumentParser:
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
    args = catalog_parser().parse_args(list(argv))
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
            noop_seeds = noop_seeds_for(seeds)
    if adaptive and len(seeds) < MIN_SEEDS:
        raise CatalogError(f"--adaptive needs --seeds of at least {MIN_SEEDS}, got {len(seeds)}")
    for override in args.overrides:
        if "=" not in override:
            raise CatalogError(
                f"bad override {override!r}: expected key=value, e.g. results_dir=out/"
            )
    shard = _shard_arg(args.shard)
    strength_loops(profile, loops, args.strength_loops)  # a bad list fails before any run
    specs, results_dir, n_classes, workers, budget, gpus, runs_per_gpu, reuse = plan(
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
    from experiments.catalog.runs import load_runs
    from experiments.catalog.tables import stopping_decisions

    def judge(rows: list[dict]):
        keys = {row["key"] for row in rows}
        return stopping_decisions(load_runs(results_dir, n_classes=n_classes, keys=keys))

    rows, progress = adaptive_sweep(specs, seeds, run, judge, say=say)
    say(f"adaptive: {progress.summary()}")
    return rows


def _write(results_dir: Path, rows: list[dict], n_classes: dict, started: float) -> int:
    from experiments.catalog.rebuild import rebuild_report

    keys = sorted({row["key"] for row in rows})
    summary = rebuild_report(results_dir, n_classes=n_classes, keys=keys)
    record_sweep(summary.out_dir, keys, n_classes)
    from experiments.outcomes import status_line, validation_notes

    cached = sum(bool(row.get("cached")) for row in rows)
    print(
        f"[trainwreck] {len(rows)} runs ({cached} cached) in {time.monotonic() - started:.0f} s; "
        + status_line(rows),
        file=sys.stderr,
    )
    for note in validation_notes(rows):
        print(f"[trainwreck] {note}", file=sys.stderr)
    print_summary(summary)
    return 0
