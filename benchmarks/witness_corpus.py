"""The witness measured on public scripts (issue 28): each labelled mutant's runs against its
hand label. Used by ``bench_witness_corpus.py`` (which prints the tables).

For each offline script of the corpus (``corpus.toml``: ``offline = true``, with ``argv``),
``checkout`` writes the script's folder at the pinned commit into a temporary folder (never
into the project, never into the mirror), ``run_catalog`` runs ``trainwreck catalog`` on it
with a custom loop (the script unchanged, from its own folder, with its argv; every
first-order mutant at default parameters; a few seeds), and ``join`` reads the catalog's
verdict of each mutant and pairs it with its label by identity and diff hash
(``corpus_sites``). A mutant whose hash matches no label is ``unlabelled`` (its label is
*stale* when one names the same identity with another diff) and counted nowhere; a label whose mutant the engine no longer makes is listed as ``orphan``.

A mutant's *state* is what the catalog says of it, in the words of docs/truth.md:
``confirmed`` (its witness fired), ``crash declared`` (it crashed as its operator declares
its bug crashes), ``crash undeclared`` (its witness fired, then it crashed in a way its
operator does not declare), ``unconfirmed`` (with the reason), ``stillborn``, ``equivalent``,
``unreached``; ``unknown``/``invalid`` for what the catalog could not decide or build.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from unittest import mock

import corpus_sites as cs
import pandas as pd

CONFIRMED = "confirmed"
CRASH_DECLARED = "crash declared"
CRASH_UNDECLARED = "crash undeclared"
STATES = (
    CONFIRMED,
    CRASH_DECLARED,
    CRASH_UNDECLARED,
    "unconfirmed",
    "stillborn",
    "equivalent",
    "unreached",
    "unknown",
    "invalid",
)
# The states that count as the bug (the witness's ``confirmed``, crashes included) and
# those that set a mutant aside as not the bug it claims (issue 28's target).
SHOWN = (CONFIRMED, CRASH_DECLARED, CRASH_UNDECLARED)
SET_ASIDE = ("stillborn", "equivalent", "unconfirmed")
_ASIDE_MEASURED = ("stillborn", "unconfirmed", "equivalent", "unreached", "invalid")


@dataclass(frozen=True)
class Outcome:
    """One mutant of one script: its catalog state joined with its label (None: unlabelled)."""

    script: str
    identity: str
    diff_hash: str
    operator: str
    line: int
    state: str
    reason: str  # unconfirmed: "no effect on this model" ...; else ""
    witness: str  # the catalog's one line: what fired, or why nothing did
    label: str | None
    label_reason: str
    seeds: int

    @property
    def agrees(self) -> bool | None:
        """Whether the witness says what the label says (None: no target covers it)."""
        if self.label == "ok":
            return self.state in SHOWN
        if self.label in ("different", "false"):
            return self.state in SET_ASIDE
        return None


@dataclass
class ScriptResult:
    script: cs.Script
    outcomes: list[Outcome] = field(default_factory=list)
    orphans: list[cs.Label] = field(default_factory=list)
    error: str | None = None  # the reference failed, the checkout failed...
    notes: list[str] = field(default_factory=list)  # what a reader of the numbers must know
    seconds: float = 0.0


def checkout(script: cs.Script, root: Path, into: Path) -> tuple[Path, list[str]]:
    """The folder of ``script`` at its pinned commit (every file under it), written under
    ``into`` from the mirror under ``root``, which is only read; the script's path there and
    the files the mirror does not hold (a snapshot may leave its largest files out)."""
    git_dir = script.git_dir(root)
    if not git_dir.is_dir():
        raise ValueError(f"no mirror of {script.repository} at {git_dir}")
    git = ["git", f"--git-dir={git_dir}"]
    folder = str(PurePosixPath(script.path).parent)
    listed = subprocess.run(
        [
            *git,
            "ls-tree",
            "-r",
            "-z",
            script.commit,
            *([] if folder == "." else ["--", f"{folder}/"]),
        ],
        capture_output=True,
    )
    if listed.returncode != 0:
        message = listed.stderr.decode(errors="replace").strip().splitlines()
        raise ValueError(
            f"{script.repository} at {script.commit[:12]}: {message[-1] if message else 'git failed'}"
        )
    absent: list[str] = []
    for entry in filter(None, listed.stdout.split(b"\0")):
        meta, _, name = entry.decode("utf-8", errors="surrogateescape").partition("\t")
        mode, kind, blob = meta.split()
        if kind != "blob" or mode == "120000":  # submodules and links: not copied
            continue
        read = subprocess.run([*git, "cat-file", "blob", blob], capture_output=True)
        if read.returncode != 0:
            absent.append(name)
            continue
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read.stdout)
    path = into / script.path
    if not path.is_file():
        raise ValueError(f"{script.repository} has no {script.path} at {script.commit[:12]}")
    return path, absent


def run_catalog(
    path: Path,
    name: str,
    argv: tuple[str, ...],
    results: Path,
    *,
    seeds: int,
    workers: int,
    operators: str = "all",
) -> tuple[int, str]:
    """``trainwreck catalog`` on ``path`` as a custom loop (from its folder, with ``argv``);
    its exit status and everything it printed."""
    from experiments import reference_gate
    from experiments.catalog.errors import CatalogError
    from experiments.catalog.job import catalog_main

    quoted = " ".join(argv).replace("\\", "\\\\").replace('"', '\\"')
    command = [
        "--loops=custom",
        f"--seeds={seeds}",
        "--fixed",
        "--no-strength",
        f"--operators={operators}",
        f"--workers={workers}",
        f"loop.script={path.name}",
        f"loop.cwd={path.parent}",
        f"loop.name={name}",
        f'loop.argv="{quoted}"',
        f"results_dir={results}",
    ]
    said = io.StringIO()
    strict = reference_gate.check
    with (
        contextlib.redirect_stdout(said),
        contextlib.redirect_stderr(said),
        mock.patch.object(reference_gate, "check", lambda rows: strict(_nan_as_ok(rows))),
    ):
        try:
            status = catalog_main(command)
        except CatalogError as error:
            print(f"[trainwreck] {error}")
            status = 2
    return status, said.getvalue()


def _nan_as_ok(rows: Iterable[dict]) -> list[dict]:
    """The reference rows as the gate should read them here: a script whose own losses are
    non-finite on some steps (an empty last batch, whose mean is NaN) ends ``nan`` and is
    still the script its labels were written for; the witness compares each mutant run
    with it on the same seed (``nan`` is a finished run there). Crashes stay failures."""
    return [{**row, "status": "ok"} if row.get("status") == "nan" else row for row in rows]


def join(
    script: cs.Script,
    catalog: Path,
    target: str,
    labels: dict[tuple[str, str, str], cs.Label],
    operators: set[str] | None = None,
) -> tuple[list[Outcome], list[cs.Label]]:
    """Every mutant of the catalog at ``catalog`` (its ``symptoms.csv`` and ``runs.csv``)
    with its label; ``target``: the script's file name in the catalog's identities (the
    labels name it ``<script name>.py``). Also the labels of this script no mutant matched."""
    symptoms = pd.read_csv(catalog / "symptoms.csv", dtype=str, keep_default_na=False)
    runs = pd.read_csv(catalog / "runs.csv", dtype=str, keep_default_na=False)
    runs = runs[runs["identity"].str.contains("::", regex=False)]
    by_identity = {identity: group for identity, group in runs.groupby("identity", sort=False)}
    by_identity_label = {(k[0], k[1]): label for k, label in labels.items()}
    outcomes: list[Outcome] = []
    used: set[tuple[str, str, str]] = set()
    seen: set[str] = set()
    for row in symptoms.to_dict("records"):
        group = by_identity.get(row["identity"])
        if row.get("role") != "mutant" or group is None:
            continue
        identity = _labelled_identity(row["identity"], target, script.name)
        seen.add(identity)
        first = group.iloc[0]
        key = (script.name, identity, cs.diff_hash(first["diff"]))
        label = labels.get(key)
        reason = label.reason if label else ""
        if label is not None:
            used.add(key)
        elif (other := by_identity_label.get(key[:2])) is not None:
            reason = f"stale: its label ({other.label}) is for the diff {other.diff_hash}"
        state, why, said = state_of(row, group)
        outcomes.append(
            Outcome(
                script=script.name,
                identity=identity,
                diff_hash=key[2],
                operator=row["operator"],
                line=label.line if label else _first_line(first.get("lines", "")),
                state=state,
                reason=why,
                witness=said,
                label=label.label if label else None,
                label_reason=reason,
                seeds=len(group),
            )
        )
    orphans = [
        label
        for key, label in labels.items()
        if key[0] == script.name
        and key not in used
        and key[1] not in seen  # a stale label is said with its mutant
        and (operators is None or label.operator in operators)
    ]
    return outcomes, orphans


def reference_note(catalog: Path) -> str | None:
    """A line when the unmutated script's runs did not all end ``ok`` (module docstring)."""
    runs = pd.read_csv(catalog / "runs.csv", dtype=str, keep_default_na=False)
    ended = runs.loc[runs["identity"].isin(("none", "noop")), "ended"]
    odd = sorted(set(ended) - {"ok"})
    if not odd:
        return None
    return (
        f"the unmutated script ended {', '.join(odd)} on {int(ended.ne('ok').sum())} of "
        f"{len(ended)} runs (its own non-finite losses); its mutants are compared with it"
    )


