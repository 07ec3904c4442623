"""A real fault's versions run offline through the harness, and whether they stand as
ground truth (issue 32).

Only faults whose entry in the replay set says how to run offline are run (``run = {argv,
cwd, ...}``; cwd relative to the repository's root: packaged or generated data, a small
budget). The fix commit's files of the run's folders are written to a temporary folder
(outside the project, removed afterwards) and the variants go through ``run_sweep`` on the
same seeds: the fixed file (the reference, identity ``none``), the faulty file (the fix's
parent, identity ``real::<id>``) and any mutants of the fixed file the caller adds. The
cache key of each run holds the fix commit and the shim's text (``context``), so a cached
run stands for this tree.

A fault stands as ground truth for run detectors (``FaultRuns.standing``) only when, like a
mutant (docs/truth.md, "Is the mutant the bug it claims?"):

- the fixed version ends ``ok`` on every seed (no verdict without a healthy reference);
- the fault's lines ran (the faulty runs carry reach probes on the changed lines that the
  fault's lines touch): not ``unreached`` on every seed;
- the faulty runs differ from the fixed runs on some seed (``run_digest``): a fault whose
  runs are identical on every seed is *inert offline* (a ``.cuda()`` fault on a CPU).

``metrics`` (a ``loop.metrics`` pattern) names the number a script prints as its outcome
(an RL script's average return). ``shim = "gym"`` in a fault's run writes ``gym_shim.py`` as ``gym.py`` beside the script,
identical for both versions (the scripts' text is never edited), with ``episodes`` as its
budget.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.bench.real.replay import Fault, Pair
from experiments.catalog.frame import STDOUT_FILE
from experiments.catalog.runs import load_runs
from experiments.equivalence import run_digest
from experiments.harness import RunSpec, run_sweep
from experiments.harness.reach import regions
from experiments.unreached import UNREACHED

TIMEOUT_S = 300.0
LIVE = "live"
SHIM = Path(__file__).with_name("gym_shim.py")
EPISODES_LINE = "EPISODES = 0  # the replay writes the fault's episode budget here (0: no budget)"
NOT_DECLARED = (
    "not run offline: needs a data set, an environment or a model that cannot be fetched here"
)


def faulty_identity(fault: Fault) -> str:
    return f"real::{fault.id}"


@dataclass(frozen=True)
class Variant:
    """One version to run: identity ``none`` (fixed), ``real::<id>`` (faulty) or a mutant's."""

    identity: str
    source: str
    entry: dict[str, Any] | None = field(default=None, compare=False, hash=False)


@dataclass
class Run:
    digest: Any
    features: dict[str, Any]
    status: str
    folder: Path
    result: dict[str, Any]


@dataclass
class FaultRuns:
    fault: Fault
    seeds: int
    variants: list[Variant] = field(default_factory=list)
    runs: dict[tuple[str, int], Run] = field(default_factory=dict)
    standing: str = NOT_DECLARED  # LIVE, or why the fault is not counted
    # A mutant whose source is another variant's is the same run (the harness keys runs by
    # source): its identity -> that variant's.
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def counted(self) -> bool:
        return self.standing == LIVE

    def run(self, identity: str, seed: int) -> Run | None:
        return self.runs.get((self.aliases.get(identity, identity), seed))

    def of(self, identity: str) -> list[Run]:
        found = [self.run(identity, seed) for seed in range(self.seeds)]
        return [run for run in found if run is not None]

    def same(self, left: str, right: str) -> bool | None:
        """Whether two variants computed the same on every seed; None when unknown."""
        verdicts = []
        for seed in range(self.seeds):
            a, b = self.run(left, seed), self.run(right, seed)
            if a is None or b is None or a.digest is None or b.digest is None:
                return None
            verdicts.append(a.digest == b.digest)
        return all(verdicts)


def unavailable(fault: Fault) -> str | None:
    """Why this fault cannot run here at all, or None."""
    if not fault.run:
        return NOT_DECLARED
    shim = fault.run.get("shim")
    if shim not in (None, "gym"):
        return f"unknown shim {shim!r} in the replay set (known: gym)"
    if shim == "gym" and importlib.util.find_spec("gymnasium") is None:
        return "needs gymnasium for its gym shim (pip install gymnasium)"
    return None


def faulty_entry(fault: Fault, pair: Pair) -> dict[str, Any]:
    """The harness's mutant entry of the faulty version: its lines (faulty coordinates) and
    reach probes on the changed lines that the fault's lines touch (all changed lines when
    none does)."""
    changed = regions(pair.fixed, pair.faulty)
    pinned = set(fault.lines)
    touching = [
        region
        for region in changed
        if pinned & set(range(region.get("start", 0), region.get("end", -1) + 1))
        or region.get("after", -2) in pinned
        or region.get("after", -2) + 1 in pinned
    ]
    return {
        "identity": faulty_identity(fault),
        "operators": [],
        "categories": [],
        "lines": [],
        "mutant_lines": list(fault.lines),
        "reach_regions": touching or changed,
        "diff": "",
    }


def mutant_variant(entry: dict[str, Any], fixed: str, source: str) -> Variant:
    """A mutant of the fixed file as a variant, with reach probes on its changed lines."""
    return Variant(entry["identity"], source, {**entry, "reach_regions": regions(fixed, source)})


