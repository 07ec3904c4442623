"""The operators measured on public training scripts: hand labels joined with the mutants.

Used by ``python benchmarks/site_match.py --corpus DIR`` (issue 22). Three hand-written files:

- ``benchmarks/corpus.toml``: the scripts, pinned (repository, commit, path, style). Each is
  read from ``DIR/<owner>+<name>/repo`` (a bare git directory, or a work tree's ``.git``
  inside it: the layouts the ``fetch`` tool produces) with ``git show COMMIT:PATH``; nothing
  is copied into the project.
- ``benchmarks/corpus_labels.csv``: one row per first-order mutant (every site of every
  operator at its default parameters): script, identity, diff_hash, line, operator, label,
  reason. The key is (script, identity, diff_hash), where diff_hash is a short hash of the
  mutant's diff without its headers: a changed rewrite at the same site gets a new hash, so
  its old label no longer applies and the mutant is reported as unlabelled (``stale``).
- ``benchmarks/corpus_expected.toml``: per script, operator -> the lines where the named bug,
  injected into the default training run, lands (entries as in tests/styles/expected: ``N``,
  ``{any = [..]}``, ``{line = N, after = M}``). An operator a script does not list has no
  expected site there.

Labels. A mutant's site is *on the default path* when a run with the script's defaults
executes its changed lines. The condition of a label is the one of docs/benchmarks.md
(issue 14): a mutant injects the named bug when, running it, the condition its operator's
summary names holds, whatever the symptom.

- ``ok``: the named bug, on the default path, where that bug belongs (a training bug in the
  training step, an evaluation bug such as a missing ``eval()`` in the evaluation the
  default run performs);
- ``eval_only``: the named bug of a training operator, but in evaluation or reporting code
  of the default run only (a test batch left on the CPU, a test loader unshuffled ...);
- ``off_path``: the named bug, in code the default run never executes (a flag's branch, a
  function nothing calls, a resume path);
- ``different``: the mutant changes what the script does, but not as the name says (an
  activation removed inside a hand-written formula, targets instead of inputs unscaled);
- ``false``: not the bug at all: it changes nothing (an equivalent mutant) or fails for a
  reason of the rewrite (a keyword a callee cannot take, a name from another scope).

Metrics.

- *Default-path precision* = ok / (ok + different + false). Every ``different`` or
  ``false`` mutant counts against it wherever it is (a wrong mutant is wrong on any path);
  ``eval_only`` and ``off_path`` are left out: the right bug in a place that says nothing
  about the training path. An operator that makes the engine raise on a script (no mutant
  at all) counts as one ``false`` there.
- *Overall precision* = (ok + eval_only + off_path) / every labelled mutant (+ engine errors).
- *Recall* = expected entries matched by an ``ok`` mutant of their operator / expected
  entries. A mutant labelled ``ok`` whose line no expected entry accepts, and an expected
  entry matched only by mutants labelled otherwise, are inconsistencies: listed, and
  ``--check`` fails on them, as on unlabelled mutants.
"""

from __future__ import annotations

import csv
import hashlib
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:  # run as a script from anywhere, or loaded by a test
        sys.path.insert(0, _path)

import site_match  # noqa: E402

from experiments import mirrors  # noqa: E402
from mutations.registry import all_operators  # noqa: E402
from mutator import MutationError, SourceFile  # noqa: E402
from mutator.project import Project  # noqa: E402

CORPUS = HERE / "corpus.toml"
LABELS = HERE / "corpus_labels.csv"
EXPECTED = HERE / "corpus_expected.toml"
LABEL_KINDS = ("ok", "eval_only", "off_path", "different", "false")
SPLITS = ("held_out", "tune")  # issue 29: the held-out half is reported first
COLUMNS = ("script", "identity", "diff_hash", "line", "operator", "label", "reason")


@dataclass(frozen=True)
class Script:
    name: str
    repository: str
    commit: str
    path: str
    style: str
    split: str = "tune"
    # which held-out draw brought the script in (corpus.toml's header): 1 for the first
    # corpus, 2 for the fresh repositories added once draw 1 had been read for fixes
    draw: int = 1
    offline: bool = False  # runs on CPU in seconds on shipped or generated data, with argv
    argv: tuple[str, ...] = ()

    def git_dir(self, root: Path) -> Path:
        """The mirror's git directory: a bare one, or the ``.git`` of a work tree."""
        return mirrors.git_dir(root, self.repository)


@dataclass(frozen=True)
class CorpusMutant:
    script: str
    identity: str
    diff_hash: str
    line: int
    operator: str
    context: str
    landing: int | None
    diff: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.script, self.identity, self.diff_hash)

    @property
    def found(self) -> site_match.Found:
        return site_match.Found(self.line, self.landing)


@dataclass(frozen=True)
class Label:
    script: str
    identity: str
    diff_hash: str
    line: int
    operator: str
    label: str
    reason: str


def load_corpus(path: Path | None = None) -> list[Script]:
    path = path or CORPUS
    raw = tomllib.loads(path.read_text(encoding="utf-8"))["script"]
    scripts = [Script(**{**entry, "argv": tuple(entry.get("argv", ()))}) for entry in raw]
    names = Counter(s.name for s in scripts)
    if doubled := sorted(n for n, c in names.items() if c > 1):
        raise ValueError(f"{path.name}: script names used twice: {', '.join(doubled)}")
    if odd := sorted(s.name for s in scripts if s.split not in SPLITS):
        raise ValueError(f"{path.name}: split is one of {', '.join(SPLITS)}: {', '.join(odd)}")
    splits_of: dict[str, set[str]] = defaultdict(set)
    for s in scripts:
        splits_of[s.repository].add(s.split)
    if mixed := sorted(r for r, found in splits_of.items() if len(found) > 1):
        raise ValueError(f"{path.name}: a repository lies in one split only: {', '.join(mixed)}")
    return scripts


