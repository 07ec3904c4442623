"""Whether a test's random numbers were the same in the baseline and in a mutant's run.

A witness that compares values (the targets reaching the loss, the training losses, the
evaluation outputs) can only be compared with the baseline's when the test drew the same
random numbers in both runs. A mutant's run runs fewer tests than the baseline (only those
that ran its lines), so a test that does not seed starts from a different random state
than it did in the baseline; its values then differ by chance, not by the bug.

Per test, the run records for each global generator (torch's default one, ``random``'s,
NumPy's legacy one) a fingerprint of its state at the test's start and end, and every seed
set during the test (``torch.manual_seed``, ``random.seed``, ``np.random.seed``, a state
restored with ``set_rng_state``/``setstate``/``set_state``, as pytest-randomly does, unless
it is a torch state the test itself read earlier and gives back, as ``fork_rng`` does; a
seed drawn from the system's entropy, ``torch.seed()`` or ``np.random.default_rng()``
without a seed, is recorded as no seed at all). A generator is comparable when the test
did not use it in either run (its state unchanged), started from the same state, or set
the same seeds. A test that used a generator it did not seed has its state put back in a
mutant's run (``replay``), so it starts the same; ``comparable`` says which generator
still is not, and the witness decision then leaves the values out (``verdict``): it says
so, it does not guess.
"""

from __future__ import annotations

import contextlib
import random
import sys
import zlib
from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any

from experiments.mutation_testing import replay

MAX_SEEDS = 8  # seeds kept per test
# ``numpy_local``: generators made with ``np.random.default_rng()`` and no seed.
GENERATORS = ("torch", "random", "numpy", "numpy_local")
# The witness facts whose values follow from the random numbers a test draws.
RANDOM_FACTS = frozenset(
    {
        "targets",
        "train_inputs",
        "second_inputs",
        "eval_inputs",
        "losses",
        "eval_outputs",
        "clip_active",
        "optimizer.grad",
    }
)
ENTROPY = None  # a seed drawn from the system: never the same twice
# How a report names each generator.
WORDS = {
    "torch": "torch's",
    "random": "random's",
    "numpy": "NumPy's",
    "numpy_local": "NumPy (default_rng() without a seed)",
}
_SKIP = object()  # a call that sets no global generator (a seeded local one)


class Seeds:
    """The seed wrappers of one process and what they saw since ``start``."""

    def __init__(self) -> None:
        self.seeds: list[list[Any]] = []
        self.start_state: dict[str, int] = {}
        self.full: dict[str, Any] = {}
        self.saved: set[int] = set()  # fingerprints of states the test read (get_rng_state)
        self._undo: list[Callable[[], None]] = []

    def install(self) -> None:
        import torch

        self._wrap(torch, "manual_seed", "torch", _first)
        self._wrap(torch.random, "manual_seed", "torch", _first)
        self._wrap(torch, "seed", "torch", lambda *a, **k: ENTROPY)
        self._wrap(torch, "set_rng_state", "torch", self._restored_or_state)
        self._wrap(torch.random, "set_rng_state", "torch", self._restored_or_state)
        self._remember(torch, "get_rng_state")
        self._remember(torch.random, "get_rng_state")
        self._wrap(random, "seed", "random", lambda *a, **k: a[0] if a else k.get("a"))
        self._wrap(random, "setstate", "random", lambda state, *a: hash(state))
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            self._wrap(numpy.random, "seed", "numpy", lambda *a, **k: _plain(_first(*a, **k)))
            self._wrap(numpy.random, "set_state", "numpy", lambda state, *a: _numpy_hash(state))
            self._wrap(numpy.random, "default_rng", "numpy_local", _default_rng_seed)

    def _wrap(self, owner: Any, name: str, generator: str, seed_of: Callable[..., Any]) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        seeds = self

        @wraps(original)
        def seeding(*args: Any, **kwargs: Any) -> Any:
            if len(seeds.seeds) < MAX_SEEDS:
                try:
                    value = seed_of(*args, **kwargs)
                except Exception:  # an odd argument: the call itself decides
                    value = ENTROPY
                if value is not _SKIP:
                    seeds.seeds.append([generator, _plain(value)])
            return original(*args, **kwargs)

        setattr(owner, name, seeding)
        self._undo.append(lambda: setattr(owner, name, original))

    def _remember(self, owner: Any, name: str) -> None:
        """Wrap a state getter: a state the test read can be given back without seeding."""
        original = getattr(owner, name, None)
        if original is None:
            return
        seeds = self

        @wraps(original)
        def reading(*args: Any, **kwargs: Any) -> Any:
            state = original(*args, **kwargs)
            if len(seeds.saved) < 64:
                with contextlib.suppress(Exception):  # a state of another form: not kept
                    seeds.saved.add(_state_of(state))
            return state

        setattr(owner, name, reading)
        self._undo.append(lambda: setattr(owner, name, original))

    def _restored_or_state(self, state: Any, *args: Any) -> Any:
        """A state the test read earlier and now gives back (``torch.random.fork_rng``, a
        check's ``seeded``) continues its own stream: no seed. Any other state is one."""
        value = _state_of(state)
        return _SKIP if value in self.saved else value

    def remove(self) -> None:
        while self._undo:
            self._undo.pop()()

    def start(self) -> None:
        self.seeds = []
        self.saved.clear()
        self.start_state = states()
        self.full = replay.capture()

    def record(self) -> dict[str, Any]:
        """What the test did with randomness: states at its start and end, its seeds, and
        (``replay``) the start states of the generators it used without seeding them."""
        end = states()
        seeded = {seed[0] for seed in self.seeds}
        unseeded = {
            generator
            for generator, value in self.start_state.items()
            if end.get(generator) != value and generator not in seeded
        }
        found = {"start": self.start_state, "end": end, "seeds": list(self.seeds)}
        if unseeded:
            found["replay"] = replay.encode(self.full, unseeded)
        return found


