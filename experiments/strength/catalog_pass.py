"""The catalog's strength pass: every parametric operator's axes on every loop it has a
site in (profile option ``strength``; off in the quick profile, which stays fast)."""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import sys
import traceback
from collections.abc import Callable, Sequence

from experiments import interrupt
from experiments.cli_support import UserError
from experiments.strength.axes import AXES
from experiments.strength.cli import search_and_store, summary_line
from experiments.strength.runner import Harness, prepare

# Bracket ratio (strong/weak) ** (1/4): ~3x for x1.25..x100. A third step (~1.7x) cost
# 1.7x the pass's runs (903 against 537 over the full profile's 66 searches, the step
# nearest the threshold being the one that needs the most seeds; docs/benchmarks.md #16);
# ``trainwreck strength --steps 4`` narrows one search further.
CATALOG_STEPS = 2


def strength_pass(
    loops: Sequence[str],
    overrides_of: Callable[[str], list[str]],
    workers: int | None,
    max_seeds: int,
    say: Callable[[str], None],
    harness: Harness | None = None,
    store: bool = True,
    shard: tuple[int, int] | None = None,
    steps: int = CATALOG_STEPS,
    only: int | None = None,
) -> int:
    """Search every (loop, axis); returns how many searches ran. A loop without a site
    for an operator is skipped, as the catalog has no row for it either. ``harness`` and
    ``store=False``: a benchmark's replay from stored runs, writing nothing. ``shard``
    (index, count): only the searches of that shard (split by loop and axis). ``only``: the
    search of that number (loops x axes, in order), for the processes of one command that
    share the pass (``parallel_strength_pass``)."""
    from experiments.adaptive import shard_of

    done = 0
    for number, (loop, axis) in enumerate((loop, axis) for loop in loops for axis in AXES):
        name = f"{loop}/{axis.operator}/{axis.direction}"
        if shard is not None and shard_of(name, shard[1]) != shard[0]:
            continue
        if only is not None and number != only:
            continue
        try:
            session = prepare(loop, axis, overrides_of(loop), workers, max_seeds, harness)
        except UserError as error:
            if "has no site" in str(error):
                continue
            raise
        if store:
            _, result, _ = search_and_store(session, loop, steps)
        else:
            result = session.search(steps)
        say(f"strength {loop}: {summary_line(result)}")
        done += 1
    return done


def parallel_strength_pass(
    loops: Sequence[str],
    overrides_of: Callable[[str], list[str]],
    workers: int,
    max_seeds: int,
    say: Callable[[str], None],
    steps: int = CATALOG_STEPS,
) -> int:
    """The pass split over ``workers`` forked processes of this (warm) one, each running
    one run at a time: a search samples 2-3 runs per round, so a single search keeps one of
    two workers waiting (docs/benchmarks.md #16). The processes take the next search from
    a shared queue (a pipe holding every search's number, read a record at a time: reads
    this small are atomic), so a long search does not hold the others back. Results go
    where ``strength_pass``'s go (one file per search, runs through the cache's locks).
    Returns how many processes failed."""
    if workers < 2:
        strength_pass(loops, overrides_of, workers, max_seeds, say, steps=steps)
        return 0
    total = len(loops) * len(AXES)
    read_end, write_end = os.pipe()
    os.write(write_end, b"".join(struct.pack("<I", number) for number in range(total)))
    os.close(write_end)
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's exit status is what the parent checks
            status = 1
            try:
                while record := os.read(read_end, 4):
                    (number,) = struct.unpack("<I", record)
                    strength_pass(loops, overrides_of, 1, max_seeds, say, steps=steps, only=number)
                status = 0
            except KeyboardInterrupt as stop:
                status = interrupt.exit_status(stop)  # the parent says it once
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(status)
        children.append(pid)
    os.close(read_end)
    failed = 0
    try:
        for pid in children:
            _, status = os.waitpid(pid, 0)
            failed += os.waitstatus_to_exitcode(status) != 0
    except KeyboardInterrupt as stop:
        # A terminal's Ctrl-C reached the whole group; a ``kill`` only this process: pass it
        # on, and leave no process behind.
        number = signal.SIGTERM if isinstance(stop, interrupt.Terminated) else signal.SIGINT
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, number)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        raise
    return failed