def select(
    scripts: list[Script], names: list[str] | None, split: str = "all", draw: int | None = None
) -> tuple[list[Script], list[str]]:
    """The scripts named (all without names) of one half and draw, and the names that are
    none of ``scripts`` (for the caller's one-line error)."""
    unknown = sorted(set(names or ()) - {s.name for s in scripts})
    chosen = [
        s
        for s in scripts
        if (not names or s.name in names) and split in ("all", s.split) and draw in (None, s.draw)
    ]
    return chosen, unknown


def read_pinned(script: Script, root: Path) -> str:
    """The script's text at its pinned commit; ValueError saying what is missing."""
    git_dir = script.git_dir(root)
    if not git_dir.is_dir():
        raise ValueError(f"no mirror of {script.repository} at {git_dir}")
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{script.commit}:{script.path}"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise ValueError(
            f"{script.repository} has no {script.path} at {script.commit[:12]}: "
            f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'git failed'}"
        )
    return done.stdout


def pinned_project(script: Script, root: Path) -> Project:
    """The script's repository at its pinned commit, as the project its imports read."""
    git = ["git", f"--git-dir={script.git_dir(root)}"]

    def read(path: str) -> str | None:
        done = subprocess.run([*git, "show", f"{script.commit}:{path}"], capture_output=True)
        if done.returncode != 0:
            return None
        try:
            return done.stdout.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def listdir(folder: str) -> list[str]:
        spec = f"{script.commit}:{folder}" if folder else f"{script.commit}:"
        done = subprocess.run([*git, "ls-tree", "--name-only", spec], capture_output=True)
        return done.stdout.decode("utf-8", "replace").splitlines() if done.returncode == 0 else []

    return Project(read, listdir)


def diff_hash(diff: str) -> str:
    """A short hash of the diff's body: file headers and hunk positions left out."""
    body = [line for line in diff.splitlines() if not line.startswith(("---", "+++", "@@"))]
    return hashlib.sha256("\n".join(body).encode("utf-8")).hexdigest()[:10]


def mutants_of(
    source: str,
    name: str,
    operators=None,
    project: Project | None = None,
    path: str | None = None,
) -> tuple[list[CorpusMutant], list[str]]:
    """Every first-order mutant of ``source`` and the operators that made the engine raise
    (as ``"operator: message"``); one raising operator leaves the others' mutants whole.
    ``project``/``path``: the repository around the script, read where an operator asks
    what an imported model holds."""
    operators = all_operators() if operators is None else operators
    parsed = SourceFile(source, f"{name}.py", project, path)
    errors: list[str] = []
    try:
        sites = parsed.find_sites(operators)
    except Exception:  # an engine bug is a measurement here, not a stop
        sites = []
        for operator in operators:
            try:
                sites.extend(parsed.find_sites([operator]))
            except Exception as error:
                errors.append(f"{operator.name}: {type(error).__name__}: {error}".splitlines()[0])
        sites.sort(key=lambda s: (s.line, s.column))
    text_lines = source.splitlines()
    found: list[CorpusMutant] = []
    for site in sites:
        try:
            mutant = parsed.apply([site])
        except MutationError as error:
            errors.append(f"{site.operator.name}: {error}".splitlines()[0])
            continue
        elsewhere = set(mutant.lines) - site_match._own_lines(site, text_lines)
        landing = (
            site_match._code_line_at_or_above(max(elsewhere), text_lines) if elsewhere else None
        )
        found.append(
            CorpusMutant(
                script=name,
                identity=site.identity,
                diff_hash=diff_hash(mutant.diff),
                line=site.line,
                operator=site.operator.name,
                context=site.context,
                landing=landing,
                diff=mutant.diff,
            )
        )
    return found, errors


def load_labels(path: Path | None = None) -> dict[tuple[str, str, str], Label]:
    """(script, identity, diff_hash) -> label; a row with an empty label is no label."""
    path = path or LABELS
    if not path.exists():
        return {}
    labels: dict[tuple[str, str, str], Label] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.DictReader(handle), 2):
            if not row["label"]:
                continue
            if row["label"] not in LABEL_KINDS:
                raise ValueError(
                    f"{path.name}:{number}: label {row['label']!r} is not one of "
                    f"{', '.join(LABEL_KINDS)}"
                )
            label = Label(**{**row, "line": int(row["line"])})
            key = (label.script, label.identity, label.diff_hash)
            if key in labels:
                raise ValueError(f"{path.name}:{number}: a second row for {label.identity}")
            labels[key] = label
    return labels


def load_expected(path: Path | None = None) -> dict[str, dict[str, list[site_match.Entry]]]:
    """Script -> operator -> expected entries (the tests/styles entry forms)."""
    path = path or EXPECTED
    if not path.exists():
        return {}
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    return {
        script: {
            op: [site_match._entry(e, f"{path.name}: {script}.{op}") for e in entries]
            for op, entries in ops.items()
        }
        for script, ops in raw.items()
    }


def collect(
    scripts: Iterable[Script], root: Path
) -> tuple[dict[str, list[CorpusMutant]], dict[str, list[str]], list[str]]:
    """Mutants and engine errors per readable script, and the scripts that could not be read."""
    mutants: dict[str, list[CorpusMutant]] = {}
    errors: dict[str, list[str]] = {}
    missing: list[str] = []
    operators = all_operators()
    for script in scripts:
        try:
            source = read_pinned(script, root)
        except ValueError as error:
            missing.append(f"{script.name}: {error}")
            continue
        project = pinned_project(script, root)
        mutants[script.name], errors[script.name] = mutants_of(
            source, script.name, operators, project, script.path
        )
    return mutants, errors, missing
