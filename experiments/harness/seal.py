"""Which ``result.json`` the cache may trust: the harness's shape, sealed by the harness.

A run's script is the same user as the sweep and can find its run folder (its stdout is
``/proc/self/fd/1``), so a file's presence proves nothing. A row is trusted only if

- it has the shape the runner writes (``check_shape``: the fields and their types), and
- its ``seal`` is the HMAC-SHA256 of the rest of the row under the results folder's key.

The key (``<results_dir>/.harness-key``, group-readable so jobs of a shared folder can
verify each other's rows) is read by the sweep process into a page that a forked run does
not inherit (``MADV_DONTFORK``); the write guard refuses Python-level opens of the key
file in the run's process. A script that reads the key with native code or scans the
parent's memory is out of reach of these checks (docs/reliability.md says so); a row it
forges without the key is rerun.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import mmap
import os
import secrets
import time
from pathlib import Path
from typing import Any

from experiments.trace import STATUSES

KEY_FILE = ".harness-key"
# Set on a row after the runner wrote it (experiments.reference_gate): left out of the seal.
ANNOTATIONS = ("seed_insensitive",)
KEY_BYTES = 32
SEAL = "seal"
_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
# field -> accepted types: what every reader of a row (report, catalog) relies on ...
READABLE: dict[str, tuple[type, ...]] = {
    "key": (str,),
    "run_id": (str,),
    "loop": (str,),
    "identity": (str,),
    "operators": (list,),
    "categories": (list,),
    "status": (str,),
    "exc_type": (str, type(None)),
    "exc_message": (str, type(None)),
    "seed": (int,),
    "device": (str,),
    "steps": (int,),
    "backward_calls": (int,),
    "wall_s": _OPTIONAL_NUMBER,
}
# ... and what else the runner writes, so the cache may reuse the row.
SHAPE: dict[str, tuple[type, ...]] = {
    **READABLE,
    "script": (str,),
    "params": (list,),
    "lines": (list,),
    "timeout_s": _OPTIONAL_NUMBER,
    "mem_cap_mb": _NUMBER,
    "harness_version": (str,),
    "budget": (dict,),
}


def check_shape(row: Any, key: str | None = None, full: bool = True) -> str | None:
    """None when ``row`` has the runner's shape (``full``; else what readers need) and,
    given ``key``, is that run's; else what is wrong, in a few words."""
    if not isinstance(row, dict):
        return f"a {type(row).__name__}, not an object"
    for name, types in (SHAPE if full else READABLE).items():
        if name not in row:
            return f"no {name!r}"
        value = row[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"{name!r} is a {type(value).__name__}"
    if row["status"] not in STATUSES:
        return f"unknown status {row['status']!r}"
    if key is not None and row["key"] != key:
        return "another run's key"
    return None


class Sealer:
    """Holds a results folder's key out of forked runs' reach; seals and verifies rows."""

    def __init__(self, results_dir: str | Path) -> None:
        self.results_dir = results_dir
        self._page: mmap.mmap | None = None  # loaded on first use: a runner made but never
        # run writes nothing

    def _key(self) -> bytes:
        if self._page is None:
            page = mmap.mmap(-1, mmap.PAGESIZE)
            if hasattr(mmap, "MADV_DONTFORK"):
                page.madvise(mmap.MADV_DONTFORK)  # a forked run sees no such page
            page[:KEY_BYTES] = load_key(self.results_dir)
            self._page = page
        return self._page[:KEY_BYTES]

    def _digest(self, row: dict[str, Any]) -> str:
        left_out = (SEAL, "run_dir", "cached", *ANNOTATIONS)
        body = {name: value for name, value in row.items() if name not in left_out}
        payload = json.dumps(body, sort_keys=True, default=str).encode("utf-8")
        return hmac.new(self._key(), payload, hashlib.sha256).hexdigest()

    def seal(self, row: dict[str, Any]) -> dict[str, Any]:
        return {**row, SEAL: self._digest(row)}

    def trusted(self, row: Any, key: str) -> bool:
        if check_shape(row, key) is not None:
            return False
        seal = row.get(SEAL)
        return isinstance(seal, str) and hmac.compare_digest(seal, self._digest(row))


def load_key(results_dir: str | Path) -> bytes:
    """The folder's key, created on first use (one writer wins; the others read it)."""
    path = Path(results_dir) / KEY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    except FileExistsError:
        return _read_key(path)
    with os.fdopen(descriptor, "w") as handle:
        os.fchmod(handle.fileno(), 0o640)  # whatever the umask: the group verifies too
        handle.write(secrets.token_hex(KEY_BYTES))
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    for _ in range(50):  # a key being written by another job right now
        text = path.read_text(encoding="ascii").strip()
        if len(text) == 2 * KEY_BYTES:
            return bytes.fromhex(text)
        time.sleep(0.02)
    raise ValueError(f"{path} is not a trainwreck key; delete it to make a new one")
