"""Adapters for third-party tools, each in its own virtual environment.

The tools' pins conflict with ours (TorchFix 0.7.0 wants ``libcst<1.6``; torcheck 1.0.1
declares ``torch<2.0``), so each lives in a venv under ``~/.cache/trainwreck/tools/NAME``
(override with ``TRAINWRECK_TOOLS``) and runs in a subprocess. Installing is an explicit
step (``trainwreck bench install-tool NAME``, needs PyPI), never a side effect of
scoring. A tool that is not installed makes its detector report "unavailable" with the
reason; nothing pretends to have run.

- TorchFix (static): ``torchfix --select ALL FILE``. It exits 0 even with findings, so
  success is read from its closing "Finished checking" line and findings from
  ``path:line:col: TORxxx message`` lines.
- torcheck (online): ``torcheck_wrapper.py`` runs the mutant with torcheck's "parameters
  must change" and NaN/inf checks installed on every optimizer through a global hook
  (the mutant is not edited), stopping at the first violation or after ``max_steps``.
  torcheck is installed with ``--no-deps`` into a venv that sees our torch.
- TrainCheck: installs (0.2.0, with numba and polars) but is not usable within this
  benchmark's budget; see ``TrainCheck.unavailable`` for the measured reasons.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.bench.api import (
    Detector,
    DetectorError,
    Finding,
    GarbageOutput,
    RunInput,
    ScriptInput,
    register,
)

WRAPPER = Path(__file__).with_name("torcheck_wrapper.py")


def tools_dir() -> Path:
    return Path(os.environ.get("TRAINWRECK_TOOLS", Path.home() / ".cache" / "trainwreck" / "tools"))


@dataclass(frozen=True)
class ToolEnv:
    """A venv holding one tool: how to install it and where its programs are."""

    name: str
    requirement: str
    see_our_packages: bool = False  # --system-site-packages (reuse our torch)
    no_deps: bool = False

    @property
    def root(self) -> Path:
        return tools_dir() / self.name

    def program(self, name: str) -> Path:
        return self.root / "bin" / name

    def missing(self, program: str) -> str | None:
        if self.program(program).exists():
            return None
        return (
            f"{self.requirement} is not installed in {self.root} "
            f"(run `trainwreck bench install-tool {self.name}`; it needs PyPI)"
        )

    def install(self) -> None:
        """Create the venv and pip-install the tool into it (network: PyPI only)."""
        command = [sys.executable, "-m", "venv"]
        if self.see_our_packages:
            command.append("--system-site-packages")
        subprocess.run([*command, str(self.root)], check=True)
        pip = [str(self.program("python")), "-m", "pip", "install", "--quiet"]
        if self.no_deps:
            pip.append("--no-deps")
        subprocess.run([*pip, self.requirement], check=True)


TOOLS = {
    "torchfix": ToolEnv("torchfix", "torchfix==0.7.0"),
    "torcheck": ToolEnv("torcheck", "torcheck==1.0.1", see_our_packages=True, no_deps=True),
    "traincheck": ToolEnv("traincheck", "traincheck==0.2.0", see_our_packages=True),
}


@dataclass(frozen=True)
class ToolOutput:
    stdout: str
    stderr: str
    returncode: int


def run_tool(command: list[str], cwd: Path, timeout_s: float) -> ToolOutput:
    """Run a command in its own process group; on timeout kill the group and raise."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise DetectorError(f"timed out after {timeout_s:g} s") from None
    return ToolOutput(stdout, stderr, process.returncode)


# -- TorchFix ----------------------------------------------------------------------------------

TORCHFIX_LINE = re.compile(
    r"^(?P<path>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<code>TOR\d+) (?P<message>.*)$"
)
# What each TorchFix rule is about, in our categories (most are API hygiene: "unknown").
TORCHFIX_CATEGORIES = {
    "TOR002": "gradient",  # require_grad typo: the parameter is not trainable
    "TOR102": "checkpoint",  # torch.load without weights_only
    "TOR401": "data",  # DataLoader without num_workers
}


def parse_torchfix(output: ToolOutput, path: str) -> list[Finding]:
    if "Finished checking" not in output.stderr + output.stdout:
        raise GarbageOutput(
            f"no 'Finished checking' line (exit {output.returncode}): {output.stderr[-200:]!r}"
        )
    findings = []
    for line in output.stdout.splitlines():
        match = TORCHFIX_LINE.match(line)
        if match and Path(match["path"]).name == Path(path).name:
            code = match["code"]
            category = TORCHFIX_CATEGORIES.get(code, "unknown")
            findings.append(
                Finding(category, None, int(match["line"]), None, match["message"], code)
            )
    return findings


