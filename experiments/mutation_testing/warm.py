"""The session's side of the warm project (``server``): start the server, send it runs,
adopt each run into the ``Pool``, stop it.

The server gets its own private copy of the project, shared by its runs for reading (each
run writes into a copy of its own), and its output goes to ``scratch/server/``. Whatever
keeps it from serving (pytest ends before its test loop, it dies, it does not answer) is
returned as one line, and the session runs every mutant in a child that imports and
collects afresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
from pathlib import Path
from typing import Any

from experiments.harness import workdir
from experiments.mutation_testing import child, runs
from experiments.mutation_testing.forkserver import Pool


class WarmProject:
    def __init__(self, setting: runs.Setting, plugins: list[str] | None) -> None:
        self.setting = setting
        self.plugins = plugins
        self.pid: int | None = None
        self.shared: Path | None = None
        self.requests: int | None = None
        self.replies: Any = None
        self.folder = setting.scratch / "server"
        self.collected = 0

    def start(self, targets: list[str], timeout_s: float) -> str:
        """ "" once the server is ready; else why it is not."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.shared = workdir.create(self.setting.root, exclude=[self.setting.out])
        prepared = runs.Prepared(self.folder, self.shared)
        spec = runs.pytest_spec(self.setting, prepared, None, None, plugins=self.plugins)
        spec["targets"] = targets
        spec["output"] = [str(self.folder / "stdout.txt"), str(self.folder / "stderr.txt")]
        for name in ("stdout.txt", "stderr.txt"):
            (self.folder / name).touch()
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        from experiments.mutation_testing import server

        pid = os.fork()
        if pid == 0:  # pragma: no cover - the server's side; never returns
            try:
                os.close(request_write)
                os.close(reply_read)
                server.main(spec, request_read, reply_write)
            finally:
                os._exit(child.SETUP_FAILED)
        os.close(request_read)
        os.close(reply_write)
        self.pid, self.requests = pid, request_write
        self.replies = os.fdopen(reply_read, "r", encoding="utf-8")
        answer = self._answer(timeout_s)
        if answer.get("ready"):
            self.collected = int(answer.get("collected", 0))
            return ""
        why = answer.get("failed") or "it did not answer"
        self.close()
        return f"{why}{self._tail()}"

    def _answer(self, timeout_s: float) -> dict[str, Any]:
        ready, _, _ = select.select([self.replies], [], [], timeout_s)
        line = self.replies.readline() if ready else ""
        if not line:
            return {"failed": "it ended" if ready else f"no answer within {timeout_s:.0f} s"}
        return json.loads(line)

    def _tail(self) -> str:
        text = ""
        with contextlib.suppress(OSError):
            text = (self.folder / "stderr.txt").read_text(errors="replace").strip()
        last = text.splitlines()[-1:] if text else []
        return f" ({last[0][:200]})" if last else ""

    def start_run(self, pool: Pool, key: Any, timeout_s: float, spec: dict[str, Any]) -> bool:
        """Send one run; False when the server is gone (the caller runs it otherwise)."""
        if self.requests is None:
            return False
        path = Path(spec["run_dir"]) / child.SPEC_FILE
        path.write_text(json.dumps(spec), encoding="utf-8")
        try:
            os.write(self.requests, (json.dumps({"spec": str(path)}) + "\n").encode())
        except OSError:
            self.close()
            return False
        answer = self._answer(60.0)
        if not answer.get("pid"):
            self.close()
            return False
        pool.adopt(key, int(answer["pid"]), timeout_s)
        return True

    def close(self) -> None:
        if self.requests is not None:
            with contextlib.suppress(OSError):
                os.close(self.requests)
            self.requests = None
        if self.replies is not None:
            self.replies.close()
            self.replies = None
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = None
        if self.shared is not None:
            workdir.remove(self.shared)
            self.shared = None

    def __enter__(self) -> WarmProject:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def ready_timeout(baseline_wall_s: float) -> float:
    """How long the server may take to import and collect: never more than the whole
    baseline took, with a wide margin for a busy machine."""
    return max(60.0, 4 * baseline_wall_s)


def verify(
    project: WarmProject,
    pool: Pool,
    setting: runs.Setting,
    tests: list[str] | None,
    timeout_s: float,
) -> str:
    """The unmutated tests the warm runs will run, run warm once: "" when they pass; else
    why not (a test that writes beside its own file, in the shared copy, fails here)."""
    prepared = runs.prepare(setting, 0, None)
    # Its witness facts are nobody's reference (the baseline's are): none kept.
    spec = runs.pytest_spec(
        setting, prepared, None, tests, plugins=project.plugins, witness_tests=[]
    )
    if not project.start_run(pool, "warm-check", timeout_s, spec):
        workdir.remove(prepared.workdir)
        return "the server stopped"
    finished = next(iter(pool.wait()))
    result, tail = runs.collect(prepared, finished.exit_code)
    if finished.exit_code is None:
        return "the unmutated tests did not end in time"
    if result is None or result.get("exit") != 0:
        failed = (result or {}).get("failed") or []
        errors = {e["test"]: e for e in (result or {}).get("errors") or [] if "test" in e}
        first = failed[0] if failed else ""
        what = errors.get(first, {}).get("message", "") if first else tail.strip()[-200:]
        return f"the unmutated tests fail that way ({first or 'exit'}: {what[:200]})"
    return ""
