"""The witness facts of every test of a run, in the run's own process.

The harness's probes (``experiments.harness.observe``) are installed once per process,
before the project is imported (in a cold child before ``pytest.main``; in the warm
project's server before it imports and collects, so that its runs inherit them), with the
seed wrappers of ``randomness``. Each test then starts from empty facts (``reset``: the
installed wrappers stay those the project's modules bound) and ends with its own record:
the facts and what it did with randomness; a test that drew unseeded random numbers in
the baseline gets the baseline's random state back first (``replay``). What ran before
the first test (a test
module's top level, in a cold child) is kept as the pseudo-test ``COLLECTION``.

A test in which nothing was observed (no forward, loss, backward or step: most tests of a
project's utilities) keeps no record: its facts are the run's ``empty`` ones, so a
baseline of hundreds of tests stays small, and every test that ran has its facts. A run
keeps the records of ``keep`` only (None: every test's).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from experiments.mutation_testing.randomness import Seeds
from experiments.mutation_testing.replay import restore

COLLECTION = "<collection>"


class TestFacts:
    __test__ = False  # not a test class, whatever pytest collects

    def __init__(
        self, keep: Iterable[str] | None = None, replay: dict[str, Any] | None = None
    ) -> None:
        from experiments.harness import observe

        self.observed = observe.install()
        self.empty = self.observed.facts()  # what a test in which nothing happened shows
        self.seeds = Seeds()
        self.seeds.install()
        self.seeds.start()
        self.keep = None if keep is None else set(keep)
        self.replay = replay or {}  # test -> the baseline's random states at its start
        self.tests: dict[str, dict[str, Any]] = {}
        self.started = False

    def restart(self, keep: Iterable[str] | None, replay: dict[str, Any] | None = None) -> None:
        """A warm project's run: what the server did while collecting is not this run's."""
        self.keep = None if keep is None else set(keep)
        self.replay = replay or {}
        self.tests = {}
        self.started = True

    def start(self, test: str) -> None:
        if not self.started:
            self.started = True
            self._keep(COLLECTION)
        self.observed.reset()
        if test in self.replay:  # as it started in the baseline (``replay``)
            restore(self.replay[test])
        self.seeds.start()

    def end(self, test: str) -> None:
        self._keep(test)

    def _keep(self, test: str) -> None:
        if self.keep is None or test in self.keep:
            facts = self.observed.facts()
            if facts != self.empty:
                self.tests[test] = {"facts": facts, "random": self.seeds.record()}

    def result(self) -> dict[str, Any]:
        """``{"empty": facts, "tests": {test id: {"facts", "random"}}}``."""
        if not self.started:  # the session ended before any test (a collection error)
            self._keep(COLLECTION)
        return {"empty": self.empty, "tests": self.tests}

    def remove(self) -> None:
        self.seeds.remove()
        self.observed.remove()
