"""Stopping a trainwreck command from outside, as a user or a job scheduler does.

``start`` runs ``python -m experiments.cli ARGS`` (or another module) in a process whose
SIGINT disposition is set explicitly: ``"ignored"`` is what a background job of a
non-interactive shell (``python3 -m pytest &`` in a script) hands its children, the state
that once made trainwreck shrug off Ctrl-C; ``"default"`` is a terminal's. Every process
of the command carries a tag in its environment, so ``leftovers`` finds any that outlived it
(a run, a loader worker, a forked search) even after they were reparented.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAG = "TRAINWRECK_STOP_PROBE"
DISPOSITIONS = {"ignored": signal.SIG_IGN, "default": signal.SIG_DFL}


@dataclass
class Command:
    process: subprocess.Popen
    tag: str


@dataclass(frozen=True)
class Stopped:
    code: int | None  # None: still running after the grace period
    seconds: float
    stderr: str
    leftovers: list[int]

    def describe(self) -> str:
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        left = f", {len(self.leftovers)} process(es) left" if self.leftovers else ""
        said = f"exit {self.code} after {self.seconds:.1f} s{left}, last line: {last[:200]}"
        if "Traceback" in self.stderr or "Exception ignored" in self.stderr:
            said += "\n--- stderr ---\n" + self.stderr[-4000:]
        return said


def start(args: list[str], cwd: Path, sigint: str = "ignored", module: str = "experiments.cli"):
    tag = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), TAG: tag}
    disposition = DISPOSITIONS[sigint]
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, disposition),
    )
    return Command(process, tag)


def wait_for(command: Command, ready, limit_s: float = 240.0) -> bool:
    """Wait until ``ready()`` holds (a first run started...) or the command ended. A fresh
    environment compiles torch's modules on first import: the first run can take minutes
    to start there, so this waits rather than interrupting the imports."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and command.process.poll() is None:
        if ready():
            return True
        time.sleep(0.1)
    return bool(ready())


def stop(command: Command, number: int, grace_s: float) -> Stopped:
    """Send ``number`` and give the command ``grace_s`` seconds to end; kill it after."""
    command.process.send_signal(number)
    sent = time.monotonic()
    try:
        _, stderr = command.process.communicate(timeout=grace_s)
        code = command.process.returncode
    except subprocess.TimeoutExpired:
        command.process.kill()
        _, stderr = command.process.communicate()
        code = None
    seconds = time.monotonic() - sent
    return Stopped(code, seconds, stderr, leftovers(command.tag))


def leftovers(tag: str, settle_s: float = 2.0) -> list[int]:
    """Live processes carrying ``tag``, after giving the dying ones ``settle_s`` to go."""
    deadline = time.monotonic() + settle_s
    while True:
        found = _tagged(tag)
        if not found or time.monotonic() > deadline:
            for pid in found:  # leave nothing behind for the next test either
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return found
        time.sleep(0.1)


def _tagged(tag: str) -> list[int]:
    marker = f"{TAG}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:  # gone, or a zombie (no environment left)
            continue
    return found
