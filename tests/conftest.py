"""Helpers the operator tests share: sites and mutants of a snippet, running a script.

Import them as ``from conftest import mutate, run_script, sites`` (pytest puts tests/ on
the path, as it does for ``fixtures_runs``).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap

import pytest

from mutations.registry import get_operator
from mutator import Mutant, Site, SourceFile

# Fixture projects have their own tests, run by ``trainwreck test`` in a copy; they are
# not this suite's tests (their imports resolve only inside their own project).
collect_ignore_glob = ["projects/*"]


def sites(source: str, operator: str, **params) -> list[Site]:
    """The sites of ``operator`` (with ``params``) in ``source`` (dedented first)."""
    return SourceFile(textwrap.dedent(source), "t.py").find_sites(
        [get_operator(operator, **params)]
    )


def mutants(source: str, operator: str, **params) -> list[Mutant]:
    """One mutant per site of ``operator`` in ``source``."""
    parsed = SourceFile(textwrap.dedent(source), "t.py")
    return [parsed.apply([site]) for site in parsed.find_sites([get_operator(operator, **params)])]


def only_mutant(source: str, operator: str, **params) -> Mutant:
    """The mutant of the one site ``operator`` has in ``source`` (fails on 0 or 2+ sites)."""
    found = mutants(source, operator, **params)
    assert len(found) == 1, [mutant.identity for mutant in found]
    return found[0]


def mutate(source: str, operator: str, **params) -> str:
    """The source of the one mutant ``operator`` makes of ``source``."""
    return only_mutant(source, operator, **params).source


def run_script(
    source: str, name: str = "__main__", filename: str = "script.py", out: io.StringIO | None = None
) -> dict:
    """Execute ``source`` as module ``name`` and return its globals; what it prints goes to
    ``out`` (swallowed when not given)."""
    namespace: dict = {"__name__": name}
    with contextlib.redirect_stdout(out if out is not None else io.StringIO()):
        exec(compile(source, filename, "exec"), namespace)
    return namespace


# -- TRAINWRECK_TEST_LOAD=N: the suite on a busy machine ------------------------------------
# N processes spin for the whole session, one core each, so the tests that depend on timing
# (deadlines, Ctrl-C, hangs) are tried the way a user's busy machine runs them. Each spinner
# watches its parent and stops when the test session ends, however it ends.
_SPIN = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    pass\n"


def _load_processes() -> int:
    value = os.environ.get("TRAINWRECK_TEST_LOAD", "0").strip() or "0"
    if not value.isdigit():
        raise pytest.UsageError(
            f"TRAINWRECK_TEST_LOAD must be a number of processes, got {value!r}"
        )
    return int(value)


@pytest.fixture(scope="session", autouse=True)
def machine_load():
    """The busy processes TRAINWRECK_TEST_LOAD asks for, for the whole session."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", _SPIN, str(os.getpid())])
        for _ in range(_load_processes())
    ]
    yield len(spinners)
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def pytest_report_header(config) -> str | None:
    count = _load_processes()
    return f"machine load: {count} busy processes (TRAINWRECK_TEST_LOAD)" if count else None
