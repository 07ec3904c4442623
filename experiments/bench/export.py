"""``trainwreck bench export DIR``: a self-contained benchmark bundle.

Layout (written to a staging folder next to DIR, then renamed into place, so DIR is
either absent or complete)::

    DIR/README.md             what is here and how to score against it
    DIR/index.parquet         one row per case (also index.csv)
    DIR/ground_truth.jsonl    one object per mutant: operators, categories, lines...
    DIR/clean/<loop>.py       the unmutated reference loops
    DIR/mutants/<loop>/<n>_<operator>.py
    DIR/traces/<run key>/{result.json,trace.jsonl}   stored runs, when there are any
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.bench.corpus import Case, run_cases, source_cases
from experiments.bench.validity import MutantValidity, mutant_validity
from experiments.files import staged_folder
from experiments.trace import RESULT_FILE, TRACE_FILE
from experiments.unreached import STILLBORN

README = """# trainwreck detector benchmark bundle

Known training bugs ("mutants") of correct PyTorch training loops, with ground truth,
for evaluating bug detectors without installing trainwreck.

- `clean/<loop>.py`: the unmutated reference loops (a detector should report nothing).
- `mutants/<loop>/*.py`: one injected bug per file.
- `ground_truth.jsonl`: per mutant file: `identity`, `target` (the file it changes),
  `operators`, `categories`, `contexts` (where each changed site is: train, eval,
  setup, export, plot or unknown), `lines` (lines of the original that changed) and
  `mutant_lines` (the same places in the mutant), and `validity`: what the results'
  catalog measured when the mutant was not the bug it claims there (`equivalent on cpu`:
  every run identical to the unmutated loop's on that device; `unconfirmed on cpu`: no
  run showed the runtime fact its operator names, e.g. a dropped `.to(device)` on the CPU
  or eval-mode training of a model without dropout; `unreached on cpu`: its changed lines
  never ran), else empty. Such a mutant stays ground truth as code: a dropped
  `.to(device)` does nothing on the CPU and crashes on a GPU. A `stillborn` mutant (it
  crashed before showing its bug in a way its operator does not declare, e.g. a
  Python-level error at a changed line) is broken code, not its bug: its file stays under
  `mutants/`, marked in the index's `validity` column, but it has no line in
  `ground_truth.jsonl`.{validity}
