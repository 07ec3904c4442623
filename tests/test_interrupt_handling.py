"""experiments.interrupt in one process: a Ctrl-C or SIGTERM that a library swallows or turns
into its own error still ends the command with its exit status, one line, no traceback.

The case that failed in CI: LibCST computes positions in a ``finally`` that fails when a
KeyboardInterrupt passes through it, so a Ctrl-C during ``trainwreck bench``'s linting came
out as ``KeyError: IndentedBlock(...)``; the detector's ``except Exception`` recorded it as a
crash and the benchmark ran on (or the KeyError ended it with a traceback and exit 1). The
signals here are real (``os.kill`` of this process), delivered inside LibCST's codegen.
"""

from __future__ import annotations

import os
import signal

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider
from test_bench_score import case

from experiments import interrupt
from experiments.bench.api import StaticDetector
from experiments.bench.score import run_detector
from experiments.cli_support import guarded

SOURCE = "def train(model):\n    for step in range(3):\n        print(f'{model} {step}')\n"


@pytest.fixture
def signal_in_codegen(monkeypatch):
    """Deliver ``number`` to this process while LibCST generates the 4th name's code."""

    def arm(number: int) -> None:
        original = cst.Name._codegen_impl
        seen = [0]

        def codegen(self, state, *args, **kwargs):
            seen[0] += 1
            if seen[0] == 4:
                os.kill(os.getpid(), number)  # the handler runs at the next bytecode
            return original(self, state, *args, **kwargs)

        monkeypatch.setattr(cst.Name, "_codegen_impl", codegen)

    return arm


def _positions() -> None:
    MetadataWrapper(cst.parse_module(SOURCE)).resolve(PositionProvider)


class PositionsDetector(StaticDetector):
    """Resolves positions for every case, as trainwreck-lint does."""

    name = "positions"

    def check_source(self, script):
        _positions()
        return []


@pytest.mark.parametrize(("number", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_a_library_turned_into_its_own_error_exits_with_the_signal(
    number, status, signal_in_codegen, capsys
):
    def command(argv):
        signal_in_codegen(number)
        _positions()
        return 0

    assert guarded("trainwreck bench", command, []) == status
    assert capsys.readouterr().err == "trainwreck bench: interrupted\n"


def test_a_signal_during_a_detector_ends_the_benchmark_instead_of_scoring_a_crash(
    signal_in_codegen,
):
    reports = []

    def command(argv):
        signal_in_codegen(signal.SIGINT)
        reports.append(run_detector(PositionsDetector(), [case("a", "m1"), case("a", "m2")]))
        return 0

    assert guarded("trainwreck bench", command, []) == 130
    assert reports == []  # ended at the first case, not scored on as a "crash"


def test_a_swallowed_signal_is_raised_again_by_check():
    with interrupt.handling():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # let the handler run
                pass
        except KeyboardInterrupt:
            pass  # swallowed, as an at-fork callback or a ``__del__`` would
        with pytest.raises(interrupt.Terminated):
            interrupt.check()
    interrupt.check()  # after the command, nothing is pending


def test_an_error_without_a_signal_stays_that_error():
    def command(argv):
        raise KeyError("a real bug")

    with pytest.raises(KeyError):
        guarded("trainwreck bench", command, [])


def test_an_ignored_sigint_is_taken_over_and_given_back():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupt.handling():
            assert signal.getsignal(signal.SIGINT) is interrupt._stop
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_command_that_exits_on_its_own_after_a_signal_keeps_its_exit():
    ended: BaseException | None = None
    try:
        with interrupt.handling():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):
                    pass
            except KeyboardInterrupt as stop:
                raise SystemExit(interrupt.exit_status(stop)) from None
    except BaseException as error:  # a KeyboardInterrupt here would stop pytest itself
        ended = error
    assert isinstance(ended, SystemExit) and ended.code == 130, repr(ended)
