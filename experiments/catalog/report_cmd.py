"""``trainwreck report RESULTS_DIR``: rebuild the catalog files from stored runs (those
of the last catalog, recorded in ``SWEEP_FILE``, unless ``--all-runs``), and the summary
both commands print."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.catalog.errors import CatalogError
from experiments.cli_support import Parser

SWEEP_FILE = "sweep.json"  # in the catalog folder: the runs this catalog was built from


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
    from experiments.catalog.rebuild import rebuild_report

    keys, n_classes = None, None
    sweep_file = results / "catalog" / SWEEP_FILE
    if sweep_file.exists() and not args.all_runs:
        keys, n_classes = read_sweep(sweep_file)
    summary = rebuild_report(
        results,
        n_classes=n_classes,
        keys=keys,
        progress=lambda m: print(f"[trainwreck] {m}", file=sys.stderr),
    )
    if keys is not None:
        record_sweep(summary.out_dir, keys, n_classes)
    print_summary(summary)
    return 0


def read_sweep(path: Path) -> tuple[list[str], Any]:
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


def record_sweep(out_dir: Path, keys: Sequence[str], n_classes) -> None:
    from experiments.files import write_text_atomic

    payload = {"keys": list(keys), "n_classes": n_classes}
    write_text_atomic(Path(out_dir) / SWEEP_FILE, json.dumps(payload))


def print_summary(summary) -> None:
    control = summary.control or {}
    rate, interval = control.get("set_fpr"), control.get("set_fpr_ci")
    noop = (
        f"; noop control: {control.get('noop_sets_not_silent')} of "
        f"{control.get('noop_sets')} seed-sets not silent (false-positive rate {rate:.0%}, "
        f"95% CI {interval[0]:.0%}-{interval[1]:.0%})"
        if isinstance(rate, float) and interval
        else ""
    )
    too_few = control.get("too_few_seeds") or []
    if too_few:
        noop += f"; no false-positive rate for {', '.join(too_few)} (fewer than 3 reference seeds)"
    agree, declared = summary.agreement
    unjudged = getattr(summary, "unjudged", 0)
    left_out = f"; {unjudged} unjudged mutants left out" if unjudged else ""
    verdicts = (
        f"[trainwreck] measured severity agrees with the declared one for {agree} of "
        f"{declared} mutants ({agree / declared:.0%}){left_out}; {summary.misleads} mutants "
        "mislead (model fine, a reported number wrong)\n"
        if declared
        else ""
    )
    notes = "".join(f"[trainwreck] {note}\n" for note in getattr(summary, "notes", []))
    validity = (
        f"[trainwreck] mutant validity: {summary.validity} (symptoms.md, Mutant validity)\n"
        if getattr(summary, "validity", "")
        else ""
    )
    print(
        f"[trainwreck] catalog: {summary.n_mutants} mutants over {summary.n_loops} loops{noop}\n"
        + verdicts
        + validity
        + notes
        + f"[trainwreck] wrote {summary.out_dir}/ (symptoms.md, study.md, report.html, runs.parquet, ...)",
        file=sys.stderr,
    )