- Runs of stillborn, unconfirmed, equivalent or unreached mutants are not in the bundle:
  their traces show no bug (an equivalent mutant's trace is the clean one of its seed).
- `traces/<key>/`: stored runs (`result.json`: status, operators, categories, seed...;
  `trace.jsonl`: losses per backward(), optimizer steps with gradient norm and update
  ratio, forward-mode counters, reported validation metrics), when the bundle has runs.
- `index.parquet` / `index.csv`: one row per case (`kind` = clean | mutant | run).

Scoring as trainwreck does it: detection rate = mutants with a finding / mutants;
false-positive rate = clean scripts (or clean runs, per seed) with a finding;
localization = detected mutants with a finding line in `mutant_lines`; category
accuracy = detected mutants with a finding of one of `categories`. Categories: {categories}.

Operators in this bundle: {operators}.
"""


def export_bundle(
    out: Path,
    loops: Sequence[Path],
    results_dir: Path | None = None,
    epochs: int = 1,
    real: list[Any] | None = None,
) -> dict[str, Any]:
    """Write the bundle to ``out`` atomically; returns counts. ``out`` must not exist or be
    empty. ``real``: the real faults to include (``experiments.bench.real.cases.collect``)."""
    out = out.resolve()
    validity = mutant_validity(results_dir)
    with staged_folder(out) as staging:
        cases, problems = source_cases(loops, epochs=epochs)
        runs = run_cases(results_dir) if results_dir is not None else []
        runs = [case for case in runs if validity.keeps(case)]
        index = _write_sources(staging, cases, validity) + _write_runs(staging, runs)
        if real is not None:
            from experiments.bench.real.bundle import write_real_faults

            index += write_real_faults(staging, real, results_dir, index_row)
        _write_index(staging, index)
        operators = sorted({op for case in cases for op in case.truth.operators})
        from mutator.operator import CATEGORIES

        readme = README.format(
            categories=", ".join(CATEGORIES),
            operators=", ".join(operators) or "none",
            validity=_validity_note(results_dir, validity),
        )
        if real is not None:
            from experiments.bench.real.bundle import README as REAL_README

            readme += REAL_README
        if problems:
            readme += "\nOperators that failed while building this bundle:\n\n"
            readme += "".join(f"- {problem}\n" for problem in problems)
        (staging / "README.md").write_text(readme, encoding="utf-8")
    kinds = [row["kind"] for row in index]
    counted = (
        ("clean", "mutant", "run", "real_faulty", "real_run")
        if real
        else ("clean", "mutant", "run")
    )
    return {kind: kinds.count(kind) for kind in counted} | {
        "not ground truth": sum(1 for row in index if row.get("validity") == STILLBORN),
        "problems": len(problems),
    }


def _validity_note(results_dir: Path | None, validity: MutantValidity) -> str:
    if results_dir is None:
        return (
            "\n  This bundle was written without `--results-dir`: no mutant was run, so none"
            " was checked for being stillborn or equivalent."
        )
    if validity.symptoms is None:
        return (
            "\n  Equivalence was not measured (the results folder has no catalog); stillborn,"
            " unconfirmed and unreached mutants come from the stored runs."
        )
    return ""


def _write_sources(root: Path, cases: list[Case], validity: MutantValidity) -> list[dict[str, Any]]:
    rows = []
    counters: dict[str, int] = {}
    with open(root / "ground_truth.jsonl", "w", encoding="utf-8") as truth_file:
        for case in cases:
            assert case.script is not None
            truth = case.truth
            if truth.clean:
                relative = Path("clean") / f"{case.loop}.py"
                kind = "clean"
            else:
                counters[case.loop] = counters.get(case.loop, 0) + 1
                name = f"{counters[case.loop]:04d}_{'+'.join(truth.operators)}.py"
                relative = Path("mutants") / case.loop / name
                kind = "mutant"
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(case.script.source, encoding="utf-8")
            why = validity.of(case.loop, truth.identity) if kind == "mutant" else ""
            row = {**index_row(kind, relative, case, seed=None, status=None), "validity": why}
            if kind == "mutant" and validity.keeps(case):
                truth_file.write(json.dumps(row) + "\n")
            rows.append(row)
    return rows


def _write_runs(root: Path, runs: list[Case]) -> list[dict[str, Any]]:
    rows = []
    for case in runs:
        assert case.run_folder is not None
        key = str(case.result.get("key") or case.run_folder.name)
        target = root / "traces" / key
        target.mkdir(parents=True, exist_ok=True)
        for name in (RESULT_FILE, TRACE_FILE):
            if (case.run_folder / name).exists():
                shutil.copyfile(case.run_folder / name, target / name)
        row = index_row("run", Path("traces") / key, case, case.seed, case.result.get("status"))
        rows.append({**row, "validity": ""})
    return rows


def index_row(kind: str, path: Path, case: Case, seed: int | None, status: Any) -> dict[str, Any]:
    """One index row: where the file is, and the case's ground truth (same keys, same order,
    for scripts and runs)."""
    truth = case.truth
    return {
        "kind": kind,
        "path": str(path),
        "loop": case.loop,
        "identity": truth.identity,
        "target": _target(truth.identity),
        "operators": list(truth.operators),
        "categories": list(truth.categories),
        "lines": list(truth.lines),
        "mutant_lines": list(truth.mutant_lines),
        "contexts": list(truth.contexts),
        "seed": seed,
        "status": status,
    }


def _target(identity: str) -> str | None:
    """The file a mutant changes (``model.py`` of ``model.py::MLP.forward::op#0``)."""
    return identity.split("::", 1)[0] if "::" in identity else None


def _write_index(root: Path, rows: list[dict[str, Any]]) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(rows[0].keys()) if rows else ["kind", "path"])
    frame["seed"] = (
        frame.get("seed", pd.Series(dtype="float")).astype("Int64")
        if len(frame)
        else frame.get("seed")
    )
    frame.to_parquet(root / "index.parquet", index=False)
    flat = frame.copy()
    for column in ("operators", "categories", "lines", "mutant_lines", "contexts"):
        if column in flat:
            flat[column] = flat[column].map(
                lambda v: " ".join(map(str, v)) if isinstance(v, list) else ""
            )
    flat.to_csv(root / "index.csv", index=False)
