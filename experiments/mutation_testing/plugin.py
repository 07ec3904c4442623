"""The pytest plugin of every mutant's run: which tests ran, which failed and why.

It keeps only the tests a mutant needs (``selection``, by node id) and reports each
failure with its exception (``experiments.stillborn.Raised``, plus the class the test
failed with and the phase), the failed test ids (the "killed by" column) and each test's
time. In the baseline it also drives the line recorder's contexts (``lines``); in every
pytest run it starts and ends each test's witness facts (``facts``). ``child`` passes an
``Observer`` to ``pytest.main``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import pytest

from experiments.mutation_testing.facts import COLLECTION, TestFacts
from experiments.mutation_testing.lines import FIXTURE, LineRecorder
from experiments.stillborn import from_exception

__all__ = ["COLLECTION", "Observer"]  # COLLECTION: the id of a failure outside any test
RANDOMLY_SEED = 1  # pytest-randomly's seed in every session of a ``trainwreck test``


class Observer:
    def __init__(
        self,
        selection: list[str] | None = None,
        aliases: Mapping[str, str] | None = None,
        recorder: LineRecorder | None = None,
        facts: TestFacts | None = None,
    ) -> None:
        self.selection = None if selection is None else set(selection)
        self.aliases = {os.path.realpath(path): name for path, name in (aliases or {}).items()}
        self.recorder = recorder
        self.facts = facts
        self.items: list[dict[str, Any]] = []
        self.failed: list[str] = []
        self.errors: list[dict[str, Any]] = []
        self.durations: dict[str, float] = {}
        self.deselected = 0
        self.plugins: list[str] = []
        self.turned_off: list[str] = []  # plugins made inert in this run, and why

    @pytest.hookimpl(wrapper=True)
    def pytest_load_initial_conftests(self, early_config: pytest.Config, parser, args):
        # pytest-cov starts coverage in its own (tryfirst) implementation of this hook; a
        # wrapper runs before it. Its tracer and report cost time in every run, and its
        # ``--cov-fail-under`` would fail a mutant's run of a few selected tests.
        options = early_config.known_args_namespace
        if getattr(options, "cov_source", None) and not getattr(options, "no_cov", False):
            options.no_cov = True
            self.turned_off.append(
                "pytest-cov (--cov): off in every run, as with --no-cov (a run of a "
                "mutant's few tests would fail --cov-fail-under, and its tracer costs time)"
            )
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_cmdline_main(self, config: pytest.Config):
        # pytest-xdist would run the tests in worker processes, where neither the lines a
        # test runs nor the mutant's reach probes are seen: its tests run here instead
        # (``-n 0``), and ``--workers`` runs mutants side by side.
        workers = getattr(config.option, "numprocesses", None)
        if workers or getattr(config.option, "distload", False):
            config.option.numprocesses = 0
            config.option.distload = False
            self.turned_off.append(
                f"pytest-xdist (-n {workers}): each run's tests run in its own process, "
                "as with -n 0 (lines run in workers are not seen); --workers runs "
                "mutants side by side instead"
            )
        return (yield)

    @pytest.hookimpl(tryfirst=True)  # before pytest-randomly's own, which draws its seed
    def pytest_configure(self, config: pytest.Config) -> None:
        if getattr(config.option, "randomly_seed", None) == "default":
            # pytest-randomly would shuffle and reseed with a new seed each session, so the
            # baseline and every mutant would run their tests in different orders (under
            # ``-x``, a different "killed by" each time) and a rerun would not repeat. One
            # seed for every session; a ``--randomly-seed`` of the user's command wins.
            config.option.randomly_seed = RANDOMLY_SEED
        # The plugins pytest found through entry points: later runs name them with ``-p``
        # instead of scanning every installed distribution again (``runs``).
        self.plugins = sorted(
            {
                plugin.__name__
                for plugin, _dist in config.pluginmanager.list_plugin_distinfo()
                if isinstance(getattr(plugin, "__name__", None), str)
            }
        )

    def restart(
        self,
        selection: list[str] | None,
        aliases: Mapping[str, str],
        witness_tests: list[str] | None = None,
        replay: dict[str, Any] | None = None,
    ) -> None:
        """A warm project's run (``server``): the collection is the server's; what this
        run records starts empty."""
        self.selection = None if selection is None else set(selection)
        self.aliases = {os.path.realpath(path): name for path, name in aliases.items()}
        self.failed, self.errors, self.durations = [], [], {}
        if self.facts is not None:
            self.facts.restart(witness_tests, replay)

    def select(self, session: pytest.Session) -> None:
        """Keep the selected tests of the server's collection, in its order."""
        self.pytest_collection_modifyitems(session.config, session.items)

    def _file(self, path: str) -> str:
        return self.aliases.get(os.path.realpath(path), path)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list) -> None:
        if self.selection is not None:
            kept = [item for item in items if item.nodeid in self.selection]
            dropped = [item for item in items if item.nodeid not in self.selection]
            if dropped:
                config.hook.pytest_deselected(items=dropped)
                self.deselected = len(dropped)
            items[:] = kept
        self.items = [
            {"id": item.nodeid, "fixtures": sorted(getattr(item, "fixturenames", ()))}
            for item in items
        ]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any):
        if self.recorder is None and self.facts is None:
            return (yield)
        if self.recorder is not None:
            self.recorder.enter(item.nodeid)
        if self.facts is not None:
            self.facts.start(item.nodeid)
        try:
            return (yield)
        finally:
            if self.facts is not None:
                self.facts.end(item.nodeid)
            if self.recorder is not None:
                self.recorder.leave()

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any):
        wide = self.recorder is not None and fixturedef.scope != "function"
        if wide:
            self.recorder.enter(FIXTURE + fixturedef.argname)
        try:
            return (yield)
        finally:
            if wide:
                self.recorder.leave()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.failed and report.nodeid not in self.failed:
            self.failed.append(report.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.failed.append(f"{COLLECTION}:{report.nodeid}")

    def pytest_exception_interact(self, node: Any, call: Any, report: Any) -> None:
        if call.excinfo is None:
            return
        raised = from_exception(call.excinfo.value, self._file)
        when = getattr(report, "when", None) or "collect"
        test = f"{COLLECTION}:{node.nodeid}" if when == "collect" else node.nodeid
        # ``raised`` keeps the innermost cause for the stillborn rule; what the test itself
        # failed with (a check's ``CheckFailed``, a crash, the test's own plumbing) is the
        # outer exception, unless it is pytest's wrapper (``CollectError`` around an import
        # failure). Keyed by the id ``failed`` gives the test.
        error = call.excinfo.value
        wrapper = type(error).__module__.startswith("_pytest.")
        name = raised.name if wrapper else type(error).__name__
        # An assertion (a check's ``CheckFailed``, ``pytest.fail``, ``assert``) is a test's
        # verdict; anything else is a crash under the test, which may not check the bug.
        verdict = isinstance(error, AssertionError | pytest.fail.Exception)
        outer = {"test": test, "when": when, "raised": name, "verdict": verdict}
        self.errors.append({"id": node.nodeid, **outer, **asdict(raised)})

    def result(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "failed": self.failed,
            "errors": self.errors,
            "durations": self.durations,
            "deselected": self.deselected,
            "plugins": self.plugins,
            "turned_off": self.turned_off,
            "witness": self.facts.result() if self.facts is not None else None,
        }