def states() -> dict[str, int]:
    """A fingerprint of each global generator's state."""
    import torch

    found = {
        "torch": zlib.crc32(torch.random.default_generator.get_state().numpy().tobytes()),
        "random": hash(random.getstate()) & 0xFFFFFFFF,
    }
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        found["numpy"] = _numpy_hash(numpy.random.get_state())
    return found


def comparable(mine: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None) -> str:
    """ "" when the two runs of a test drew the same random numbers as far as can be told;
    else the generator that was used without the same start or seed (``"torch"``)."""
    if not mine or not theirs:
        return "unknown"
    for generator in GENERATORS:
        if not (_used(mine, generator) or _used(theirs, generator)):
            continue
        mine_seeds = [seed for seed in mine.get("seeds") or [] if seed[0] == generator]
        their_seeds = [seed for seed in theirs.get("seeds") or [] if seed[0] == generator]
        seeded = mine_seeds and mine_seeds == their_seeds
        if seeded and all(seed[1] is not ENTROPY for seed in mine_seeds):
            continue
        if mine_seeds or their_seeds:
            return generator  # seeded differently, or from the system's entropy
        if (mine.get("start") or {}).get(generator) != (theirs.get("start") or {}).get(generator):
            return generator
    return ""


def _used(record: Mapping[str, Any], generator: str) -> bool:
    start, end = record.get("start") or {}, record.get("end") or {}
    seeds = [seed for seed in record.get("seeds") or [] if seed[0] == generator]
    return bool(seeds) or start.get(generator) != end.get(generator)


def _first(*args: Any, **kwargs: Any) -> Any:
    return args[0] if args else kwargs.get("seed")


def _state_of(state: Any, *args: Any) -> int:
    return zlib.crc32(state.numpy().tobytes())


def _default_rng_seed(*args: Any, **kwargs: Any) -> Any:
    seed = args[0] if args else kwargs.get("seed")
    return ENTROPY if seed is None else _SKIP


def _numpy_hash(state: Any) -> int:
    if isinstance(state, tuple) and len(state) > 2:
        return zlib.crc32(state[1].tobytes()) ^ int(state[2])
    return zlib.crc32(repr(state).encode())


def _plain(value: Any) -> Any:
    """A seed as JSON holds it (an int, a string), or ENTROPY."""
    if value is None or isinstance(value, (int, str, float)):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return repr(value)[:60]
