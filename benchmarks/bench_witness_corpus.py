"""Does each mutant's run show the bug its hand label says it is? The witness on public code.

Usage: python benchmarks/bench_witness_corpus.py --corpus DIR [--split held_out|tune|all]
           [--seeds N] [--workers N] [--script NAME ...] [--json]

Issue 28's measurement on the offline scripts of the public corpus (benchmarks/corpus.toml,
``offline = true``; DIR holds the git mirrors, ``DIR/<owner>+<name>/repo``). Each script is
checked out of its mirror at its pinned commit into a temporary folder and run by
``trainwreck catalog`` as a custom loop, unchanged, with its argv: the reference and every
first-order mutant at default parameters, on ``--seeds`` seeds (witness_corpus.py). Each
mutant's state (confirmed, crash declared/undeclared, unconfirmed with its reason,
stillborn, equivalent, unreached) is joined with its hand label (corpus_labels.csv: ok,
eval_only, off_path, different, false) by identity and diff hash; a mutant whose hash
matches no label is unlabelled and counted nowhere.

Printed per half, held-out first: the confusion table label x state; the two targets of
the issue, with counts (of mutants labelled different or false, >= 90% end stillborn,
equivalent or unconfirmed; of mutants labelled ok, >= 97% confirmed, crashes included);
per operator; and every disagreement with its identity, label reason and witness line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:  # run as a script from anywhere
        sys.path.insert(0, _path)

import corpus_sites as cs  # noqa: E402
import witness_corpus as wc  # noqa: E402

SPLITS = (*cs.SPLITS, "all")


def measure(
    scripts: list[cs.Script],
    corpus: Path,
    labels: dict,
    *,
    seeds: int,
    workers: int,
    operators: str = "all",
    keep: Path | None = None,
    say=lambda text: None,
) -> list[wc.ScriptResult]:
    """Each script checked out, run by the catalog and joined with its labels."""
    results = []
    work = Path(tempfile.mkdtemp(prefix="witcorpus-")) if keep is None else keep
    try:
        for script in scripts:
            result = wc.ScriptResult(script)
            started = time.monotonic()
            place = work / script.name
            try:
                path, absent = wc.checkout(script, corpus, place / "checkout")
            except ValueError as error:
                result.error = f"checkout: {error}"
            else:
                if absent:
                    result.notes.append(
                        f"{len(absent)} files of its folder not in the mirror, left out: "
                        + ", ".join(absent[:3])
                        + (" ..." if len(absent) > 3 else "")
                    )
                status, said = wc.run_catalog(
                    path,
                    script.name,
                    script.argv,
                    place / "results",
                    seeds=seeds,
                    workers=workers,
                    operators=operators,
                )
                catalog = place / "results" / "catalog"
                if status != 0 or not (catalog / "symptoms.csv").is_file():
                    tail = [line for line in said.splitlines() if line.startswith("[trainwreck]")]
                    result.error = f"catalog exit {status}: {tail[-1] if tail else said[-300:]}"
                else:
                    chosen = None if operators == "all" else set(operators.split(","))
                    result.outcomes, result.orphans = wc.join(
                        script, catalog, path.name, labels, chosen
                    )
                    note = wc.reference_note(catalog)
                    if note:
                        result.notes.append(note)
            result.seconds = time.monotonic() - started
            say(
                f"{script.name}: {len(result.outcomes)} mutants in {result.seconds:.0f} s"
                + (f"; {result.error}" if result.error else "")
            )
            results.append(result)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return results


def _pct(hits: int, total: int) -> str:
    return f"{hits / total:.1%}" if total else "n/a"


def summary(results: list[wc.ScriptResult]) -> dict:
    """The numbers of one half: confusion, targets, per operator, disagreements."""
    outcomes = [o for r in results for o in r.outcomes]
    labelled = [o for o in outcomes if o.label is not None]
    confusion = {
        kind: dict(Counter(o.state for o in labelled if o.label == kind)) for kind in cs.LABEL_KINDS
    }
    wrong = [o for o in labelled if o.label in ("different", "false")]
    ok = [o for o in labelled if o.label == "ok"]
    aside = sum(o.state in wc.SET_ASIDE for o in wrong)
    shown = sum(o.state in wc.SHOWN for o in ok)
    operators: dict[str, dict[str, int]] = defaultdict(Counter)
    for o in labelled:
        operators[o.operator]["ok"] += o.label == "ok"
        operators[o.operator]["ok_confirmed"] += o.label == "ok" and o.state in wc.SHOWN
        operators[o.operator]["wrong"] += o.label in ("different", "false")
        operators[o.operator]["wrong_set_aside"] += (
            o.label in ("different", "false") and o.state in wc.SET_ASIDE
        )
        operators[o.operator]["other"] += o.label not in ("ok", "different", "false")
    return {
        "scripts": len(results),
        "errors": [f"{r.script.name}: {r.error}" for r in results if r.error],
        "notes": [f"{r.script.name}: {note}" for r in results for note in r.notes],
        "mutants": len(outcomes),
        "labelled": len(labelled),
        "unlabelled": [asdict(o) for o in outcomes if o.label is None],
        "orphans": [f"{x.script}:{x.line} {x.identity}" for r in results for x in r.orphans],
        "confusion": confusion,
        "wrong_set_aside": [aside, len(wrong)],
        "ok_confirmed": [shown, len(ok)],
        "ok_unconfirmed_reasons": dict(
            Counter(o.reason or o.state for o in ok if o.state not in wc.SHOWN)
        ),
        "operators": {name: dict(counts) for name, counts in sorted(operators.items())},
        "disagreements": [asdict(o) for o in labelled if o.agrees is False],
        "undeclared": [asdict(o) for o in outcomes if o.state == wc.CRASH_UNDECLARED],
        "seconds": round(sum(r.seconds for r in results), 1),
    }


def report(half: str, numbers: dict) -> list[str]:
    shown = [s for s in wc.STATES if any(s in row for row in numbers["confusion"].values())]
    aside, wrong = numbers["wrong_set_aside"]
    confirmed, ok = numbers["ok_confirmed"]
    out = [
        f"== {half}: {numbers['scripts']} offline scripts, {numbers['mutants']} mutants run, "
        f"{numbers['labelled']} joined with a label, {len(numbers['unlabelled'])} unlabelled "
        f"(hash or identity matches no label: counted nowhere), {len(numbers['orphans'])} labels "
        f"without a mutant, {numbers['seconds']:.0f} s",
        "",
        f"{'label':10}" + "".join(f"{s[:11]:>12}" for s in shown) + f"{'total':>8}",
    ]
    for kind, row in numbers["confusion"].items():
        if row:
            out.append(
                f"{kind:10}"
                + "".join(f"{row.get(s, 0):12d}" for s in shown)
                + f"{sum(row.values()):8d}"
            )
    reasons = "; ".join(f"{k} {n}" for k, n in sorted(numbers["ok_unconfirmed_reasons"].items()))
    out += [
        "",
        f"labelled different or false, set aside (stillborn, equivalent or unconfirmed): "
        f"{_pct(aside, wrong)} ({aside}/{wrong}; target >= 90%)",
        f"labelled ok, confirmed (crashes included): {_pct(confirmed, ok)} ({confirmed}/{ok}; "
        f"target >= 97%)" + (f"; the others: {reasons}" if reasons else ""),
        "",
        f"{'operator':32} {'ok':>4} {'conf':>5} {'diff+false':>10} {'aside':>6} {'other':>6}",
    ]
    for name, c in numbers["operators"].items():
        out.append(
            f"{name:32} {c.get('ok', 0):4d} {c.get('ok_confirmed', 0):5d} "
            f"{c.get('wrong', 0):10d} {c.get('wrong_set_aside', 0):6d} {c.get('other', 0):6d}"
        )
    out.append(f"\ndisagreements ({len(numbers['disagreements'])}):")
    for o in numbers["disagreements"]:
        state = o["state"] + (f" ({o['reason']})" if o["reason"] else "")
        out += [
            f"  {o['label']} but {state}: {o['identity']} (line {o['line']}, {o['diff_hash']})",
            f"      label: {o['label_reason']}",
            f"      witness: {o['witness']}",
        ]
    if numbers["undeclared"]:
        out.append("\nconfirmed, then an undeclared crash (for a reader to judge):")
        out += [
            f"  {o['label'] or 'unlabelled'}: {o['identity']}: {o['witness']}"
            for o in numbers["undeclared"]
        ]
    for line in numbers["errors"]:
        out.append(f"not measured: {line}")
    out += [f"note: {line}" for line in numbers["notes"]]
    for o in numbers["unlabelled"]:
        stale = f"; {o['label_reason']}" if o["label_reason"] else ""
        out.append(f"unlabelled: {o['identity']} {o['diff_hash']} ({o['state']}{stale})")
    out += [f"label without a mutant: {text}" for text in numbers["orphans"]]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="folder of git mirrors")
    parser.add_argument("--split", choices=SPLITS, default="all", help="one half (default both)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per mutant (>= 2)")
    parser.add_argument("--workers", type=int, default=2, help="runs at once")
    parser.add_argument("--script", action="append", help="only these scripts (by name)")
    parser.add_argument("--operators", default="all", help="operator specs (default: all)")
    parser.add_argument("--json", action="store_true", help="the numbers as JSON")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep checkouts and catalogs in this folder (run again with the same folder: "
        "the runs come from its cache)",
    )
    parser.add_argument("--corpus-file", type=Path, default=cs.CORPUS, help=argparse.SUPPRESS)
    parser.add_argument("--labels", type=Path, default=cs.LABELS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"--corpus {args.corpus}: no such folder (give the fetch tool's mirror folder)")
        return 2
    if args.seeds < 2:
        print(f"--seeds {args.seeds}: the catalog needs at least 2 seeds")
        return 2
    offline = [s for s in cs.load_corpus(args.corpus_file) if s.offline]
    scripts, unknown = cs.select(offline, args.script, args.split)
    if unknown:
        print(f"--script: not an offline script of the corpus: {', '.join(unknown)}")
        return 2
    os.environ.setdefault("MPLBACKEND", "Agg")  # scripts that plot, on a machine without display
    labels = cs.load_labels(args.labels)
    as_json: dict = {}
    failed = False
    for half in (h for h in cs.SPLITS if any(s.split == h for s in scripts)):
        mine = [s for s in scripts if s.split == half]
        results = measure(
            mine,
            args.corpus,
            labels,
            seeds=args.seeds,
            workers=args.workers,
            operators=args.operators,
            keep=args.keep,
            say=lambda text, half=half: print(f"[{half}] {text}", file=sys.stderr),
        )
        numbers = summary(results)
        failed = failed or bool(numbers["errors"])
        if args.json:
            as_json[half] = numbers
        else:
            print("\n".join(report(half, numbers)) + "\n")
    if args.json:
        print(json.dumps(as_json, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
