"""mutmut 3's surviving mutants, listed and sampled for reading (issue 30).

    python benchmarks/mutmut_survivors.py RUN [RUN...] [--sample 25] [--seed 30] [--names]
    python benchmarks/mutmut_survivors.py RUN [RUN...] --labels LABELS.csv

``RUN`` is the folder ``mutmut run`` ran in (``bench_public_suites.py --results DIR`` leaves
one per project in ``DIR/<project>/mutmut``). Read from its ``mutants/`` folder alone, so
mutmut need not be installed: each ``<file>.py.meta`` (JSON) holds the exit code of each
mutant's tests (``exit_code_by_key``; 0 is a survivor), and ``<file>.py`` beside it holds the
original of each mutated function (``x_<name>__mutmut_orig``, or ``xǁ<Class>ǁ<method>`` for
a method) next to each mutant (``...__mutmut_<N>``). Per run: the counts by status, the
number of survivors, and a seeded random sample of them (all when fewer), each with its
file, its function and the diff of the mutated function against the original.

``--labels``: the reader's labels of those samples (``mutmut_survivors_labels.csv``), summed
per run: counts by label, and how many of all survivors are training gaps, estimated from
the sample with a Wilson 95% interval. A label for a mutant that is not a survivor of the
run is an error: the labels and the run must be the same.
"""

from __future__ import annotations

import argparse
import ast
import csv
import difflib
import json
import math
import random
import re
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# mutmut 3.8.1's ``stats.status_by_exit_code``, the part a finished run produces.
STATUS_BY_EXIT_CODE: dict[int | None, str] = {
    0: "survived",
    1: "killed",
    3: "killed",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    35: "suspicious",
    36: "timeout",
    37: "caught by type check",
    None: "not checked",
}
KEY = re.compile(r"^(?P<module>.*)\.(?P<function>x[_ǁ].*)__mutmut_(?P<number>\d+)$")
CLASS_SEPARATOR = "ǁ"


@dataclass(frozen=True)
class Survivor:
    name: str
    file: str
    function: str
    diff: str


def status(exit_code: int | None) -> str:
    return STATUS_BY_EXIT_CODE.get(exit_code, "suspicious")


def readable_function(mangled: str) -> str:
    """``x_fit`` -> ``fit``; ``xǁTrainerǁfit`` -> ``Trainer.fit``."""
    if mangled.startswith("x" + CLASS_SEPARATOR):
        return ".".join(mangled[2:].split(CLASS_SEPARATOR))
    return mangled[2:]


def function_sources(path: Path) -> dict[str, str]:
    """Every function and method defined in ``path``, by name, dedented."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found: dict[str, str] = {}
    module = ast.parse(text)
    # mutmut writes its functions at module level and its methods in their class's body.
    nodes = [*module.body]
    nodes += [
        child for node in module.body if isinstance(node, ast.ClassDef) for child in node.body
    ]
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
            found[node.name] = textwrap.dedent("\n".join(lines[node.lineno - 1 : node.end_lineno]))
    return found


def _diff(original: str, mutant: str, mangled: str, number: str) -> str:
    # Both defs carry their mangled names; naming them alike keeps the def line out of the diff.
    mutant = mutant.replace(f"{mangled}__mutmut_{number}(", f"{mangled}__mutmut_orig(", 1)
    return "\n".join(
        difflib.unified_diff(
            original.splitlines(), mutant.splitlines(), "original", "mutant", lineterm=""
        )
    )


def meta_files(run: Path) -> list[Path]:
    return sorted((run / "mutants").rglob("*.py.meta"))


def exit_codes(run: Path) -> dict[str, tuple[Path, int | None]]:
    """Each mutant's name -> (its mutated source file, its exit code)."""
    found: dict[str, tuple[Path, int | None]] = {}
    for meta in meta_files(run):
        source = meta.with_suffix("")
        for name, code in json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"].items():
            found[name] = (source, code)
    return found


def _order(name: str) -> tuple[str, int]:
    match = KEY.match(name)
    return (name, 0) if match is None else (name[: match.start("number")], int(match["number"]))


def survivors(run: Path) -> list[Survivor]:
    """Every survivor of the run, in file, function and mutant-number order."""
    codes = exit_codes(run)
    sources: dict[Path, dict[str, str]] = {}
    found = []
    for name in sorted(codes, key=_order):
        source, code = codes[name]
        if code != 0:
            continue
        match = KEY.match(name)
        if match is None:
            raise ValueError(f"{name}: not a mutmut 3 mutant name (module.x_function__mutmut_N)")
        if source not in sources:
            sources[source] = function_sources(source)
        functions = sources[source]
        mangled, number = match["function"], match["number"]
        original = functions.get(f"{mangled}__mutmut_orig")
        mutant = functions.get(f"{mangled}__mutmut_{number}")
        diff = (
            _diff(original, mutant, mangled, number)
            if original is not None and mutant is not None
            else f"(function {mangled}__mutmut_{number} or its original not found in {source})"
        )
        file = str(source.relative_to(run / "mutants"))
        found.append(Survivor(name, file, readable_function(mangled), diff))
    return found


