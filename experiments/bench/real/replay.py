"""The real-fault replay set (``benchmarks/real_faults.toml``, issue 32): load and read it.

Each fault pins a repository, the fix commit and its parent (the faulty version), a path,
the fault's lines in the faulty version, a class, the operator that stands for it and a
description. The two versions are read from git mirrors laid out as the ``fetch`` tool lays
them (``DIR/<owner>+<name>/repo``, a bare git directory or a work tree's ``.git``) with
``git show``; nothing is copied into the project.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from experiments import mirrors

# The set lives beside the benchmarks of a checkout (it is data, not part of the package).
REPLAY_SET = Path(__file__).resolve().parents[3] / "benchmarks" / "real_faults.toml"
# Where the ``fetch`` tool puts its mirrors; TRAINWRECK_MIRRORS names another folder.
MIRRORS_ENV = "TRAINWRECK_MIRRORS"
FETCH_MIRRORS = Path("/work/.mirror")
CLASSES = (
    "loss",
    "mode",
    "gradient",
    "optimizer/schedule",
    "data",
    "numerics",
    "device",
    "checkpoint",
    "other",
)
# The operator category (mutator.operator.CATEGORIES) that a fault class corresponds to.
CATEGORY_OF_CLASS = {
    "loss": "loss",
    "mode": "mode",
    "gradient": "gradient",
    "optimizer/schedule": "optim",
    "data": "data",
    "numerics": "numerics",
    "device": "device",
    "checkpoint": "checkpoint",
}
RESERVED = (
    "pytorch/examples",
    "pytorch/tutorials",
    "karpathy/",
    "GRAAL-Research/poutyne",
    "skorch-dev/skorch",
    "akamaster/pytorch_resnet_cifar10",
    "sthalles/SimCLR",
    "weiaicunzai/pytorch-cifar100",
    "bentrevett/pytorch-seq2seq",
)
_REQUIRED = ("id", "repository", "fix", "parent", "path", "lines", "class", "operator")


@dataclass(frozen=True)
class Fault:
    id: str
    repository: str
    fix: str
    parent: str
    path: str
    lines: tuple[int, ...]
    fault_class: str
    operator: str
    description: str = ""
    source: str = ""
    # How to run both versions offline through the harness (argv, cwd in the tree, ...).
    run: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def git_dir(self, root: Path) -> Path:
        return mirrors.git_dir(root, self.repository)


@dataclass(frozen=True)
class Pair:
    """The two versions of a fault's file."""

    faulty: str
    fixed: str


def _fault(raw: dict[str, Any], where: str) -> Fault:
    missing = [name for name in _REQUIRED if name not in raw]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    if raw["class"] not in CLASSES:
        raise ValueError(f"{where}: class {raw['class']!r} is not one of {', '.join(CLASSES)}")
    lines = raw["lines"]
    if not lines or not all(isinstance(n, int) and n > 0 for n in lines):
        raise ValueError(f"{where}: lines must be a non-empty list of line numbers")
    if any(raw["repository"].startswith(reserved) for reserved in RESERVED):
        raise ValueError(f"{where}: {raw['repository']} is reserved for independent checks")
    return Fault(
        id=raw["id"],
        repository=raw["repository"],
        fix=raw["fix"],
        parent=raw["parent"],
        path=raw["path"],
        lines=tuple(lines),
        fault_class=raw["class"],
        operator=raw["operator"],
        description=raw.get("description", ""),
        source=raw.get("source", ""),
        run=dict(raw.get("run", {})),
    )


def load(path: Path = REPLAY_SET) -> list[Fault]:
    """The faults of a replay-set file; ValueError naming the entry that is wrong."""
    raw = tomllib.loads(path.read_text(encoding="utf-8")).get("fault", [])
    faults = [_fault(entry, f"{path.name}: fault {n + 1}") for n, entry in enumerate(raw)]
    doubled = sorted(k for k, c in Counter(f.id for f in faults).items() if c > 1)
    if doubled:
        raise ValueError(f"{path.name}: fault ids used twice: {', '.join(doubled)}")
    return faults


def default_mirrors() -> Path | None:
    """The mirrors folder to use without ``--mirrors``: ``$TRAINWRECK_MIRRORS``, else the
    fetch tool's folder where it exists; None when there is neither."""
    named = os.environ.get(MIRRORS_ENV)
    if named:
        return Path(named)
    return FETCH_MIRRORS if FETCH_MIRRORS.is_dir() else None


def show(git_dir: Path, commit: str, path: str) -> str:
    """``git show COMMIT:PATH``; ValueError saying what is missing."""
    if not git_dir.is_dir():
        raise ValueError(f"no mirror at {git_dir}")
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "git failed"
        raise ValueError(f"no {path} at {commit[:12]}: {last}")
    return done.stdout


def read_pair(fault: Fault, root: Path) -> Pair:
    git_dir = fault.git_dir(root)
    return Pair(
        faulty=show(git_dir, fault.parent, fault.path),
        fixed=show(git_dir, fault.fix, fault.path),
    )
