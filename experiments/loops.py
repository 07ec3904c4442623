"""The reference loops, defined once: every ``reference_loops/*.py`` not starting with ``_``.

The Hydra app, the catalog profiles, the benchmark corpus and the benchmarks all read
this list, so a new loop file is picked up everywhere without editing a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

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


def mutant_main(loop: str, operator: str) -> Callable[[list[str]], None] | None:
    """The loop's ``main`` with the first site of ``operator`` applied, compiled under the
    loop's own path (tracebacks read its lines); None when the loop has no site."""
    # Imported here: listing loops must not load the engine and every operator.
    from mutations.registry import resolve
    from mutator import SourceFile

    path = REFERENCE_LOOPS / f"{loop}.py"
    source = SourceFile.from_path(str(path))
    sites = source.find_sites([resolve(operator)])
    if not sites:
        return None
    module = ModuleType(f"mutant_of_{loop}")
    module.__file__ = str(path)
    exec(compile(source.apply(sites[:1]).source, str(path), "exec"), module.__dict__)
    return module.main
