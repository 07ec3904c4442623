"""Results kept between sessions: an unchanged project reruns nothing.

A mutant's result is keyed by its source's sha256, its file, the command, the deadline
settings, its operators' witness declarations (``witnesses``; and ``WITNESS_VERSION``,
the version of how a witness is recorded and decided) and the *environment*: Python, torch, pytest and trainwreck versions (with a
digest of this package's code), and a digest of every file of the project (tests, data,
configuration: a test may read any of them). The baseline (its time and which test ran
which line) is kept under the environment alone. Results are appended one JSON line at a
time and flushed, so an interrupted session leaves every finished result readable and
at most a torn last line, which loading skips.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from experiments.files import write_text_atomic

RESULTS = "results.jsonl"
_SKIPPED_DIRS = {"__pycache__", "node_modules", ".git", ".hg", ".svn"}
_DIGEST_LIMIT = 1 << 20  # larger files count by size and modification time
_OWN_CODE = (
    "experiments/mutation_testing",
    "experiments/stillborn.py",
    "experiments/harness",
    "experiments/witness.py",
    "mutator/witness.py",
)
# Results stored before the witness was recorded per test have no key with it: rerun.
WITNESS_VERSION = 1


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "-"


def environment(root: Path, skip: Iterable[Path]) -> dict[str, str]:
    """What a result depends on besides the mutant and the command."""
    repo = Path(__file__).resolve().parents[2]
    return {
        "python": platform.python_version(),
        "torch": _version("torch"),
        "pytest": _version("pytest"),
        "trainwreck": _version("trainwreck"),
        "trainwreck_code": tree_digest([repo / part for part in _OWN_CODE], set()),
        "project": tree_digest([root], {Path(path).resolve() for path in skip}),
    }


def tree_digest(paths: Iterable[Path], skip: set[Path]) -> str:
    digest = hashlib.sha256()
    for base in paths:
        files = [base] if base.is_file() else sorted(_files(base, skip))
        for file in files:
            digest.update(file.as_posix().encode())
            with contextlib.suppress(OSError):
                stat = file.stat()
                if stat.st_size > _DIGEST_LIMIT:
                    digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
                else:
                    digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def _files(base: Path, skip: set[Path]) -> Iterable[Path]:
    for folder, dirs, names in os.walk(base):
        here = Path(folder)
        dirs[:] = sorted(
            name
            for name in dirs
            if name not in _SKIPPED_DIRS
            and not name.startswith(".")
            and (here / name).resolve() not in skip
            and not (here / name / "pyvenv.cfg").exists()  # a virtual environment
        )
        for name in names:
            if not name.endswith((".pyc", ".pyo")):
                yield here / name


def witnesses(job: Any) -> list[list[Any]]:
    """What each of a mutant's operators declares as its witness and its own crashes."""
    from mutations.registry import operator_classes

    classes = operator_classes()
    found = []
    for name in job.mutant.operators:
        witness = getattr(classes.get(name), "witness", None)
        spec = [witness.spec, witness.says, list(witness.crashes)] if witness else None
        found.append([name, spec])
    return found


def key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class Cache:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.results: dict[str, dict[str, Any]] = {}
        path = self.folder / RESULTS
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                    self.results[entry["key"]] = entry["row"]
                except (ValueError, KeyError, TypeError):
                    continue  # a line torn by an interrupted session
        self._stream = None

    def get(self, entry_key: str) -> dict[str, Any] | None:
        return self.results.get(entry_key)

    def put(self, entry_key: str, row: dict[str, Any]) -> None:
        if self._stream is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / RESULTS
            torn = path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
            self._stream = open(path, "a", encoding="utf-8")  # noqa: SIM115
            if torn:  # end the torn line, so it stays the only lost one
                self._stream.write("\n")
        self._stream.write(json.dumps({"key": entry_key, "row": row}) + "\n")
        self._stream.flush()
        self.results[entry_key] = row

    def baseline(self, entry_key: str) -> dict[str, Any] | None:
        path = self.folder / f"baseline-{entry_key[:32]}.json"
        with contextlib.suppress(OSError, ValueError):
            return json.loads(path.read_text(encoding="utf-8"))
        return None

    def put_baseline(self, entry_key: str, data: dict[str, Any]) -> None:
        write_text_atomic(self.folder / f"baseline-{entry_key[:32]}.json", json.dumps(data))

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
