"""One run of the test command under pytest, in its own process: a mutant or the baseline.

Entered right after ``os.fork()`` in the warm parent (``run_forked``), or in a new
interpreter (``python -m experiments.mutation_testing.child RUN_DIR``: the benchmark's
"fresh process per mutant", and where fork is unsafe). Either way: its own process
group, output to files, the run's private copy of the project as working directory and
in place of the project's folder on ``sys.path``, the write guard of the harness, the
mutant served by the harness's import hook compiled with reach probes (so an editable
install of the project, which imports from the user's tree, still gets the mutant), the
witness probes before anything of the project is imported (``facts``), and
``pytest.main`` with the ``plugin.Observer``. The result goes to ``RUN_DIR/result.json``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from experiments.harness import guard
from experiments.harness.child import _die_with_parent, _redirect_output
from experiments.mutation_testing import serve
from experiments.mutation_testing.facts import TestFacts
from experiments.mutation_testing.lines import LineRecorder
from experiments.mutation_testing.plugin import Observer
from experiments.mutation_testing.watch import Watch

SPEC_FILE = "spec.json"
RESULT_FILE = "result.json"
SETUP_FAILED = 70


def run_forked(spec: dict[str, Any]) -> NoReturn:
    """Body of a forked child; never returns into the parent's code."""
    code = SETUP_FAILED
    try:
        os.setpgid(0, 0)  # the parent ends the whole group on timeout or Ctrl-C
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handlers
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _die_with_parent(spec["parent_pid"])
        code = run(spec)
    except BaseException:
        import traceback

        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def enter(spec: dict[str, Any], run_dir: Path) -> None:
    """What every run's process does first: its output to files, its private copy as the
    working directory and on ``sys.path``, bytecode outside the user's tree, the guard."""
    _redirect_output(run_dir)
    workdir, root = spec["workdir"], spec["root"]
    stay_in_mirror(workdir)
    os.chdir(workdir)
    sys.path[:] = _private_path(sys.path, root, workdir, spec["cwd_on_path"])
    sys.argv = ["pytest", *spec["pytest_args"]]
    sys.pycache_prefix = spec["pycache"]  # shared by the session's runs, never the user's
    sys.dont_write_bytecode = False
    guard.install(workdir, protected=[root], allowed=[str(run_dir), spec["pycache"]])


def run(spec: dict[str, Any]) -> int:
    run_dir = Path(spec["run_dir"])
    enter(spec, run_dir)
    workdir = spec["workdir"]
    aliases: dict[str, str] = {}
    counters: list[int] = []
    probed: set[int] = set()
    mutant = spec.get("mutant")
    if mutant:
        counters, probed = serve.install(mutant)
        aliases = {path: mutant["name"] for path in mutant["paths"]}
    recorder = watch = None
    if spec.get("record"):
        recorder = LineRecorder(target["real"] for target in spec["record"])
        watch = Watch(recorder, spec["record"], workdir)
        sys.addaudithook(watch.audit)
    witness = spec.get("witness")
    facts = TestFacts(spec.get("witness_tests"), spec.get("witness_replay")) if witness else None
    observer = Observer(spec.get("selection"), aliases, recorder, facts)
    import pytest

    started = time.perf_counter()
    exit_code = int(pytest.main(list(spec["pytest_args"]), plugins=[observer]))
    result = {
        **observer.result(),
        "exit": exit_code,
        "wall_s": time.perf_counter() - started,
        "reach": [count if index in probed else None for index, count in enumerate(counters)]
        if mutant
        else None,
        "lines": recorder.as_json() if recorder is not None else None,
        **(watch.result() if watch is not None else {}),
    }
    if facts is not None:
        facts.remove()
    guard.uninstall()
    write_result(run_dir, result)
    return 0


_mirror: list[str] = []  # the current run's mirror (one audit hook per process serves it)


def stay_in_mirror(workdir: str) -> None:
    """From now on a ``chdir`` into this run's mirror stays in it (``_stay_in_mirror``)."""
    if not _mirror:
        sys.addaudithook(_stay_in_mirror)
    _mirror[:] = [os.path.dirname(os.path.abspath(workdir))]


def _stay_in_mirror(event: str, args: tuple) -> None:
    """Before ``os.chdir`` into a mirrored folder (a conftest moving to its tests' folder),
    make each folder on the way a real folder of symlinks: through a symlink the working
    directory would resolve into the user's tree, where every relative write is refused."""
    if event != "os.chdir" or not args or not isinstance(args[0], str | bytes | os.PathLike):
        return
    mirror = _mirror[0]
    path = os.path.abspath(os.fsdecode(args[0]))
    if not path.startswith(mirror + os.sep):
        return
    current = mirror
    for part in os.path.relpath(path, mirror).split(os.sep):
        current = os.path.join(current, part)
        if os.path.islink(current) and os.path.isdir(current):
            target = os.path.realpath(current)
            os.unlink(current)
            os.mkdir(current)
            for entry in os.scandir(target):
                os.symlink(entry.path, os.path.join(current, entry.name))
        elif not os.path.isdir(current):
            return


def _private_path(path: list[str], root: str, workdir: str, cwd_first: bool) -> list[str]:
    """``sys.path`` with the project's folder (and folders in it) replaced by the private
    copy's, so that test files and project modules are imported from the copy."""
    real_root = os.path.realpath(root)
    private = []
    for entry in path:
        real = os.path.realpath(entry or ".")
        if real == real_root or real.startswith(real_root + os.sep):
            entry = os.path.join(workdir, os.path.relpath(real, real_root))
        private.append(entry)
    if cwd_first:
        private.insert(0, workdir)
    return list(dict.fromkeys(private))


def write_result(run_dir: Path, data: Any) -> None:
    temporary = run_dir / (RESULT_FILE + ".tmp")
    path = run_dir / RESULT_FILE
    temporary.write_text(json.dumps(data), encoding="utf-8")
    os.replace(temporary, path)


def main(argv: list[str] | None = None) -> NoReturn:
    """A new interpreter: ``python -m experiments.mutation_testing.child RUN_DIR``."""
    run_dir = Path((argv or sys.argv[1:])[0])
    spec = json.loads((run_dir / SPEC_FILE).read_text(encoding="utf-8"))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    code = SETUP_FAILED
    try:
        code = run(spec)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    main()
