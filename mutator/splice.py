"""Where a spliced mutant still reads like its file: the lines before and after its edits.

A mutant changes a few statements of a long file, and a sweep has mutants in proportion to
the file's size. Splitting, diffing or comparing each mutant whole made planning quadratic
(10k lines: ~9,500 mutants x ~300 KB). ``Lines`` splits the original once; a mutant's
lines are then the original's shared head and tail around its re-split edited middle, and
the diff starts from those shared lines instead of finding them again.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate

# Original text [start, end) replaced by text; sorted by start, not overlapping.
TextEdit = tuple[int, int, str]


class Lines:
    """A file's lines, split once with and without their line ends, and where each starts."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.kept = source.splitlines(keepends=True)
        self.bare = source.splitlines()
        self.starts = list(accumulate(map(len, self.kept), initial=0))  # starts[-1]: the end

    def shared(self, edits: Sequence[TextEdit]) -> tuple[int, int]:
        """How many whole lines before the first edit and after the last one the mutant
        keeps byte for byte. A line counts only when its line end is clear of the edits
        (the end strictly before the first edit, the start strictly after the last), so an
        edit next to a ``\\r`` cannot join two lines into one ``\\r\\n``."""
        if not edits:
            return len(self.kept), 0
        count = len(self.kept)
        head = max(0, bisect_left(self.starts, edits[0][0]) - 1)
        tail = count - bisect_right(self.starts, max(end for _, end, _ in edits), 0, count)
        return head, min(tail, count - head)

    def of_mutant(
        self, mutant: str, edits: Sequence[TextEdit], keepends: bool
    ) -> tuple[list[str], int, int]:
        """The mutant's lines (as ``mutant.splitlines(keepends)``), and the shared head
        and tail: only the edited middle is split."""
        head, tail = self.shared(edits)
        count = len(self.kept)
        lines = self.kept if keepends else self.bare
        suffix = self.starts[count] - self.starts[count - tail]
        middle = mutant[self.starts[head] : len(mutant) - suffix]
        return lines[:head] + middle.splitlines(keepends) + lines[count - tail :], head, tail