def state_of(row: dict, runs: pd.DataFrame) -> tuple[str, str, str]:
    """(state, unconfirmed reason, the witness line) of one mutant: its catalog row
    (``measured``, ``witness``) and its runs (``witness_state``, ``witness``)."""
    measured = row.get("measured", "")
    said = row.get("witness") or row.get("outcome") or ""
    if measured in _ASIDE_MEASURED:
        found = re.match(r"unconfirmed \(([^)]*)\)", said)
        reason = found.group(1) if measured == "unconfirmed" and found else ""
        return measured, reason, said or _exception(runs)
    confirmed = runs[runs["witness_state"].eq(CONFIRMED)]
    if len(confirmed):
        line = confirmed.iloc[0]["witness"]
        if line.startswith("crashed as its bug does"):
            return CRASH_DECLARED, "", line
        if "(undeclared: " in line:
            return CRASH_UNDECLARED, "", line
        return CONFIRMED, "", line
    return "unknown", "", said or f"measured {measured}"


def _exception(runs: pd.DataFrame) -> str:
    first = runs.iloc[0]
    return ": ".join(part for part in (first.get("exc_type"), first.get("exc_message")) if part)


def _labelled_identity(identity: str, target: str, name: str) -> str:
    prefix = f"{target}::"
    return f"{name}.py::{identity[len(prefix) :]}" if identity.startswith(prefix) else identity


def _first_line(text: str) -> int:
    try:
        lines = json.loads(text) if text else []
    except json.JSONDecodeError:
        return 0
    return int(lines[0]) if isinstance(lines, list) and lines else 0
