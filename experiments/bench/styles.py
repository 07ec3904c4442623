"""Clean code for static detectors: the unmutated scripts of a folder (``tests/styles``:
our own code in the styles of common public examples), as clean cases.

Their loop is ``styles/<name>`` so the scorer counts them in the clean-code column, not in
the false-positive rate of the reference loops.
"""

from __future__ import annotations

from pathlib import Path

from experiments.bench.api import ScriptInput
from experiments.bench.corpus import CLEAN, Case, Truth
from experiments.bench.score import CLEAN_CODE_PREFIX


def style_cases(folder: Path) -> list[Case]:
    """One clean case per ``*.py`` file directly in ``folder`` (sorted by name)."""
    cases = []
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue  # __init__.py and helpers are not training scripts
        loop = f"{CLEAN_CODE_PREFIX}{path.stem}"
        # The real path: a linter reads modules beside the script (a model in model.py).
        script = ScriptInput(path.read_text(encoding="utf-8"), str(path), loop)
        cases.append(Case(f"{loop}/{CLEAN}", loop, Truth(), script))
    return cases