@register
class TorchFix(Detector):
    name = "torchfix"
    kind = "external"
    inputs = "source"
    summary = "TorchFix 0.7.0 (all rules), its own venv"
    timeout_s = 60.0

    def unavailable(self) -> str | None:
        return TOOLS["torchfix"].missing("torchfix")

    def detect(self, item: ScriptInput | RunInput) -> list[Finding]:
        assert isinstance(item, ScriptInput)
        with tempfile.TemporaryDirectory(prefix="trainwreck-torchfix-") as folder:
            target = Path(folder) / Path(item.path).name
            target.write_text(item.source, encoding="utf-8")
            program = str(TOOLS["torchfix"].program("torchfix"))
            output = run_tool(
                [program, "--select", "ALL", target.name], Path(folder), self.timeout_s
            )
        return parse_torchfix(output, item.path)


# -- torcheck ----------------------------------------------------------------------------------


def parse_torcheck(lines: list[str]) -> list[Finding]:
    findings = []
    ended = False
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise GarbageOutput(f"unreadable wrapper record {line[:80]!r}") from None
        if record.get("kind") == "finding":
            message = str(record.get("message", ""))
            category = "numerics" if ("NaN" in message or "inf." in message) else "gradient"
            rule = "nan_inf" if category == "numerics" else "params_should_change"
            findings.append(
                Finding(
                    category, None, None, int(record.get("step", 0)), message.splitlines()[-1], rule
                )
            )
        elif record.get("kind") == "end":
            ended = True
    if not ended:
        raise GarbageOutput("the wrapper wrote no end record (killed or broken)")
    return findings


@register
class Torcheck(Detector):
    """torcheck's checks inside the run; ``max_steps`` bounds the run's cost."""

    name = "torcheck"
    kind = "online"
    inputs = "source"
    summary = "torcheck 1.0.1: parameters must change, no NaN/inf (global hooks, own venv)"
    timeout_s = 180.0

    def __init__(self, max_steps: int = 200) -> None:
        self.max_steps = int(max_steps)

    def unavailable(self) -> str | None:
        env = TOOLS["torcheck"]
        missing = env.missing("python")
        if missing:
            return missing
        if not any(env.root.glob("lib/python*/site-packages/torcheck/__init__.py")):
            return f"torcheck is not installed in {env.root} (run `trainwreck bench install-tool torcheck`)"
        return None

    def detect(self, item: ScriptInput | RunInput) -> list[Finding]:
        assert isinstance(item, ScriptInput)
        with tempfile.TemporaryDirectory(prefix="trainwreck-torcheck-") as folder:
            script = Path(folder) / Path(item.path).name
            script.write_text(item.source, encoding="utf-8")
            records = Path(folder) / "findings.jsonl"
            command = [
                str(TOOLS["torcheck"].program("python")),
                str(WRAPPER),
                str(records),
                str(self.max_steps),
                str(script),
                *item.argv,
            ]
            output = run_tool(command, Path(folder), self.timeout_s)
            if not records.exists():
                raise GarbageOutput(
                    f"no findings file (exit {output.returncode}): {output.stderr[-300:]!r}"
                )
            return parse_torcheck(records.read_text(encoding="utf-8").splitlines())


# -- TrainCheck --------------------------------------------------------------------------------

TRAINCHECK_REASON = (
    "TrainCheck 0.2.0 installs here (own venv, with numba/polars) but cannot run within this "
    "benchmark's budget: its instrumenter inserts code above `from __future__` imports "
    "(SyntaxError on every reference loop) and above the module docstring (`__doc__` is None, "
    "argparse descriptions crash); with both worked around, `traincheck-collect` took 153 s and "
    "wrote a 47 MB trace for one 20-epoch mlp_digits run, and `traincheck-infer` on that trace "
    "was still generating hypotheses after 10 min on this 2-core machine (stopped), so no invariants exist to check mutants "
    "against"
)


@register
class TrainCheck(Detector):
    name = "traincheck"
    kind = "online"
    inputs = "source"
    summary = "TrainCheck 0.2.0: invariants inferred from the reference loop, checked on mutants"

    def unavailable(self) -> str | None:
        return TOOLS["traincheck"].missing("traincheck-collect") or TRAINCHECK_REASON

    def detect(self, item: ScriptInput | RunInput) -> list[Finding]:
        raise DetectorError(self.unavailable() or "unavailable")


def install(name: str) -> dict[str, Any]:
    """Install one tool into its venv; returns what was done (raises on failure)."""
    if name not in TOOLS:
        raise KeyError(f"unknown tool {name!r} (known: {', '.join(TOOLS)})")
    env = TOOLS[name]
    env.install()
    return {"tool": name, "requirement": env.requirement, "venv": str(env.root)}
