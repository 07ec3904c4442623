"""In the run's process, before the script starts: its project as the user would run it.

``prepare(config)`` (called by ``child`` right after it entered the run's working
directory) installs the write guard for the mirrored working directory
(``guard``), the counters of the reach probes (``reach``) and, when the mutant is a module
the script imports rather than the script, the import hook that serves it (``modules``).
``compile_main`` compiles the ``__main__`` source (with probes when the mutant is the
script); ``reach_counts`` and ``reach_eval_counts`` are what the end record stores.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

from experiments.harness import guard, modules, reach


class Prepared:
    def __init__(self, config: dict[str, Any]) -> None:
        self.regions: list[reach.Region] = list(config.get("reach_regions") or [])
        self.module = config.get("module_target")  # None: the mutant is the script
        self.counters, self.evaluating = reach.install(len(self.regions))
        self.watched = False  # did the telemetry tell forwards apart (reach.EvalHits)
        self.probed: set[int] = set()
        # The file name the mutated module's frames carry (None: the mutant is the script).
        self.mutated_file: str | None = None
        if self.module:
            self.mutated_file = os.path.realpath(self.module)
            source = Path(config["module_source_path"]).read_text(encoding="utf-8")
            code, self.probed = _compile(source, self.mutated_file, self.regions)
            modules.install(self.module, source, code)

    def compile_main(self, source: str, filename: str) -> CodeType:
        if self.module:  # the script runs unmutated
            return compile(source, filename, "exec")
        code, self.probed = _compile(source, filename, self.regions)
        return code

    def watch_evaluation(self, forwards: Any) -> None:
        """Count hits during evaluation from now on (``forwards``: the telemetry's)."""
        self.evaluating.forwards = forwards
        self.watched = True

    def stop_watching(self) -> None:
        """The script is over: the harness's own held-out evaluation is not the script's."""
        self.evaluating.forwards = None

    def reach_eval_counts(self) -> list[int] | None:
        return list(self.evaluating.counts) if self.regions and self.watched else None

    def reach_counts(self) -> list[int | None] | None:
        if not self.regions:
            return None
        return [
            count if number in self.probed else None for number, count in enumerate(self.counters)
        ]


def _compile(source: str, filename: str, regions: list[reach.Region]) -> tuple[CodeType, set[int]]:
    try:
        return reach.compile_probed(source, filename, regions)
    except (SyntaxError, ValueError, RecursionError):
        # A source that does not compile stays an ``invalid`` run: the plain compile
        # raises the same error where the status rules expect it.
        return compile(source, filename, "exec"), set()


def prepare(config: dict[str, Any]) -> Prepared:
    sys.dont_write_bytecode = True  # no __pycache__ writes into the mirror (or anywhere)
    workdir = config.get("workdir")
    if workdir and config.get("guard", False):
        guard.install(
            workdir,
            protected=config.get("protected") or (),
            allowed=[config["run_dir"], *(config.get("allowed") or ())],
        )
    return Prepared(config)