def shim_text(fault: Fault) -> str:
    episodes = int(fault.run.get("episodes", 0))
    text = SHIM.read_text(encoding="utf-8")
    return text.replace(EPISODES_LINE, f"EPISODES = {episodes}  # written by the replay")


def _tree(fault: Fault, mirrors: Path, into: Path) -> None:
    """The fix commit's files of the run's folders under ``into``. A snapshot lacks its
    largest files: those are left out, and a script that needs one fails its reference
    run, which the standing then says."""
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
    if fault.run.get("shim") == "gym":
        (into / fault.path).parent.joinpath("gym.py").write_text(shim_text(fault), "utf-8")


def _specs(fault: Fault, root: Path, variants: list[Variant], seeds: int) -> list[RunSpec]:
    run = fault.run
    shim = hashlib.sha256(shim_text(fault).encode()).hexdigest() if run.get("shim") else ""
    # The fault's own runs (a results folder finds a fault's runs by its id), of this tree.
    context = (f"real-fault:{fault.id}:{fault.repository}@{fault.fix}", f"shim:{shim}")
    return [
        RunSpec(
            script=str(root / fault.path),
            source=variant.source,
            argv=tuple(run.get("argv", ())),
            seed=seed,
            loop=fault.id,
            mutant=variant.entry,
            timeout_s=float(run.get("timeout_s", TIMEOUT_S)),
            cwd=str(root / run.get("cwd", ".")),
            context=context,
            metrics=run.get("metrics"),
        )
        for variant in variants
        for seed in range(seeds)
    ]


def load_stored(
    results_dir: Path, rows: list[dict[str, Any]] | None = None, loop: str | None = None
) -> dict[tuple[str, int], Run]:
    """(identity, seed) -> the stored run: those of a sweep's ``rows``, or every run stored
    under ``results_dir`` (of one ``loop``: a fault's id)."""
    keys = {Path(row["run_dir"]).name for row in rows or () if row.get("run_dir")}
    out = {}
    for run in load_runs(results_dir, keys=keys or None):
        if loop is not None and run.result.get("loop") != loop:
            continue
        try:
            printed = (run.folder / STDOUT_FILE).read_bytes()
        except OSError:
            printed = None
        digest = run_digest(run.result, run.features, run.curves, printed)
        key = (str(run.result.get("identity") or "none"), int(run.result.get("seed", -1)))
        out[key] = Run(digest, run.features, str(run.result.get("status")), run.folder, run.result)
    return out


def standing(runs: FaultRuns) -> str:
    """LIVE, or why the fault's runs are no ground truth (module docstring)."""
    faulty = faulty_identity(runs.fault)
    fixed = [run.status for run in runs.of("none")]
    if len(fixed) < runs.seeds or set(fixed) != {"ok"}:
        shown = "/".join(fixed) or "no run"
        return f"the fixed version does not end ok on every seed ({shown}): no reference"
    statuses = [run.status for run in runs.of(faulty)]
    if statuses and set(statuses) == {UNREACHED}:
        return "the fault's lines never ran offline (unreached on every seed)"
    same = runs.same("none", faulty)
    if same is None:
        return "not every run has a digest: whether the bug shows cannot be decided"
    if same:
        return "inert offline: the faulty runs equal the fixed runs on every seed"
    return LIVE


def stored_runs(fault: Fault, pair: Pair, results_dir: Path, mutants: list[Variant]) -> FaultRuns:
    """A fault's runs as a bench stored them (no run is made): its standing from them."""
    runs = load_stored(results_dir, loop=fault.id)
    seeds = 1 + max((seed for identity, seed in runs if identity == "none"), default=-1)
    out = FaultRuns(fault, seeds, runs=runs)
    for variant in mutants:
        if variant.source == pair.faulty:
            out.aliases[variant.identity] = faulty_identity(fault)
    if not fault.run:
        out.standing = NOT_DECLARED
    else:
        out.standing = (
            standing(out)
            if seeds
            else "no stored runs (run `trainwreck bench --real-faults` with a run detector)"
        )
    return out


def run_fault(
    fault: Fault,
    pair: Pair,
    mirrors: Path,
    seeds: int,
    results_dir: Path,
    mutants: list[Variant] = (),  # type: ignore[assignment]
    workers: int = 1,
) -> FaultRuns:
    """Run the fixed and faulty versions (and ``mutants``) of one fault; decide its standing."""
    variants: list[Variant] = []
    aliases: dict[str, str] = {}
    given = [
        Variant("none", pair.fixed),
        Variant(faulty_identity(fault), pair.faulty, faulty_entry(fault, pair)),
        *mutants,
    ]
    for variant in given:
        twin = next((v for v in variants if v.source == variant.source), None)
        if twin is None:
            variants.append(variant)
        else:
            aliases[variant.identity] = twin.identity
    out = FaultRuns(fault, seeds, variants, aliases=aliases)
    reason = unavailable(fault)
    if reason:
        out.standing = reason
        return out
    os.environ.setdefault("MPLBACKEND", "Agg")  # scripts that plot draw off screen
    with tempfile.TemporaryDirectory(prefix="trainwreck-real-fault-") as folder:
        root = Path(folder)
        _tree(fault, mirrors, root)
        rows = run_sweep(_specs(fault, root, variants, seeds), results_dir, workers=workers)
        out.runs = load_stored(results_dir, rows)
    out.standing = standing(out)
    return out
