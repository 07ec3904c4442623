"""Watching runs in flight: sleep until one ends or needs a look, end the ones past their
deadline or their memory cap, and kill a run's whole tree."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Collection

from experiments.harness import reaper
from experiments.harness.active import ActiveRun

MEMORY_POLL_S = 0.25


def wait(active: Collection[ActiveRun], at_most: float | None) -> None:
    """Sleep until a child ends, the next deadline or the next memory poll."""
    now = time.monotonic()
    timeout = MEMORY_POLL_S
    for run in active:
        timeout = min(timeout, max(0.0, run.started + run.timeout_s - now))
    if at_most is not None:
        timeout = min(timeout, at_most)
    descriptors = []
    with contextlib.suppress(AttributeError, OSError):
        descriptors = [os.pidfd_open(run.pid) for run in active]
    # A reused run process says "done" on its channel instead of exiting.
    channels = [run.worker.done for run in active if run.worker]
    try:
        if descriptors:
            select.select(descriptors + channels, [], [], timeout)
        else:
            time.sleep(min(timeout, 0.02))
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def check_limits(active: Collection[ActiveRun]) -> None:
    """Kill the runs past their deadline (``timeout``) or their memory cap (``oom``);
    cap their output streams on the way."""
    now = time.monotonic()
    for run in active:
        if run.killed_for:
            continue
        if now - run.started > run.timeout_s:
            kill(run, "timeout")
        elif now - run.last_poll >= MEMORY_POLL_S:
            run.last_poll = now
            for output in run.outputs:
                output.check()
            if reaper.tree_memory_mb(run.pid) > run.rss_cap_mb:
                kill(run, "oom")


def kill(run: ActiveRun, reason: str | None) -> None:
    """SIGKILL the run's process group and its descendants; the first reason stays."""
    if run.killed_for is None:
        run.killed_for = reason
    reaper.kill_tree(run.pid)  # its descendants, wherever their session
    try:
        os.killpg(run.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):  # before its setsid
            os.kill(run.pid, signal.SIGKILL)
