"""The warm project's server process: the project imported and its tests collected once,
then one forked run per mutant that neither imports nor collects again.

The server is a fork of the session's warm process (pytest and torch imported). In the
session's shared private copy of the project it calls ``pytest.main`` as a run would;
when pytest reaches its test loop (everything imported: conftest files, test modules, the
project, their dependencies; every test collected), the ``Server`` plugin takes over
instead of running the tests. It lists the functions of the mutated files
(``hotswap.functions_of``), says it is ready, and serves requests, each the spec of one
run: it forks, and the fork forks again and exits, so that the run is orphaned and
adopted by the session's process, a subreaper, which waits for it as for any run of its
``Pool``. The run:

- takes its own output files (every descriptor that pointed at the server's output,
  pytest's capture and faulthandler copies included), working directory (its own private
  copy, at the place matching the server's: a conftest may have moved into ``tests/``),
  write guard (the shared copy is protected too) and ``--basetemp``;
- puts its mutant in: served to any later import of the file, and swapped into every
  function object already made from it (``hotswap``); only mutants that qualify are sent
  here, the others run in a child that imports and collects afresh;
- keeps its selected tests in ``session.items`` and returns into pytest's own test loop;
  when ``pytest.main`` returns, it writes its result and exits.

A request on a closed pipe or a quit ends the server.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import pytest

from experiments.harness import guard, modules, reach
from experiments.mutation_testing import child, hotswap
from experiments.mutation_testing.facts import TestFacts
from experiments.mutation_testing.plugin import Observer

READY_TIMEOUT_S = 3600.0


class Server:
    """The plugin that turns pytest's test loop into the server's loop (module docstring)."""

    def __init__(
        self, spec: dict[str, Any], requests: int, replies: int, observer: Observer
    ) -> None:
        self.spec = spec
        self.observer = observer
        self.requests = os.fdopen(requests, "r", encoding="utf-8")
        self.replies = replies
        self.run: dict[str, Any] | None = None  # set in a run's process
        self.functions: dict[str, list] = {}
        self.started = 0.0

    def reply(self, **message: Any) -> None:
        os.write(self.replies, (json.dumps(message) + "\n").encode())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session):
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            self.reply(failed=f"{session.testsfailed} errors while collecting the tests")
            os._exit(0)
        others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        if others:
            # A fork copies only this thread: a lock another one holds (logging's, a
            # queue's) stays held in every run, which would hang on it.
            self.reply(failed=f"threads run after collection ({', '.join(others[:3])})")
            os._exit(0)
        self.functions = hotswap.functions_of(self.spec["targets"])
        self.cwd = os.getcwd()
        gc.collect()
        gc.freeze()  # what the runs share stays shared
        self.reply(ready=True, collected=len(session.items))
        self.run = self._serve()  # returns in a run's process only
        self._become_run(session)
        return (yield)

    def _serve(self) -> dict[str, Any]:
        while True:
            line = self.requests.readline()
            if not line:
                os._exit(0)
            request = json.loads(line)
            if request.get("quit"):
                os._exit(0)
            read, write = os.pipe()
            middle = os.fork()
            if middle == 0:
                os.close(read)
                run = os.fork()
                if run:
                    os.write(write, str(run).encode())
                    os._exit(0)
                os.close(write)
                return request
            os.close(write)
            with os.fdopen(read, "rb") as pipe:
                pid = int(pipe.read() or 0)
            os.waitpid(middle, 0)
            self.reply(pid=pid)

    def _become_run(self, session: pytest.Session) -> None:
        assert self.run is not None
        self.started = time.perf_counter()
        os.setpgid(0, 0)  # the session ends the whole group on timeout or Ctrl-C
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.requests.close()
        os.close(self.replies)
        parent = self.spec["parent_pid"]
        for _ in range(2000):  # adopted by the session's process once the middle exits
            if os.getppid() == parent:
                break
            time.sleep(0.001)
        _die_with(parent)
        spec = json.loads(Path(self.run["spec"]).read_text(encoding="utf-8"))
        self.run = spec
        run_dir = Path(spec["run_dir"])
        _take_output(run_dir, self.spec["output"])
        shared, private = self.spec["workdir"], spec["workdir"]
        child.stay_in_mirror(private)
        os.chdir(_matching(self.cwd, [shared, self.spec["root"]], private))
        guard.install(
            private,
            protected=[self.spec["root"], shared],
            allowed=[str(run_dir), spec["pycache"]],
        )
        config = session.config
        factory = getattr(config, "_tmp_path_factory", None)
        if factory is not None:  # pytest's own per-session folder, made on first use
            factory._given_basetemp = run_dir / "tmp"
            factory._basetemp = None
        observer = self.observer
        mutant = spec.get("mutant")
        aliases: dict[str, str] = {}
        if mutant:
            config.option.tbstyle = "no"  # as ``runs.pytest_spec`` asks of a cold run
            paths = [os.path.join(shared, mutant["name"]), *mutant["paths"]]
            aliases = {path: mutant["name"] for path in paths}
            self.counters, self.probed = _put_in(mutant, paths, self.functions)
        observer.restart(
            spec.get("selection"), aliases, spec.get("witness_tests"), spec.get("witness_replay")
        )
        observer.select(session)

    def result(self, observer: Observer, exit_code: int) -> dict[str, Any]:
        mutant = (self.run or {}).get("mutant")
        counters = getattr(self, "counters", [])
        probed = getattr(self, "probed", set())
        return {
            **observer.result(),
            "exit": exit_code,
            "wall_s": time.perf_counter() - self.started,
            "reach": [count if index in probed else None for index, count in enumerate(counters)]
            if mutant
            else None,
            "lines": None,
            "spawned": [],
        }


def _put_in(mutant: dict[str, Any], paths: list[str], functions: dict[str, list]) -> tuple:
    regions = mutant["regions"]
    counters = reach.install_counters(len(regions))
    code, probed = reach.compile_probed(mutant["source"], mutant["paths"][0], regions)
    for path in paths:
        modules.install(path, mutant["source"], code)
    real = os.path.realpath(mutant["paths"][-1])
    hotswap.swap(functions.get(real, []), mutant["original"], mutant["paths"][0], code)
    return counters, probed


def _matching(cwd: str, bases: list[str], private: str) -> str:
    """The place in ``private`` that matches ``cwd`` under one of ``bases``; else ``cwd``
    (a folder outside the project: a conftest's temporary folder)."""
    for base in bases:
        real = os.path.realpath(base)
        if cwd == real or cwd.startswith(real + os.sep):
            return os.path.join(private, os.path.relpath(cwd, real))
    return cwd


def _take_output(run_dir: Path, server_output: list[str]) -> None:
    """Point every descriptor that wrote to the server's output files (1, 2, and the
    copies pytest's capture and faulthandler keep) at the run's own files."""
    targets = {}
    for path, name in zip(server_output, ("stdout.txt", "stderr.txt")):
        with contextlib.suppress(OSError):
            stat = os.stat(path)
            targets[(stat.st_dev, stat.st_ino)] = run_dir / name
    opened: dict[Path, int] = {}
    for entry in os.listdir("/proc/self/fd"):
        descriptor = int(entry)
        try:
            stat = os.fstat(descriptor)
        except OSError:
            continue
        target = targets.get((stat.st_dev, stat.st_ino))
        if target is None:
            continue
        if target not in opened:
            opened[target] = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(opened[target], descriptor)
    for descriptor in opened.values():
        os.close(descriptor)


def _die_with(parent: int) -> None:
    from experiments.harness.child import _die_with_parent

    _die_with_parent(parent)


def main(spec: dict[str, Any], requests: int, replies: int) -> NoReturn:
    """The server process's body (a fork of the session's process); never returns."""
    code = child.SETUP_FAILED
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _die_with(spec["parent_pid"])
        child.enter(spec, Path(spec["output"][0]).parent)
        # The witness probes go in before the project is imported (its modules bind the
        # wrapped functions), once: every run forked from here resets them per test.
        observer = Observer(facts=TestFacts() if spec.get("witness") else None)
        server = Server(spec, requests, replies, observer)
        exit_code = int(pytest.main(list(spec["pytest_args"]), plugins=[observer, server]))
        if server.run is None:  # pytest ended before its test loop: nothing to serve
            server.reply(failed=f"pytest ended before running the tests (exit {exit_code})")
            code = 0
        else:  # a run's process: its tests have run
            child.write_result(Path(server.run["run_dir"]), server.result(observer, exit_code))
            guard.uninstall()
            code = 0
    except BaseException:
        import traceback

        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
