"""The results folder: one run folder per cache key, ``result.json`` marks a finished run.

Layout: ``<results_dir>/runs/<key[:2]>/<key>/`` holding ``trace.jsonl``, ``result.json``,
``stdout.txt``, ``stderr.txt``, ``spec.json`` and ``mutant.py`` (mutants only), plus a
sibling ``<key>.lock`` that the process running the run holds (``flock``), so two sweeps
sharing a results folder (e.g. parallel Hydra jobs) never run the same key twice at once.
A folder with ``result.json`` is done and never rerun; one without it is stale and is
cleared before its run starts again.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any

from experiments.files import write_text_atomic
from experiments.harness.seal import check_shape
from experiments.trace import RESULT_FILE

RUNS = "runs"


def run_dir(results_dir: str | Path, key: str) -> Path:
    return Path(results_dir) / RUNS / key[:2] / key


def read_result(folder: Path) -> dict[str, Any] | None:
    """The folder's ``result.json`` if it is a readable row (whoever wrote it: the
    runner checks its full shape and seal before it reuses one)."""
    try:
        with open(folder / RESULT_FILE, encoding="utf-8") as handle:
            row = json.load(handle)
    except (OSError, ValueError):  # missing, unreadable, not JSON, not UTF-8
        return None
    return row if check_shape(row, full=False) is None else None


def write_json_atomic(path: Path, data: Any) -> None:
    """A result a reader sees whole or not at all, and that survives a crash (fsync)."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True), fsync=True)


def reset_folder(folder: Path) -> None:
    """Empty a stale run folder (or create it)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def try_lock(folder: Path) -> int | None:
    """Take the run's lock without waiting: the open descriptor, or None if held elsewhere."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    path = str(folder) + ".lock"
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o664)
    except PermissionError:  # another user's lock file in a shared folder: flock reads too
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


def unlock(descriptor: int) -> None:
    # Closing releases the flock; the lock file stays (removing it would race a waiter).
    os.close(descriptor)


def load_results(results_dir: str | Path) -> list[dict[str, Any]]:
    """Every finished run under ``results_dir``: one dict per ``result.json``, sorted by
    run id. Stale folders (no result, or one not of the runner's shape) are skipped."""
    rows = []
    for path in sorted((Path(results_dir) / RUNS).glob(f"*/*/{RESULT_FILE}")):
        row = read_result(path.parent)
        if row is not None:
            row["run_dir"] = str(path.parent)
            rows.append(row)
    rows.sort(key=lambda row: (str(row.get("run_id")), str(row.get("key"))))
    return rows
