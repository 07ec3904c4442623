"""Both ends of a reused run process's channel: the next run in, "done" out.

The parent writes a job (the run's config and ``__main__`` source) as an 8-byte length
and a JSON body; the run process answers each run it finished and will survive with one
JSON line ``{"code": exit code, "peak_rss_mb": ...}`` (shorter than ``PIPE_BUF``, so it
arrives whole). A run process that will not serve another run exits, and the parent reaps
it as it reaps a one-run process; when a check after a run ``ok`` retired it, it first
says why (``{"retired": reason}``, counted in ``Runner.retired``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
from dataclasses import dataclass
from typing import Any

from experiments.harness import reaper

_LENGTH = struct.Struct("!Q")


@dataclass
class Worker:
    """The parent's handle on a run process that may serve more runs."""

    pid: int
    jobs: int  # the parent writes jobs here
    done: int  # and reads "done" lines here
    runs: int = 0  # runs it finished and survived
    retired: str | None = None  # why it exits after its current run, if it said

    def descriptors(self) -> tuple[int, int]:
        return self.jobs, self.done


def channel() -> tuple[tuple[int, int], tuple[int, int]]:
    """((parent's job writer, parent's done reader), (child's job reader, child's done
    writer)); none inherited by programs the runs exec."""
    job_read, job_write = os.pipe()
    done_read, done_write = os.pipe()
    return (job_write, done_read), (job_read, done_write)


def close(descriptors: tuple[int, ...]) -> None:
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def send(worker: Worker, config: dict[str, Any], source: str) -> bool:
    """Hand ``worker`` its next run; False if it is gone (it died while idle)."""
    body = json.dumps({"config": config, "source": source}).encode("utf-8")
    data = _LENGTH.pack(len(body)) + body
    try:
        while data:
            data = data[os.write(worker.jobs, data) :]
    except OSError:  # BrokenPipeError: nobody reads any more
        return False
    return True


def poll(worker: Worker) -> dict[str, Any] | None:
    """The worker's "done" line, if it wrote one (call when ``done`` is readable or to
    check); None: still running, or it died (EOF), which reaping then tells."""
    import select

    readable, _, _ = select.select([worker.done], [], [], 0)
    if not readable:
        return None
    try:
        line = os.read(worker.done, 4096)
    except OSError:
        return None
    if not line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if isinstance(message, dict) and "retired" in message:
        worker.retired = str(message["retired"])  # it exits next; reaping completes the run
        return None
    return message if isinstance(message, dict) and "code" in message else None


def retire(worker: Worker) -> None:
    """End an idle worker and reap it (it runs nothing, so nothing is lost)."""
    close(worker.descriptors())
    reaper.kill_tree(worker.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(worker.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(worker.pid, 0)


# -- the run process's end ------------------------------------------------------------------
def report(done: int, message: dict[str, Any]) -> None:
    os.write(done, json.dumps(message).encode("utf-8") + b"\n")


def receive(jobs: int) -> tuple[dict[str, Any], str] | None:
    """Block until the parent sends the next run; None when it closed the channel."""
    header = _read_exactly(jobs, _LENGTH.size)
    if header is None:
        return None
    body = _read_exactly(jobs, _LENGTH.unpack(header)[0])
    if body is None:
        return None
    job = json.loads(body)
    return job["config"], job["source"]


def _read_exactly(descriptor: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(descriptor, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
