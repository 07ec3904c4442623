"""The global random generators' states at a test's start, kept by the baseline and put
back at the same test's start in a mutant's run.

A test that draws random numbers without seeding them starts, in the baseline, from
whatever the tests before it left; a mutant's run runs only the tests that ran its lines,
so the same test would start elsewhere and draw other numbers: its values could not be
compared (``randomness``). Where the baseline saw a test use a generator it did not seed,
it keeps that generator's state at the test's start (``encode``, about 5 KB for torch's,
2.5 KB for NumPy's and for ``random``'s), and the mutant's run restores it right before
the test (``restore``): the test then draws what it drew in the baseline, as if the tests
before it had run. What the test seeds itself it still seeds; a generator seeded from the
system's entropy stays incomparable. The states are set through the generators
themselves, not through the functions ``randomness`` wraps, so a restore is no seed.
"""

from __future__ import annotations

import base64
import random
import sys
from typing import Any


def capture() -> dict[str, Any]:
    """Each global generator's full state now (objects, cheap to take)."""
    import torch

    found: dict[str, Any] = {
        "torch": torch.random.default_generator.get_state(),
        "random": random.getstate(),
    }
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        found["numpy"] = numpy.random.get_state()
    return found


def encode(full: dict[str, Any], generators: set[str]) -> dict[str, Any]:
    """The states of ``generators`` as JSON holds them."""
    found: dict[str, Any] = {}
    if "torch" in generators and "torch" in full:
        found["torch"] = base64.b64encode(full["torch"].numpy().tobytes()).decode()
    if "random" in generators and "random" in full:
        version, internal, gauss = full["random"]
        found["random"] = [version, list(internal), gauss]
    state = full.get("numpy")
    if "numpy" in generators and isinstance(state, tuple) and len(state) == 5:
        name, keys, position, has_gauss, gauss = state
        keys = base64.b64encode(keys.tobytes()).decode()
        found["numpy"] = [name, keys, position, has_gauss, gauss]
    return found


def restore(encoded: dict[str, Any]) -> None:
    """Put the encoded states back (the generators' own setters: not recorded as seeds)."""
    import torch

    if "torch" in encoded:
        raw = bytearray(base64.b64decode(encoded["torch"]))
        torch.random.default_generator.set_state(torch.frombuffer(raw, dtype=torch.uint8))
    if "random" in encoded:
        version, internal, gauss = encoded["random"]
        random._inst.setstate((version, tuple(internal), gauss))  # type: ignore[attr-defined]
    numpy = sys.modules.get("numpy")
    if "numpy" in encoded and numpy is not None:
        name, keys, position, has_gauss, gauss = encoded["numpy"]
        array = numpy.frombuffer(base64.b64decode(keys), dtype=numpy.uint32).copy()
        numpy.random.mtrand._rand.set_state((name, array, position, has_gauss, gauss))


def for_tests(base: dict[str, Any], tests: list[str] | None) -> dict[str, Any]:
    """The baseline's random states at the start of each of ``tests`` (None: all) that
    drew unseeded random numbers, for the run to put back (``replay``)."""
    recorded = (base.get("witness") or {}).get("tests") or {}
    wanted = recorded if tests is None else tests
    found = {}
    for test in wanted:
        state = ((recorded.get(test) or {}).get("random") or {}).get("replay")
        if state:
            found[test] = state
    return found
