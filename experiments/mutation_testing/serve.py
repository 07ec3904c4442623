"""In a run's process: the mutant, compiled with reach probes, served to every import of
its file (the private copy's path, or the user's: an editable install imports from the
user's tree) by the harness's import hook (``experiments.harness.modules``)."""

from __future__ import annotations

from typing import Any

from experiments.harness import modules, reach


def install(mutant: dict[str, Any]) -> tuple[list[int], set[int]]:
    """Import hooks serving the mutant (probed) for the file at each of its paths."""
    regions = mutant["regions"]
    counters = reach.install_counters(len(regions))
    source = mutant["source"]
    try:
        code, probed = reach.compile_probed(source, mutant["paths"][0], regions)
    except (SyntaxError, ValueError, RecursionError):
        code, probed = compile(source, mutant["paths"][0], "exec"), set()
    for path in mutant["paths"]:
        modules.install(path, source, code)
    return counters, probed
