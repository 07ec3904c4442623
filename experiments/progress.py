"""Progress on stderr, for every command that works through a known number of items: one
line rewritten in place on a terminal, a few plain lines otherwise (a log file or CI
output must not get one \\r-joined line).

``ProgressBar`` follows runs of a sweep (``run_sweep``'s ``progress(done, total, cached,
failed)``: catalog, strength); ``progress_printer`` follows cases of a benchmark
(``report(done, total)``: ``trainwreck bench``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

PLAIN_LINES = 4  # updates written when the output is not a terminal (25%, 50%, 75%, done)
TTY_EVERY = 10  # on a terminal, rewrite the line every this many cases


def progress_printer(name: str, stream: TextIO | None = None) -> Callable[[int, int], None]:
    """``report(done, total)`` writing ``name: done/total`` to ``stream`` (stderr)."""
    out = stream if stream is not None else sys.stderr
    on_terminal = out.isatty()
    printed: set[int] = set()

    def report(done: int, total: int) -> None:
        if on_terminal:
            if done == total or done % TTY_EVERY == 0:
                end = "\n" if done == total else ""
                print(f"\r{name}: {done}/{total}", end=end, file=out, flush=True)
            return
        marks = {-(-total * part // PLAIN_LINES) for part in range(1, PLAIN_LINES + 1)}
        if done in marks and done not in printed:  # ceil(total * part / PLAIN_LINES)
            printed.add(done)
            print(f"{name}: {done}/{total}", file=out, flush=True)

    return report


class ProgressBar:
    """``[#####.....] 120/300 runs  cached 80  not ok 12  ETA 1m05s`` on one line (a line per
    10% when stderr is not a terminal, so logs stay readable)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.started = time.monotonic()
        self.last_decile = -1
        self.fresh_started: float | None = None

    def __call__(self, done: int, total: int, cached: int, failed: int) -> None:
        elapsed = time.monotonic() - self.started
        trained = done - cached
        eta = ""
        if trained > 0 and done < total:
            per_run = elapsed / trained
            eta = f"  ETA {_duration(per_run * (total - done))}"
        width = 30
        filled = int(width * done / max(total, 1))
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} runs"
            f"  cached {cached}  not ok {failed}{eta}"
        )
        if self.tty:
            self.stream.write("\r" + line.ljust(90))
            self.stream.flush()
        else:
            decile = 10 * done // max(total, 1)
            if decile != self.last_decile or done == total:
                self.last_decile = decile
                self.stream.write(line + "\n")
                self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
