"""``trainwreck test``'s pytest sessions, in process: what the plugin records of each failing
test, the loop checks testing the served mutant, the warm session's folder, and one
pytest-randomly seed for every session. The parts outside pytest: ``test_mutation_testing.py``."""

from __future__ import annotations

import linecache
import os
import sys
import textwrap
from pathlib import Path

import pytest

from experiments.mutation_testing import outcome

REPO = Path(__file__).resolve().parents[1]


def test_each_failing_test_records_what_it_failed_with_and_in_which_phase(
    tmp_path: Path,
) -> None:
    """A check's verdict (its own ``AssertionError`` subclass), a crash in a fixture and an
    import error are all failures; ``failed_with`` tells them apart, in ``killed_by``'s order."""
    from experiments.mutation_testing.plugin import Observer

    (tmp_path / "test_kinds.py").write_text(
        textwrap.dedent(
            """
            import pytest

            class CheckFailed(AssertionError):
                pass

            @pytest.fixture
            def broken():
                raise RuntimeError("the loop crashed while the fixture built it")

            def test_check():
                raise CheckFailed("check_x: expected 1; saw 2")

            def test_fixture(broken):
                pass

            def test_passes():
                pass

            def test_plain_assert():
                assert 1 == 2
            """
        )
    )
    (tmp_path / "test_unimportable.py").write_text("import no_such_module_here\n")
    observer = Observer()
    args = ["-q", "-p", "no:cacheprovider", "--continue-on-collection-errors"]
    args += ["--rootdir", str(tmp_path), str(tmp_path)]
    assert pytest.main(args, plugins=[observer]) == 1
    result = observer.result()
    kinds = dict(zip(result["failed"], outcome.failure_kinds(result["failed"], result)))
    assert kinds == {
        "test_kinds.py::test_check": "call:CheckFailed",
        "test_kinds.py::test_fixture": "setup:RuntimeError",
        "test_kinds.py::test_plain_assert": "call:AssertionError",
        "<collection>:test_unimportable.py": "collect:ModuleNotFoundError",
    }
    # The stillborn rule still sees the innermost cause of the collection error.
    unimportable = [e for e in result["errors"] if e["id"] == "test_unimportable.py"]
    assert "ModuleNotFoundError" in unimportable[0]["types"]
    # A process that died or a command other than pytest leaves no record: empty, in order.
    assert outcome.failure_kinds(["<exit status 1>"], {"errors": []}) == [""]
    assert outcome.failure_kinds(["t::a"], None) == [""]


def test_the_loop_checks_load_the_loop_an_import_hook_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """tests/loop_checks must test the mutant ``trainwreck test`` serves, not the file on
    disk: loaded by path, every mutant of a reference loop looked unreached."""
    from experiments.harness import modules

    monkeypatch.syspath_prepend(str(REPO / "tests" / "loop_checks"))
    import loop_suite

    target = str(REPO / "reference_loops" / "mlp_digits.py")
    source = Path(target).read_text(encoding="utf-8") + "\nSERVED = True\n"
    finder = modules.install(target, source, compile(source, target, "exec"))
    try:
        assert loop_suite.load_loop("mlp_digits").SERVED
    finally:
        sys.meta_path.remove(finder)
        linecache.cache.pop(target, None)
    assert not hasattr(loop_suite.load_loop("mlp_digits"), "SERVED")


def test_the_warm_session_runs_outside_the_users_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's warm-up pytest session starts where the user ran ``trainwreck test``;
    a plugin writing where it starts (pytest-benchmark's ``./.benchmarks``) wrote there."""
    from experiments.mutation_testing import forkserver

    seen: list[str] = []
    monkeypatch.setattr(pytest, "main", lambda args: seen.append(os.getcwd()))
    monkeypatch.chdir(tmp_path)
    forkserver._empty_session()
    assert seen and Path(seen[0]).resolve() != tmp_path.resolve()
    assert Path.cwd().resolve() == tmp_path.resolve() and list(tmp_path.iterdir()) == []


class RandomOrder:
    """pytest-randomly's seed handling: ``--randomly-seed`` defaults to "default", which its
    (unordered) ``pytest_configure`` replaces with a fresh random seed every session."""

    def __init__(self) -> None:
        self.seeds: list[object] = []

    def pytest_addoption(self, parser: pytest.Parser) -> None:
        def seed(text: str) -> int | str:
            return text if text in ("default", "last") else int(text)

        parser.addoption("--randomly-seed", dest="randomly_seed", default="default", type=seed)

    def pytest_configure(self, config: pytest.Config) -> None:
        if config.option.randomly_seed == "default":
            config.option.randomly_seed = int.from_bytes(os.urandom(4), "big")
        self.seeds.append(config.option.randomly_seed)


@pytest.mark.parametrize(("given", "expected"), [([], 1), (["--randomly-seed=77"], 77)])
def test_every_mutant_session_shuffles_with_one_seed(tmp_path, given, expected):
    from experiments.mutation_testing.plugin import RANDOMLY_SEED, Observer

    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--import-mode=importlib"]
    args += ["--rootdir", str(tmp_path)]
    order = RandomOrder()
    for _ in range(3):  # the baseline and two mutants
        assert pytest.main([*args, *given, str(tmp_path)], plugins=[order, Observer()]) == 0
    assert RANDOMLY_SEED == 1
    assert order.seeds == [expected] * 3
