"""The real bug beside its mutant, run through the harness (issue 32).

Only faults whose entry in the replay set says how to run offline (``run = {argv = [...],
cwd = "..."}``, cwd relative to the repository's root: packaged or generated data, a small budget) are run. For each, the fix
commit's tree is written to a temporary folder (outside the project; removed afterwards)
and three kinds of runs go through ``run_sweep`` on the same seeds: the fixed file (the
reference), the faulty file (the fix's parent, in the same tree) and the candidate mutants
of the static coupling (the exact one, or those of the fault's operator and those touching
the fault). What each run computed is compared with ``experiments.equivalence.run_digest``:

- a fault whose faulty runs have the fixed runs' digest on every seed is *inert offline*:
  the bug does not show in this run (a ``.cuda()`` fault on a CPU), so no mutant can be
  called equivalent to it, and the table says so;
- otherwise a candidate whose runs have the faulty runs' digest on every seed makes the
  fault ``equivalent`` (an ``exact`` verdict stays ``exact``).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from real_faults_coupling import EQUIVALENT, EXACT, Coupling
from real_faults_set import Fault, read_pair

from experiments.catalog.frame import STDOUT_FILE
from experiments.catalog.runs import load_runs
from experiments.equivalence import run_digest
from experiments.harness import RunSpec, run_sweep
from mutations.registry import all_variants
from mutator import SourceFile

TIMEOUT_S = 300.0
SHOWN = ("optimizer_steps", "initial_loss", "final_loss", "eval_mode_train_frac", "first_nan_step")


def _tree(fault: Fault, mirrors: Path, into: Path) -> None:
    """The fix commit's files of the run's folder under ``into`` (nothing enters the
    project). A snapshot lacks its largest files: those are left out, and a script that
    needs one fails its reference run, which the table then says."""
    git = ["git", f"--git-dir={fault.git_dir(mirrors)}"]
    folders = sorted({fault.run.get("cwd", "."), Path(fault.path).parent.as_posix()})
    listing = subprocess.run(
        [*git, "ls-tree", "-r", "-z", fault.fix, "--", *folders],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for item in filter(None, listing.split("\0")):
        meta, path = item.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind != "blob" or mode == "120000":
            continue
        blob = subprocess.run([*git, "cat-file", "blob", sha], capture_output=True)
        if blob.returncode != 0:
            continue
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)


def _candidates(coupling: Coupling, fixed: str, name: str) -> list[tuple[dict, str]]:
    """(manifest entry, source) of each candidate mutant of the static coupling."""
    wanted = set(coupling.candidates)
    source = SourceFile(fixed, name)
    sites = {site.identity: site for site in source.find_sites(all_variants())}
    found = []
    for identity in sorted(wanted):
        parts = [sites.get(part) for part in identity.split("+")]
        if any(part is None for part in parts):
            continue
        mutant = source.apply(parts)
        found.append((mutant.manifest_entry(), mutant.source))
    return found


def _specs(fault: Fault, root: Path, variants: list[tuple[dict | None, str]], seeds: int):
    run, script = fault.run, root / fault.path
    folder = root / run.get("cwd", ".")
    return [
        RunSpec(
            script=str(script),
            source=text,
            argv=tuple(run.get("argv", ())),
            seed=seed,
            loop=fault.id,
            mutant=mutant,
            timeout_s=float(run.get("timeout_s", TIMEOUT_S)),
            cwd=str(folder),
        )
        for mutant, text in variants
        for seed in range(seeds)
    ]


def _digests(results_dir: Path, rows: list[dict[str, Any]]) -> dict[tuple[str, int], Any]:
    """(identity, seed) -> (digest, features, status) of each run the sweep returned."""
    keys = {Path(row["run_dir"]).name for row in rows if row.get("run_dir")}
    out = {}
    for run in load_runs(results_dir, keys=keys or None):
        try:
            printed = (run.folder / STDOUT_FILE).read_bytes()
        except OSError:
            printed = None
        digest = run_digest(run.result, run.features, run.curves, printed)
        key = (run.result.get("identity") or "none", int(run.result.get("seed", -1)))
        out[key] = (digest, run.features, run.result.get("status"))
    return out


def _same(runs: dict, left: str, right: str, seeds: int) -> bool | None:
    """True/False whether two variants computed the same on every seed; None if unknown."""
    verdicts = []
    for seed in range(seeds):
        a, b = runs.get((left, seed)), runs.get((right, seed))
        if a is None or b is None or a[0] is None or b[0] is None:
            return None
        verdicts.append(a[0] == b[0])
    return all(verdicts)


def _row(label: str, runs: dict, identity: str, seeds: int) -> str:
    cells = []
    statuses = sorted({str(runs[(identity, s)][2]) for s in range(seeds) if (identity, s) in runs})
    for name in SHOWN:
        values = [runs[(identity, s)][1].get(name) for s in range(seeds) if (identity, s) in runs]
        shown = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in values]
        cells.append("/".join(shown) or "-")
    return f"| {label} | {'/'.join(statuses) or '-'} | " + " | ".join(cells) + " |"


def run_fault(coupling: Coupling, mirrors: Path, seeds: int, results_dir: Path) -> list[str]:
    """Run one offline fault; update the coupling's verdict; the side-by-side rows."""
    fault = coupling.fault
    pair = read_pair(fault, mirrors)
    with tempfile.TemporaryDirectory(prefix="trainwreck-real-fault-") as folder:
        root = Path(folder)
        _tree(fault, mirrors, root)
        script = root / fault.path
        faulty_entry = {
            "identity": f"real::{fault.id}",
            "operators": [],
            "lines": list(fault.lines),
            "diff": "",
        }
        candidates = _candidates(coupling, pair.fixed, script.name)
        variants = [(None, pair.fixed), (faulty_entry, pair.faulty), *candidates]
        rows = run_sweep(_specs(fault, root, variants, seeds), results_dir, workers=1)
        runs = _digests(results_dir, rows)
    faulty = faulty_entry["identity"]
    lines = [f"### {fault.id} ({fault.fault_class}; {seeds} seeds)", ""]
    healthy = {runs[("none", s)][2] for s in range(seeds) if ("none", s) in runs} == {"ok"}
    inert = _same(runs, "none", faulty, seeds) if healthy else None
    if not healthy:
        lines.append(
            "The fixed version does not end `ok` on every seed here (an API of its time that "
            "today's PyTorch refuses, a missing package): no equivalence and no comparison."
        )
    elif inert is None:
        lines.append("Not every run has a digest: equivalence cannot be decided.")
    elif inert:
        lines.append(
            "The faulty version computes exactly what the fixed one computes on every seed: "
            "the fault is inert in this offline run, so no mutant is called equivalent to it."
        )
    elif inert is False:
        lines.append(
            "The faulty version's trace differs from the fixed one's: the bug is live here."
        )
    matched = []
    for entry, _ in candidates:
        if inert is False and _same(runs, entry["identity"], faulty, seeds):
            matched.append(entry["identity"])
    if matched and coupling.verdict != EXACT:
        coupling.verdict = EQUIVALENT
        coupling.identity = matched[0]
        coupling.operators = tuple(sorted({i.split("::")[-1].split("#")[0] for i in matched}))
    lines += ["", "| run | status | " + " | ".join(SHOWN) + " |", "|---|---|" + "---|" * len(SHOWN)]
    lines.append(_row("fixed (reference)", runs, "none", seeds))
    lines.append(_row("faulty (the real bug)", runs, faulty, seeds))
    if not candidates:
        lines.append(
            "| (no mutant of the fixed file is a candidate for this fault) |"
            + " |" * (len(SHOWN) + 1)
        )
    for entry, text in candidates:
        if text == pair.faulty:
            # The same source is the same run (the harness keys runs by source): its rows.
            label = f"mutant {entry['identity']} = faulty (the same source)"
            lines.append(_row(label, runs, faulty, seeds))
            continue
        same = _same(runs, entry["identity"], faulty, seeds) if healthy else False
        note = {True: " = faulty", False: "", None: " (no digest)"}[same]
        lines.append(_row(f"mutant {entry['identity']}{note}", runs, entry["identity"], seeds))
    return [*lines, ""]


def run_offline(results: list[Coupling], mirrors: Path, seeds: int, results_dir: str) -> list[str]:
    """Every fault that declares an offline run: the side-by-side sections."""
    runnable = [c for c in results if c.fault.run and c.verdict != "unread"]
    os.environ.setdefault("MPLBACKEND", "Agg")  # scripts that plot draw off screen
    out = [
        f"{len(runnable)} of {len(results)} faults declare an offline run "
        "(packaged or generated data); the others need data sets, environments or models "
        "that cannot be fetched here.",
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="trainwreck-real-results-") as scratch:
        folder = Path(results_dir) if results_dir else Path(scratch)
        for coupling in runnable:
            out += run_fault(coupling, mirrors, seeds, folder)
    return out
