"""Processes for runs: forks of this warm process (pytest), or new processes.

``warm()`` imports pytest and torch once, torch at one thread and with no parallel op
run: OpenMP's pool does not survive ``fork`` (mutmut 3 forks after it started, and on a
small PyTorch project every child then hangs until its timeout). The project's own
modules are never imported here: each child imports them fresh, mutant included.

``Pool`` runs at most ``workers`` runs at once and hands back each finished one; a run
past its deadline has its process group killed (and any process that left the group,
through the harness's subreaper) and is reported as timed out. ``close()`` ends every
run still going: on Ctrl-C or SIGTERM nothing is left behind.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.harness import reaper

_warm_folders: list[str] = []  # removed by ``loading``'s exit too


def warm() -> None:
    os.environ["OMP_NUM_THREADS"] = "1"  # before torch loads its OpenMP runtime
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    with contextlib.suppress(ImportError):
        import torch

        torch.set_num_threads(1)
        importlib.import_module("torch.nn.functional")
        parameter = torch.nn.Parameter(torch.zeros(1))
        parameter.grad = torch.zeros(1)
        torch.optim.SGD([parameter], lr=0.1).step()  # the lazy torch._dynamo import
        # The witness probes every run installs (``facts``): imported once, here.
        importlib.import_module("experiments.harness.observe")
    _empty_session()
    gc.collect()
    gc.freeze()  # pages of what the children share stay shared


def _empty_session() -> None:
    """One pytest session on a trivial test, output discarded: it imports pytest's plugins,
    those installed (entry points) and what their hooks import late (hypothesis' summary
    imports hypothesis: 1.3 s), which each child would otherwise import again (2.4 s
    against 0.3 s per child on the fixture project)."""
    import pytest

    folder = tempfile.mkdtemp(prefix="trainwreck-warm-")
    _warm_folders.append(folder)
    try:
        Path(folder, "test_warm.py").write_text("def test_warm():\n    assert True\n")
        saved = os.dup(1), os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        # Run from the throwaway folder: plugins write relative to the working directory
        # (pytest-benchmark's .benchmarks/), which here is the user's project.
        previous = os.getcwd()
        try:
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.chdir(folder)
            pytest.main(["-q", "-p", "no:cacheprovider", f"--rootdir={folder}", folder])
        finally:
            os.chdir(previous)
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for descriptor in (*saved, null):
                os.close(descriptor)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        _warm_folders.remove(folder)


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """Ctrl-C or SIGTERM while native code loads leaves at once (130, 143): an exception
    raised inside such an import can abort the process or half-import a module. Nothing
    has been started or written yet."""

    def leave(number: int, _frame: object) -> None:
        sys.stderr.write("trainwreck test: interrupted\n")
        for folder in _warm_folders:
            shutil.rmtree(folder, ignore_errors=True)
        os._exit(128 + number)

    previous = {number: signal.signal(number, leave) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def fork_is_safe() -> bool:
    torch = sys.modules.get("torch")
    cuda = torch is not None and torch.cuda.is_initialized()
    return sys.platform == "linux" and hasattr(os, "fork") and not cuda


@dataclass
class Running:
    key: Any
    pid: int
    deadline: float
    started: float
    popen: subprocess.Popen | None = None
    pidfd: int | None = field(default=None, repr=False)


@dataclass
class Finished:
    key: Any
    exit_code: int | None  # None: killed at its deadline
    wall_s: float
    cpu_s: float = 0.0  # unlike the wall time, not inflated by a busy machine


class Pool:
    """Up to ``workers`` runs at once (see the module docstring)."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self.running: dict[int, Running] = {}

    @property
    def full(self) -> bool:
        return len(self.running) >= self.workers

    def fork(self, key: Any, timeout_s: float, body: Callable[[], None]) -> None:
        """Run ``body`` (which must end with ``os._exit``) in a forked child."""
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's side; body never returns
            try:
                body()
            finally:
                os._exit(70)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.setpgid(pid, pid)  # also done in the child: whichever comes first
        self._track(Running(key, pid, time.monotonic() + timeout_s, time.monotonic()))

    def adopt(self, key: Any, pid: int, timeout_s: float) -> None:
        """Track a run another process forked and this one adopted (the warm project's
        runs: orphaned on purpose, they come to this process, a subreaper)."""
        now = time.monotonic()
        self._track(Running(key, pid, now + timeout_s, now))

    def spawn(self, key: Any, timeout_s: float, argv: list[str], **popen: Any) -> None:
        """Run ``argv`` in a new process (and process group)."""
        process = subprocess.Popen(argv, start_new_session=True, **popen)
        now = time.monotonic()
        self._track(Running(key, process.pid, now + timeout_s, now, popen=process))

    def _track(self, run: Running) -> None:
        with contextlib.suppress(OSError, AttributeError):
            run.pidfd = os.pidfd_open(run.pid)
        self.running[run.pid] = run

    def wait(self) -> Iterator[Finished]:
        """Block until at least one run ends (or passes its deadline); yield those."""
        while self.running:
            done = list(self._reap())
            if done:
                yield from done
                return
            now = time.monotonic()
            soonest = min(run.deadline for run in self.running.values())
            fds = [run.pidfd for run in self.running.values() if run.pidfd is not None]
            pause = max(0.0, min(soonest - now, 0.05 if len(fds) < len(self.running) else 1.0))
            if fds:
                select.select(fds, [], [], pause)
            else:
                time.sleep(pause)

    def _reap(self) -> Iterator[Finished]:
        now = time.monotonic()
        for pid, run in list(self.running.items()):
            polled = _poll(pid)
            if polled is None and now >= run.deadline:
                self._kill(run)
                self._forget(run)
                yield Finished(run.key, None, now - run.started)
                continue
            if polled is not None:
                if run.popen is not None:  # reaped here: Popen must not wait for it again
                    run.popen.returncode = polled[0]
                self._forget(run)
                self._end_group(pid)
                yield Finished(run.key, polled[0], time.monotonic() - run.started, polled[1])

    def _kill(self, run: Running) -> None:
        reaper.kill_tree(run.pid)
        self._end_group(run.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(run.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(run.pid, 0)

    @staticmethod
    def _end_group(pgid: int) -> None:
        """What a run left behind in its group (a data loader worker) ends with it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)

    def _forget(self, run: Running) -> None:
        self.running.pop(run.pid, None)
        if run.pidfd is not None:
            os.close(run.pidfd)

    def close(self) -> None:
        """End every run still going (Ctrl-C, SIGTERM, an error)."""
        for run in list(self.running.values()):
            self._kill(run)
            self._forget(run)
        reaper.end_adopted(set())


def _poll(pid: int) -> tuple[int, float] | None:
    """(exit code, CPU seconds of the process and the children it waited for), or None
    while it runs."""
    try:
        waited, status, usage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:
        return -1, 0.0
    if waited == 0:
        return None
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
