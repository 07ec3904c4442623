"""Throwaway git repositories of faulty/fixed training scripts for the real-fault tests
(laid out as the fetch tool lays mirrors: ``<mirrors>/<owner>+<name>/repo``)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# A small training run on generated data: seconds on a CPU, nothing to download.
FIXED = """\
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 4)
y = (x[:, 0] > 0).long()
for step in range(30):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.4f}")
"""
# The versions of each file: (faulty, fixed). "live": zero_grad missing (a live bug);
# "inert": a loss multiplied by 1.0 (computes the same); "broken": the fixed version crashes.
VERSIONS = {
    "live.py": (FIXED.replace("    optimizer.zero_grad()\n", ""), FIXED),
    "inert.py": (
        FIXED.replace("loss = criterion(model(x), y)", "loss = criterion(model(x), y) * 1.0"),
        FIXED,
    ),
    "broken.py": (
        FIXED.replace("    optimizer.zero_grad()\n", ""),
        FIXED.replace("{loss.item():.4f}", "{loss.data[0]:.4f}"),
    ),
}


def git(folder: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    done = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def make_repo(mirrors: Path, name: str, versions: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """A repository with one commit of the faulty files and one fixing them; (parent, fix)."""
    repo = mirrors / name.replace("/", "+") / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    for path, (faulty, _) in versions.items():
        (repo / path).write_text(faulty)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "faulty")
    parent = git(repo, "rev-parse", "HEAD")
    for path, (_, fixed) in versions.items():
        (repo / path).write_text(fixed)
    git(repo, "commit", "-qam", "fix training")
    return parent, git(repo, "rev-parse", "HEAD")


def fault_entry(
    fault_id: str,
    repository: str,
    commits: tuple[str, str],
    path: str,
    lines: list[int],
    fault_class: str = "gradient",
    operator: str = "drop_zero_grad",
    run: str = "",
) -> str:
    """One ``[[fault]]`` of a replay-set TOML."""
    parent, fix = commits
    text = (
        f'[[fault]]\nid = "{fault_id}"\nrepository = "{repository}"\nfix = "{fix}"\n'
        f'parent = "{parent}"\npath = "{path}"\nlines = {lines}\nclass = "{fault_class}"\n'
        f'operator = "{operator}"\ndescription = "test fault"\n'
    )
    return text + (f"run = {run}\n" if run else "") + "\n"


def line_of(text: str, wanted: str) -> int:
    return text.splitlines().index(wanted) + 1