def sample(found: list[Survivor], size: int, seed: int) -> list[Survivor]:
    """A seeded random sample of ``size`` (all when fewer), in the listing's order."""
    if len(found) <= size:
        return list(found)
    picked = set(random.Random(seed).sample(range(len(found)), size))
    return [survivor for index, survivor in enumerate(found) if index in picked]


def project_name(run: Path) -> str:
    return run.parent.name if run.name == "mutmut" else run.name


def wilson(hits: int, size: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% by default) of a proportion seen as hits/size."""
    share = hits / size
    centre = (share + z * z / (2 * size)) / (1 + z * z / size)
    spread = (
        z * math.sqrt(share * (1 - share) / size + z * z / (4 * size * size)) / (1 + z * z / size)
    )
    return max(0.0, centre - spread), min(1.0, centre + spread)


def read_labels(path: Path) -> dict[str, dict[str, str]]:
    """The labels CSV (project, mutant, label, reason): project -> mutant -> label."""
    found: dict[str, dict[str, str]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            found.setdefault(row["project"], {})[row["mutant"]] = row["label"]
    return found


def label_summary(run: Path, labels: dict[str, str], gap: str = "training gap") -> str:
    """One table row: survivors, labelled, counts by label, and how many of all survivors
    are ``gap``: the sample's share scaled to all survivors, with its Wilson 95% interval,
    held between what was seen (the gaps labelled) and that plus every survivor not read."""
    found = {survivor.name for survivor in survivors(run)}
    strays = sorted(set(labels) - found)
    if strays:
        raise ValueError(f"labelled but not a survivor of this run: {strays[0]}")
    counts = Counter(labels.values())
    hits, size, total = counts.get(gap, 0), len(labels), len(found)
    low, high = wilson(hits, size)
    low_count = max(hits, round(low * total))
    high_count = min(hits + total - size, round(high * total))
    by_label = ", ".join(f"{label} {count}" for label, count in sorted(counts.items()))
    share = f"{hits}/{size} ({100 * low:.0f}-{100 * high:.0f}%)"
    estimate = f"{hits / size * total:.0f} ({low_count}-{high_count})"
    return f"| {project_name(run)} | {total} | {size} | {by_label} | {share} | {estimate} |"


def report(run: Path, size: int, seed: int, names_only: bool) -> str:
    counts = Counter(status(code) for _, code in exit_codes(run).values())
    found = survivors(run)
    picked = sample(found, size, seed)
    project = project_name(run)
    head = [
        f"# {project} ({run})",
        "statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
        f"survivors: {len(found)}; sampled: {len(picked)} (seed {seed})",
    ]
    if names_only:
        return "\n".join(head + [f"{s.name}\t{s.file}\t{s.function}" for s in picked])
    body = [f"\n## {s.name}\nfile: {s.file}\nfunction: {s.function}\n{s.diff}" for s in picked]
    return "\n".join(head + body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="folders mutmut 3 ran in")
    parser.add_argument("--sample", type=int, default=25, help="survivors per run (default 25)")
    parser.add_argument("--seed", type=int, default=30, help="random seed (default 30)")
    parser.add_argument("--names", action="store_true", help="one line per sampled survivor")
    parser.add_argument(
        "--labels",
        type=Path,
        help="a labels CSV (project, mutant, label, reason): print per run the counts by label "
        "and the estimated number of training gaps among all survivors instead",
    )
    args = parser.parse_args(argv)
    if args.sample < 1:
        print(f"--sample must be 1 or more, not {args.sample}", file=sys.stderr)
        return 2
    for run in args.runs:
        if not meta_files(run):
            print(
                f"{run}: no mutants/**/*.py.meta here; give the folder mutmut 3 ran in",
                file=sys.stderr,
            )
            return 2
    if args.labels is not None and not args.labels.is_file():
        print(f"--labels {args.labels}: no such file; give the labels CSV", file=sys.stderr)
        return 2
    labels = read_labels(args.labels) if args.labels is not None else {}
    if labels:
        print(
            "| project | survivors | labelled | by label | training gaps in the sample "
            "(Wilson 95%) | training gaps among all survivors |\n|---|---|---|---|---|---|"
        )
    for run in args.runs:
        try:
            if args.labels is None:
                print(report(run, args.sample, args.seed, args.names))
            elif project_name(run) not in labels:
                print(
                    f"{run}: {args.labels} labels no mutant of {project_name(run)}", file=sys.stderr
                )
                return 2
            else:
                print(label_summary(run, labels[project_name(run)]))
        except (ValueError, KeyError, SyntaxError, json.JSONDecodeError) as error:
            print(f"{run}: cannot read mutmut's results: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
