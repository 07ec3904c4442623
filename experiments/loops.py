"""The reference loops, defined once: every ``reference_loops/*.py`` not starting with ``_``.

The Hydra app, the catalog profiles, the benchmark corpus and the benchmarks all read
this list, so a new loop file is picked up everywhere without editing a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_LOOPS = ROOT / "reference_loops"


def loop_paths(names: Sequence[str] | None = None, folder: Path = REFERENCE_LOOPS) -> list[Path]:
    """The reference loop files in name order, optionally only those named (by stem);
    KeyError names an unknown loop and the known ones."""
    paths = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if names:
        known = {p.stem: p for p in paths}
        missing = [name for name in names if name not in known]
        if missing:
            raise KeyError(f"unknown loop {missing[0]!r} (known: {', '.join(known) or 'none'})")
        paths = [known[name] for name in names]
    return paths


def loop_names() -> tuple[str, ...]:
    """``("binary_cancer", "char_lm", ...)``: the stems of ``loop_paths()``."""
    return tuple(path.stem for path in loop_paths())
