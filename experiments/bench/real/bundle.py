"""The real faults in the benchmark bundle (``trainwreck bench export DIR --real-faults``).

Per fault of the replay set that was read: its faulty and fixed file (and the coupled
operator's rewrite of the fixed file), its provenance and ground truth in
``real_faults.jsonl``, index rows, and, with ``--results-dir``, the runs a bench stored for it
(``<results>/real_faults``) when they stand as ground truth. Unread faults keep their line in
``real_faults.jsonl`` with the reason and no files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from experiments.bench.corpus import CLEAN, Case, Truth
from experiments.bench.real.bench import RESULTS
from experiments.bench.real.cases import RealFault, mutant_variants
from experiments.bench.real.runs import LIVE, faulty_identity, stored_runs
from experiments.trace import RESULT_FILE, TRACE_FILE

FOLDER = Path("real_faults")
README = """
## Real faults

- `real_faults.jsonl`: one object per real fault of trainwreck's replay set (a training-bug
  fix in a public repository): `id`, `repository`, `fix` (the fixing commit), `parent` (the
  faulty version), `path`, `lines` (the fault's lines in the faulty file), `fixed_lines`
  (where it sits in the fixed file), `class`, `categories`, `description`, `source_thread`
  (the issue or pull request, where there is one), `coupling` (exact, equivalent, partial,
  none: does an operator's mutant of the fixed file make this fault), `coupled_operators`,
  `coupled_mutant`, `static_standing` and `run_standing` (`live`, or why the fault is no
  ground truth for that kind of detector: not read, not runnable offline, a fixed version
  that does not end ok, lines never reached, runs identical to the fixed version's), and
  `files`.
- `real_faults/<id>/faulty/<file>`, `fixed/<file>`, `mutant/<file>` (the coupled operator's
  rewrite of the fixed file): copies of the public files at those commits, under their
  repositories' licences; `real_faults/<id>/traces/<key>/`: runs of live faults.
- Score a detector on a real fault as trainwreck does: detected when the faulty version gets
  a finding the fixed version does not get (on the same seed for runs).
"""


def _write(root: Path, relative: Path, text: str) -> str:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(text, encoding="utf-8")
    return str(relative)


def write_real_faults(
    root: Path, faults: list[RealFault], results_dir: Path | None, row: Any
) -> list[dict[str, Any]]:
    """Write the real faults into the bundle at ``root``; their index rows. ``row`` builds
    an index row (``experiments.bench.export.index_row``)."""
    rows: list[dict[str, Any]] = []
    with open(root / "real_faults.jsonl", "w", encoding="utf-8") as out:
        for item in faults:
            record = item.provenance()
            record["files"] = {}
            if item.read:
                rows += _files(root, item, record, results_dir, row)
            out.write(json.dumps(record) + "\n")
    return rows


def _files(
    root: Path, item: RealFault, record: dict, results_dir: Path | None, row: Any
) -> list[dict[str, Any]]:
    assert item.pair is not None
    folder = FOLDER / item.fault.id
    name = Path(item.fault.path).name
    versions = [("fixed", item.pair.fixed, Truth()), ("faulty", item.pair.faulty, item.truth())]
    mutant = item.mutant_truth()
    if mutant is not None:
        versions.append(("mutant", item.coupling.source, mutant))
    rows = []
    for kind, text, truth in versions:
        relative = folder / kind / name
        record["files"][kind] = _write(root, relative, text)
        case = Case(f"{item.loop}/{kind}", item.loop, truth)
        validity = "" if kind == "fixed" or item.read else record["static_standing"]
        rows.append(_indexed(row(f"real_{kind}", relative, case, None, None), item, validity))
    if results_dir is None:
        return rows
    runs = stored_runs(item.fault, item.pair, results_dir / RESULTS, mutant_variants(item))
    record["run_standing"] = runs.standing
    if runs.standing != LIVE:
        return rows
    labelled = [(CLEAN, Truth()), (faulty_identity(item.fault), item.truth())]
    if mutant is not None:
        labelled.append((mutant.identity, mutant))
    copied: set[str] = set()
    for identity, truth in labelled:
        for run in runs.of(identity):
            key = str(run.result.get("key") or run.folder.name)
            if key in copied:  # the coupled mutant whose source is the faulty file's
                continue
            copied.add(key)
            relative = folder / "traces" / key
            (root / relative).mkdir(parents=True, exist_ok=True)
            for file in (RESULT_FILE, TRACE_FILE):
                if (run.folder / file).exists():
                    shutil.copyfile(run.folder / file, root / relative / file)
            record["files"].setdefault("traces", []).append(str(relative))
            case = Case(f"{item.loop}/{identity}", item.loop, truth)
            seed = run.result.get("seed")
            rows.append(_indexed(row("real_run", relative, case, seed, run.status), item, ""))
    return rows


def _indexed(row: dict[str, Any], item: RealFault, validity: str) -> dict[str, Any]:
    """The index row of a real fault's file or run: its target is the repository's path."""
    return {**row, "target": f"{item.fault.repository}/{item.fault.path}", "validity": validity}
