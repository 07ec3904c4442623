"""The test command of a session: any command, recognised as pytest when it is one.

pytest gets the fast path (a forked warm process calls ``pytest.main``, per-test line
coverage picks the tests a mutant needs); any other command runs as it is, in a new
process per mutant, judged by its exit status.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT = ("python", "-m", "pytest", "-x", "-q")
_PYTHONS = ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}")


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    # The arguments pytest gets when the command is pytest, else None.
    pytest_args: tuple[str, ...] | None
    # ``python -m pytest`` puts the current folder first on sys.path; the ``pytest``
    # script does not (its tests import the project through pytest's own rootdir logic).
    cwd_on_path: bool

    @property
    def is_pytest(self) -> bool:
        return self.pytest_args is not None

    def text(self) -> str:
        return shlex.join(self.argv)


def parse(argv: Sequence[str]) -> Command:
    argv = tuple(argv) or DEFAULT
    program = os.path.basename(argv[0])
    if program in ("pytest", "py.test"):
        return Command(argv, tuple(argv[1:]), cwd_on_path=False)
    python = program in _PYTHONS or os.path.realpath(argv[0]) == os.path.realpath(sys.executable)
    if python and len(argv) >= 3 and argv[1] == "-m" and argv[2] == "pytest":
        return Command(argv, tuple(argv[3:]), cwd_on_path=True)
    return Command(argv, None, cwd_on_path=False)
