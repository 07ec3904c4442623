"""One run in flight, as the parent sees it: its process (or the reused process serving
it), its deadline and memory cap, and what the parent must give back when it ends."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from experiments.harness import pool
from experiments.harness.outcap import OutputCap
from experiments.harness.spec import RunSpec


@dataclass
class ActiveRun:
    spec: RunSpec
    key: str
    folder: Path
    lock: int
    pid: int
    started: float
    timeout_s: float
    rss_cap_mb: float
    process: subprocess.Popen[bytes] | None = None
    killed_for: str | None = None
    gpu: str | None = None  # its place in the GPU slots, given back when it ends
    last_poll: float = field(default=0.0)
    workdir: str | None = None  # the run's private mirror of the invocation folder
    nonce: str = ""  # the child's end record carries it: one appended by the script does not
    outputs: tuple[OutputCap, ...] = ()
    worker: pool.Worker | None = None  # a process that may serve more runs (``reuse``)
    reused: bool = False  # the process served an earlier run before this one

    @property
    def start_method(self) -> str:
        """How its process came to be, as the row records it."""
        if self.reused:
            return "reused"  # a forked process that ran earlier runs of the sweep first
        return "spawn" if self.process is not None else "fork"
