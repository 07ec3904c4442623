"""Progress lines for ``trainwreck bench``: one line rewritten in place on a terminal, a
few plain lines otherwise (a log file or CI output must not get one \\r-joined line)."""

from __future__ import annotations

import sys
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
