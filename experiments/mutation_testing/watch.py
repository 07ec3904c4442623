"""In the baseline's process: serve each mutated file with its line probes, and see what the
probes cannot.

``Watch`` installs the import hook (``experiments.harness.modules``) that gives every
import of a mutated file (by the private copy's path or the user's, for an editable
install) the code ``LineRecorder.instrument`` compiled, and an audit hook that notes:

- a test or fixture starting a process (``spawned``): lines run there are not recorded;
- a mutated file opened as a file (``runpy``, ``exec(open(...).read())``,
  ``importlib.util.spec_from_file_location``): that code runs without probes, so its
  lines are not recorded either (``unprobed``);
- at the end, a mutated file that no import loaded through the hook while a module of the
  same name was imported from somewhere else (``elsewhere``: an installed copy, which no
  mutant would reach).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from experiments.harness import modules
from experiments.mutation_testing.lines import COLLECT, LineRecorder

SPAWNS = frozenset(
    {"os.fork", "os.forkpty", "subprocess.Popen", "os.posix_spawn", "os.system", "os.exec"}
)


class Watch:
    def __init__(self, recorder: LineRecorder, record: list[dict[str, Any]], workdir: str) -> None:
        self.recorder = recorder
        self.targets = record
        self.by_real = {target["real"]: target["name"] for target in record}
        self.basenames = {os.path.basename(real) for real in self.by_real}
        self.finders: dict[str, list[modules.MutantFinder]] = {}
        self.spawned: set[str] = set()
        self.opened: dict[str, str] = {}
        for target in record:
            source = Path(target["real"]).read_text(encoding="utf-8")
            first = os.path.join(workdir, target["name"])
            code = recorder.instrument(target["real"], source, first)
            self.finders[target["name"]] = [
                modules.install(path, source, code) for path in (first, target["real"])
            ]

    def audit(self, event: str, args: tuple) -> None:
        if event == "open":
            self._opened(args)
        elif event in SPAWNS and self.recorder.context != COLLECT and _may_run_python(event, args):
            # Plugins start some processes (``git``) outside tests: those do not matter.
            self.spawned.add(f"{self.recorder.context}: {event} {args[:2]!r}"[:300])

    def _opened(self, args: tuple) -> None:
        path = args[0] if args else None
        if not isinstance(path, str | bytes | os.PathLike):
            return
        path = os.fsdecode(path)
        if os.path.basename(path) not in self.basenames:
            return
        mode = args[1] if len(args) > 1 else "r"
        if isinstance(mode, str) and any(letter in mode for letter in "wax+"):
            return
        name = self.by_real.get(os.path.realpath(path))
        if name is not None:
            self.opened.setdefault(name, self.recorder.context)

    def result(self) -> dict[str, Any]:
        unprobed = {
            name: f"read as a file in {context} (runpy, exec or a load by path): the "
            "lines it runs there are not recorded"
            for name, context in self.opened.items()
        }
        elsewhere = {}
        recorded = {path for files in self.recorder.as_json().values() for path in files}
        for target in self.targets:
            if any(finder.loads for finder in self.finders[target["name"]]):
                if target["real"] not in recorded:  # loaded, so its top level ran: probes lost
                    unprobed.setdefault(target["name"], "loaded, yet no line was recorded")
                continue
            copy = _imported_copy(target["name"], target["real"])
            if copy is not None:
                elsewhere[target["name"]] = copy
        return {"spawned": sorted(self.spawned), "unprobed": unprobed, "elsewhere": elsewhere}


def _may_run_python(event: str, args: tuple) -> bool:
    """Whether a started process may run the mutated code: a fork, a Python interpreter, a
    shell (which may start one); not ``uname`` (``platform.processor()``), ``git``..."""
    if event in ("os.fork", "os.forkpty", "os.system"):
        return True
    program = args[0] if args else None
    if isinstance(program, list | tuple):
        program = program[0] if program else None
    if not isinstance(program, str | bytes | os.PathLike):
        return True
    name = os.path.basename(os.fsdecode(program))
    interpreters = ("python", "pypy", "sh", "bash", "dash", "zsh", "env", "pytest", "make")
    return name.startswith(interpreters) or os.path.realpath(
        os.fsdecode(program)
    ) == os.path.realpath(sys.executable)


def _imported_copy(name: str, real: str) -> str | None:
    """The file of an imported module that has the mutated file's name in the project
    (``tinynet/train.py``) but is another file, or None."""
    suffix = os.sep + name.replace("/", os.sep)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.endswith(suffix) and os.path.realpath(file) != real:
            return file
    return None
