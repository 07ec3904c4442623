"""A run's ``stdout.txt`` / ``stderr.txt`` stay bounded: the head and the tail are kept.

The run writes its output straight into these files (``O_APPEND``, so do its children).
The parent looks at their size on every poll; once a file passes ``head + 2 * tail``
bytes it keeps the last ``tail`` bytes in memory and cuts the file back to its head (the
writers go on appending after it). When the run has ended, the file becomes head, one
marker line saying how many bytes were dropped, and the tail. Between two polls a file
may grow by what the script writes in a poll interval; what is written between reading
the tail and cutting the file is dropped with the middle.
"""

from __future__ import annotations

import os
from pathlib import Path

MARKER = "\n[trainwreck: {dropped} bytes of output dropped here; head and tail kept]\n"


class OutputCap:
    def __init__(self, path: Path, cap_bytes: int) -> None:
        self.path = path
        self.head = max(1, cap_bytes // 2)
        self.tail = max(1, cap_bytes - self.head)
        self.saved = b""  # the tail as it was when the file was last cut
        self.dropped = 0

    def check(self) -> None:
        """Cut the file back to its head when it grew past the cap (called while it runs)."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size <= self.head + 2 * self.tail:
            return
        with open(self.path, "r+b") as handle:
            handle.seek(size - self.tail)
            tail = handle.read(self.tail)
            self.dropped += len(self.saved) + (size - self.tail - self.head)
            self.saved = tail
            handle.truncate(self.head)

    def finish(self) -> int:
        """Once nothing writes: head + marker + tail. Returns the bytes dropped in all."""
        self.check()
        if not self.dropped and not self.saved:
            return 0
        with open(self.path, "r+b") as handle:
            handle.seek(self.head)
            rest = self.saved + handle.read()
            kept = rest[-self.tail :]
            self.dropped += len(rest) - len(kept)
            handle.seek(self.head)
            handle.truncate()
            handle.write(MARKER.format(dropped=self.dropped).encode("ascii"))
            handle.write(kept)
        return self.dropped
