"""Any test command (not pytest): the mutant and its reach probes in every Python process.

A command such as ``make test`` or ``python run_tests.py`` runs in a new process per
mutant, in the run's private copy of the project. Each Python process it starts loads
``sitecustomize`` from a folder the session puts first on ``PYTHONPATH``; that calls
``install``, which reads ``$TRAINWRECK_MT_BOOT`` (the run's spec) and installs what a
forked pytest run has: the write guard, the mutant served with reach probes to imports
of its file (the copy's or the user's, for an editable install), and at exit a record
in the run's folder: the probes' counts and the exception that ended the process, if
any (for the stillborn rule). Processes that end through ``os._exit`` (a data loader
worker) leave no record; their lines count as not seen, so a run whose every probe
stayed at zero is ``unreached`` only when some process recorded its counts.
A project's own ``sitecustomize`` is shadowed: the session says so in its notes.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

ENV = "TRAINWRECK_MT_BOOT"
SITECUSTOMIZE = (
    "import os\n"
    f"if os.environ.get({ENV!r}):\n"
    "    from experiments.mutation_testing import boot\n"
    f"    boot.install(os.environ[{ENV!r}])\n"
)


def write_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return folder


def install(spec_path: str) -> None:
    from experiments.harness import guard
    from experiments.mutation_testing.serve import install as serve_mutant

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    run_dir = Path(spec["run_dir"])
    guard.install(spec["workdir"], protected=[spec["root"]], allowed=[str(run_dir)])
    mutant = spec.get("mutant")
    counters, probed = serve_mutant(mutant) if mutant else ([], set())
    aliases = {os.path.realpath(path): mutant["name"] for path in mutant["paths"]} if mutant else {}
    raised: list[dict[str, Any]] = []
    previous_hook = sys.excepthook

    def record_exception(kind, error, tb):  # type: ignore[no-untyped-def]
        from experiments.stillborn import from_exception

        try:
            found = from_exception(error, lambda path: aliases.get(os.path.realpath(path), path))
            raised.append(asdict(found))
        finally:
            previous_hook(kind, error, tb)

    def write_record() -> None:
        reach = [count if index in probed else None for index, count in enumerate(counters)]
        record = {"reach": reach if mutant else None, "errors": raised}
        path = run_dir / f"process-{os.getpid()}.json"
        path.write_text(json.dumps(record), encoding="utf-8")

    sys.excepthook = record_exception
    atexit.register(write_record)


def collect(run_dir: Path) -> dict[str, Any]:
    """The records of a run's processes, merged: counts summed, errors listed."""
    reach: list[int | None] | None = None
    errors: list[dict[str, Any]] = []
    for path in sorted(run_dir.glob("process-*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        errors.extend(record.get("errors") or [])
        counts = record.get("reach")
        if counts is None:
            continue
        if reach is None:
            reach = list(counts)
        else:
            reach = [
                None if a is None and b is None else (a or 0) + (b or 0)
                for a, b in zip(reach, counts)
            ]
    return {"reach": reach, "errors": errors}
