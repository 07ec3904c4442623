"""A run's trace stays bounded: beyond a size, frequent records are thinned.

``open_trace(path)`` is what the trace writer opens its file with. Up to ``limit`` bytes
every record is written. After that, records of each kind are kept one in ``stride``,
the stride doubling every further quarter of ``limit``: a long run keeps records spread
over its whole length at a size that grows with the log of its length. Beyond twice the
limit only the records that frame a run (start, end, held-out evaluation) are written.
``dropped()`` is how many records were left out, for the end record.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

ALWAYS = ("start", "end", "holdout")
_PREFIX = '{"kind": "'
_limit: int | None = None  # set by the run's process before its writer opens the trace
_current: CappedTrace | None = None


def configure(limit_bytes: int | None) -> None:
    global _limit
    _limit = int(limit_bytes) if limit_bytes else None


def open_trace(path: str | Path) -> CappedTrace:
    global _current
    _current = CappedTrace(open(path, "a", encoding="utf-8"), _limit)  # noqa: SIM115
    return _current


def dropped() -> int:
    return _current.dropped if _current is not None else 0


class CappedTrace:
    """A text file that thins JSON lines once ``limit`` characters were written."""

    def __init__(self, handle: IO[str], limit: int | None) -> None:
        self._handle = handle
        self.limit = limit
        self.written = 0
        self.dropped = 0
        self._seen: dict[str, int] = {}

    def write(self, text: str) -> int:
        if self.limit is None or self.written + len(text) <= self.limit:
            self.written += len(text)
            return self._handle.write(text)
        kept = [line for line in text.split("\n") if line and self._keep(line)]
        out = "".join(line + "\n" for line in kept)
        self.written += len(out)
        return self._handle.write(out)

    def _keep(self, line: str) -> bool:
        kind = line[len(_PREFIX) : line.find('"', len(_PREFIX))] if line.startswith(_PREFIX) else ""
        if kind in ALWAYS:
            return True
        assert self.limit is not None
        over = self.written - self.limit
        if over >= self.limit:
            self.dropped += 1
            return False
        stride = 2 ** (1 + max(0, over) * 4 // self.limit)
        seen = self._seen.get(kind, 0)
        self._seen[kind] = seen + 1
        if seen % stride == 0:
            return True
        self.dropped += 1
        return False

    @property
    def closed(self) -> bool:
        """The writer's periodic flush asks this before writing (it may race close())."""
        return self._handle.closed

    def flush(self) -> None:
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()
