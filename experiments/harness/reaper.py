"""Every process a run starts ends with it, and counts towards its memory cap.

A run's process is a child subreaper (``PR_SET_CHILD_SUBREAPER``): while it lives, every
process it starts, even one that left its session with ``setsid`` and whose parent
exited, stays below it, so ``descendants`` finds them all under ``/proc``. When the run's
process itself dies, its descendants move up to the next subreaper: the sweep process,
which is one while it runs (``subreaper``), and which then kills and reaps them
(``end_adopted``). Memory: the run's resident set plus what each descendant holds
privately (a forked data loader worker shares most of its pages with the run).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Iterator

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def _prctl(option: int, value: int | ctypes.c_int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


@contextlib.contextmanager
def subreaper() -> Iterator[None]:
    """This process adopts orphaned descendants while the block runs."""
    previous = ctypes.c_int(0)
    known = _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(previous))  # type: ignore[arg-type]
    become_subreaper()
    try:
        yield
    finally:
        if known and not previous.value:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found.extend(int(part) for part in handle.read().split())
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    queue = children(pid)
    while queue:
        child = queue.pop()
        if child not in found:
            found.append(child)
            queue.extend(children(child))
    return found


def tree_memory_mb(pid: int) -> float:
    """Resident memory of ``pid`` plus the private memory of its descendants."""
    return rss_mb(pid) + sum(private_mb(child) for child in descendants(pid))


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_MB
    except (OSError, IndexError, ValueError):
        return 0.0


def private_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            total_kb = sum(
                int(line.split()[1])
                for line in handle
                if line.startswith((b"Private_Clean:", b"Private_Dirty:"))
            )
        return total_kb / 1024
    except (OSError, IndexError, ValueError):
        return rss_mb(pid)


def kill_tree(pid: int) -> None:
    """Stop the whole tree first (nothing forks while it is killed), then kill it."""
    tree = descendants(pid)
    for signal_number in (signal.SIGSTOP, signal.SIGKILL):
        for member in (*tree, *descendants(pid)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(member, signal_number)


def end_adopted(runs: set[int]) -> int:
    """Kill and reap the orphans this (subreaper) process adopted from ended runs: its
    children that are not runs and live in another session than its own. Their own
    children come up to this process as they die: a few rounds take those too."""
    me, session = os.getpid(), os.getsid(0)
    ended = 0
    for _ in range(8):
        adopted = []
        for child in children(me):
            if child in runs:
                continue
            try:
                if os.getsid(child) == session:
                    continue  # started by this process itself, not a run's leftover
            except ProcessLookupError:
                continue
            adopted.append(child)
        if not adopted:
            break
        for child in adopted:
            kill_tree(child)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child, 0)
            ended += 1
    return ended
