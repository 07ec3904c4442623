"""``trainwreck test``'s parts, one at a time: the stillborn rule, commands, ``--since``,
line recording and test selection, the cache, the status rules and the report.
The pytest sessions in process: ``test_mutation_testing_session.py``; the whole command on a
fixture project: ``test_mutation_testing_project.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from experiments.cli_support import UserError
from experiments.mutation_testing import cache, command, discovery, lines, outcome, report
from experiments.mutation_testing.cli import parse_operators, split_command
from experiments.mutation_testing.selection import select
from experiments.mutation_testing.since import changed_lines
from experiments.stillborn import Raised, declares_crash, from_exception, is_stillborn

REPO = Path(__file__).resolve().parents[1]

# -- the stillborn rule -------------------------------------------------------------------


def _raised(kind: str, message: str, *frames: tuple[str, int]) -> Raised:
    return Raised((kind, "Exception"), message, frames)


def test_name_error_at_a_changed_line_is_stillborn() -> None:
    raised = _raised("NameError", "name 'lr' is not defined", ("test_x.py", 3), ("train.py", 12))
    assert is_stillborn(raised, {"train.py": {12}}, declares_crash=False)


def test_an_error_at_another_line_or_declared_or_numeric_is_not() -> None:
    changed = {"train.py": {12}}
    elsewhere = _raised("NameError", "x", ("train.py", 12), ("train.py", 30))
    assert not is_stillborn(elsewhere, changed, declares_crash=False)
    declared = _raised("NameError", "x", ("train.py", 12))
    assert not is_stillborn(declared, changed, declares_crash=True)
    shape = _raised("RuntimeError", "mat1 and mat2 shapes cannot be multiplied", ("train.py", 12))
    assert not is_stillborn(shape, changed, declares_crash=False)


def test_type_errors_count_only_for_the_calls_shape() -> None:
    changed = {"train.py": {5}}
    # The deepest frame of the mutated file is the changed line; torch raised below it.
    keyword = _raised(
        "TypeError",
        "forward() got an unexpected keyword argument 'reduction'",
        ("train.py", 5),
        ("torch/nn/modules/module.py", 1750),
    )
    assert is_stillborn(keyword, changed, declares_crash=False)
    operand = _raised("TypeError", "unsupported operand type(s) for *: 'float'", ("train.py", 5))
    assert not is_stillborn(operand, changed, declares_crash=False)


def test_from_exception_follows_the_cause_and_maps_files() -> None:
    def inner() -> None:
        raise ImportError("cannot import name 'MLPX'")

    try:
        try:
            inner()
        except ImportError as error:
            raise RuntimeError("collection failed") from error
    except RuntimeError as outer:
        raised = from_exception(outer, lambda path: "here.py" if path == __file__ else path)
    assert raised.name == "ImportError" and "ImportError" in raised.types
    assert raised.frames[-1][0] == "here.py"
    assert raised.frames[-1][1] == inner.__code__.co_firstlineno + 1
    syntax = from_exception(SyntaxError("bad", ("m.py", 7, 1, "x x")))
    assert syntax.frames[-1] == ("m.py", 7)


def test_declares_crash_reads_the_operators_expected_severity() -> None:
    from mutations.registry import get_operator

    assert declares_crash([get_operator("swap_loss_arguments")])
    assert not declares_crash([get_operator("drop_zero_grad")])


# -- the command ---------------------------------------------------------------------------


def test_commands_are_recognised_as_pytest_or_run_as_they_are() -> None:
    default = command.parse([])
    assert default.argv == command.DEFAULT and default.pytest_args == ("-x", "-q")
    assert default.cwd_on_path
    script = command.parse(["pytest", "-q", "tests/"])
    assert script.pytest_args == ("-q", "tests/") and not script.cwd_on_path
    other = command.parse(["make", "test"])
    assert not other.is_pytest and other.text() == "make test"
    assert split_command(["--mutate", "a.py", "--", "pytest", "--", "x"]) == (
        ["--mutate", "a.py"],
        ["pytest", "--", "x"],
    )


def test_operators_split_on_commas_and_keep_parameters() -> None:
    names = [op.label for op in parse_operators(["scale_lr:factor=0.01,drop_zero_grad"])]
    assert names == ["scale_lr(factor=0.01)", "drop_zero_grad"]
    with pytest.raises(UserError, match="unknown operator 'drop_zero_gard'"):
        parse_operators(["drop_zero_gard"])


# -- --since -------------------------------------------------------------------------------


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


def test_since_gives_changed_lines_and_whole_new_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-qm", "first")
    (tmp_path / "a.py").write_text("x = 1\ny = 20\nz = 3\nw = 4\n")
    (tmp_path / "b.py").write_text("new = True\n")
    found = changed_lines(tmp_path, "HEAD", [tmp_path / "a.py", tmp_path / "b.py"])
    assert found[tmp_path / "a.py"] == {2, 4}
    assert found[tmp_path / "b.py"] is None  # not in the commit: every line
    with pytest.raises(UserError, match="no such commit"):
        changed_lines(tmp_path, "nope", [tmp_path / "a.py"])


# -- which test ran which line ---------------------------------------------------------------

SOURCE = textwrap.dedent(
    """\
    import functools


    @functools.lru_cache
    def cached(x):
        return x + 1


    def plain(x):
        y = x * 2
        return y
    """
)


def test_spans_map_headers_to_bodies_and_lines_to_statements() -> None:
    found = lines.spans(SOURCE, [4, 5, 10, 2])
    assert found[0] == range(6, 7)  # the decorator: the function's body ran
    assert found[1] == range(6, 7)  # the def line too
    assert found[2] == range(10, 11)
    assert found[3] == range(0)  # a blank line: nothing proves it ran


def test_recorder_attributes_lines_to_the_current_context(tmp_path: Path) -> None:
    module = tmp_path / "mod.py"
    module.write_text('"""Doc."""\n' + SOURCE)  # one line down: the docstring stays one
    recorder = lines.LineRecorder([str(module)])
    namespace: dict = {}
    code = recorder.instrument(str(module), module.read_text())
    exec(code, namespace)
    assert namespace["__doc__"] == "Doc."
    recorder.enter("test_a")
    namespace["plain"](1)
    recorder.leave()
    recorder.enter("test_b")
    namespace["cached"](1)
    recorder.leave()
    hits = recorder.as_json()
    path = str(module.resolve())
    assert hits["test_a"][path] == [11, 12]
    assert hits["test_b"][path] == [7]
    assert 10 in hits[lines.COLLECT][path]  # the def statement ran at import


def test_the_recorder_needs_no_tracer_and_survives_one(tmp_path: Path) -> None:
    """pytest-cov's tracer took ``sys.settrace`` from the old recorder: the baseline
    recorded nothing and every mutant was unreached. The probes keep counting under any
    tracer, here one installed in the middle of a test."""
    module = tmp_path / "mod.py"
    module.write_text(SOURCE)
    recorder = lines.LineRecorder([str(module)])
    namespace: dict = {}
    exec(recorder.instrument(str(module), SOURCE), namespace)
    previous = sys.gettrace()
    seen: list[int] = []

    def other_tracer(frame, event, arg):
        seen.append(frame.f_lineno)
        return other_tracer

    recorder.enter("test_a")
    sys.settrace(other_tracer)
    try:
        namespace["plain"](1)
    finally:
        sys.settrace(previous)
    recorder.leave()
    assert recorder.as_json()["test_a"][str(module.resolve())] == [10, 11]
    assert seen  # the other tracer ran too


def _job(source: str, operator: str = "drop_zero_grad") -> discovery.Job:
    from mutations.registry import get_operator

    target = discovery.Target("train.py", "/nowhere/train.py", source)
    return discovery.jobs([target], [get_operator(operator)])[0]


TRAIN = textwrap.dedent(
    """\
    def step(model, optimizer, loss):
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
)


def test_selection_takes_the_tests_that_ran_the_line_and_fixture_users() -> None:
    job = _job(TRAIN)
    items = [
        {"id": "t::a", "fixtures": []},
        {"id": "t::b", "fixtures": ["trained"]},
        {"id": "t::c", "fixtures": []},
    ]
    base = {"items": items, "lines": {"t::a": {"train.py": [2]}, "t::c": {"train.py": [9]}}}
    assert select(job, base).tests == ["t::a"]
    base["lines"]["fixture:trained"] = {"train.py": [2, 3]}
    assert select(job, base).tests == ["t::a", "t::b"]
    assert select(job, {"items": items, "lines": {"t::c": {"train.py": [3]}}}).tests == []
    imported = {"items": items, "lines": {lines.COLLECT: {"train.py": [2]}}}
    assert select(job, imported).tests is None  # run at import: every test
    spawning = {**base, "spawned": ["t::a: subprocess.Popen"]}
    assert select(job, spawning).tests is None
    assert select(job, {"items": items, "lines": None}).tests is None


# -- status, cache, report ----------------------------------------------------------------


def test_status_rules() -> None:
    """Without witness facts (a command other than pytest) the exit status decides, and
    the row says the witness was not checked; the rules with facts: test_mutation_testing_
    witness.py."""
    job = _job(TRAIN)
    assert outcome.classify(job, None, None, "").status == "timeout"
    passed = {"exit": 0, "failed": [], "errors": [], "reach": [3]}
    survived = outcome.classify(job, 0, passed, "")
    assert (survived.status, survived.witness_state) == ("survived", "unknown")
    assert survived.witness.startswith("witness not checked")
    assert outcome.classify(job, 0, {**passed, "reach": [0]}, "").status == "unreached"
    assert outcome.classify(job, 0, {**passed, "reach": [0]}, "", trust_reach=False).status == (
        "survived"
    )
    failed = {**passed, "exit": 1, "failed": ["t::a"]}
    killed = outcome.classify(job, 0, failed, "")
    assert (killed.status, killed.killed_by) == ("killed", ["t::a"])
    line = job.mutant.mutant_lines[0]
    error = {"types": ["NameError"], "message": "x", "frames": [["train.py", line]]}
    broken = outcome.classify(job, 0, {**failed, "errors": [error]}, "")
    assert broken.status == "stillborn" and f"line {line}" in broken.detail
    died = outcome.classify(job, -9, None, "Segmentation fault")
    assert died.status == "killed" and "-9" in died.detail and died.witness_state == "unknown"


def test_a_deadline_includes_the_first_tests_one_time_costs() -> None:
    """The baseline's first test paid the run's one-time costs (a fixture's imports and data
    load); a mutant running one cheap test pays them too and must not time out for it."""
    from experiments.mutation_testing.session import TIMEOUT_SLACK_S, deadline

    base = {"wall_s": 60.0, "durations": {"t::first": 50.0, "t::a": 0.5, "t::b": 1.5}}
    overhead = 60.0 - 52.0  # collection and start: the wall time no test accounts for
    assert deadline(base, ["t::a"], 2.0) == 2.0 * (overhead + 50.0 + 0.5) + TIMEOUT_SLACK_S
    assert deadline(base, None, 1.0) == overhead + 50.0 + 52.0 + TIMEOUT_SLACK_S
    assert deadline({"wall_s": 1.0}, None, 4.0) == 4.0 + TIMEOUT_SLACK_S


def test_cache_survives_a_torn_line(tmp_path: Path) -> None:
    store = cache.Cache(tmp_path)
    store.put("k1", {"status": "killed"})
    store.close()
    with open(tmp_path / cache.RESULTS, "a") as handle:
        handle.write('{"key": "k2", "row": {"sta')  # interrupted mid-write
    store = cache.Cache(tmp_path)
    assert store.get("k1") == {"status": "killed"} and store.get("k2") is None
    store.put("k3", {"status": "survived"})
    store.close()
    again = cache.Cache(tmp_path)
    assert again.get("k3") == {"status": "survived"} and again.get("k1") is not None


def test_project_digest_changes_with_any_file_but_not_the_results(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    before = cache.environment(tmp_path, [tmp_path / "results"])["project"]
    (tmp_path / "results" / "r.csv").write_text("new")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.pyc").write_bytes(b"x")
    assert cache.environment(tmp_path, [tmp_path / "results"])["project"] == before
    (tmp_path / "data.txt").write_text("changed data")
    assert cache.environment(tmp_path, [tmp_path / "results"])["project"] != before


def test_score_is_killed_over_killed_and_survived_and_absent_without_them() -> None:
    job = _job(TRAIN)
    rows = [
        outcome.row_for(
            job, "killed", killed_by=["t::a", "t::b"], failed_with=["call:CheckFailed", ""]
        ),
        outcome.row_for(job, "survived"),
        outcome.row_for(job, "stillborn"),
        outcome.row_for(job, "unreached"),
    ]
    assert report.score(rows) == 0.5
    assert report.summary_line(rows).startswith("mutation score: 1/2 (50.0%); killed 1")
    crashed = [*rows, outcome.row_for(job, "killed", killed_by=["t::c"], crash="TypeError")]
    assert "killed 2 (1 by a crash, no test's verdict: TypeError 1)" in report.summary_line(crashed)
    assert "(crashed: TypeError)" in report.markdown(crashed, [job], "pytest", [])
    assert report.summary_line(rows[2:]).startswith("mutation score: n/a")
    assert "t::a;t::b,call:CheckFailed;,," in report.csv_text(rows)
    # killed, survived, unconfirmed, timeout, stillborn, unreached, score
    assert report.table(rows, "operator")[1] == [
        "drop_zero_grad",
        "1",
        "1",
        "0",
        "0",
        "1",
        "1",
        "1/2",
    ]


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mutate", "missing.py"], "--mutate missing.py: no such file"),
        (["--mutate", "/etc/hostname"], "outside the project folder"),
        (["--mutate", "a.py", "--workers", "0"], "--workers must be at least 1"),
        (["--mutate", "a.py", "--fail-under", "120"], "percentage from 0 to 100"),
        (["--mutate", "a.py", "--operators", "nope"], "unknown operator 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], message: str) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "test", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.py"]  # nothing written


def _env() -> dict[str, str]:

    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def test_the_baseline_says_what_its_probes_cannot_see(tmp_path: Path, monkeypatch) -> None:
    """A mutated file run as a file (runpy) is not probed there; one never loaded through
    the hook while a copy of it was imported from elsewhere would never see a mutant."""
    import runpy

    from experiments.mutation_testing.watch import Watch

    project, other = tmp_path / "proj", tmp_path / "site"
    for folder in (project / "pkg_tw_a", other / "pkg_tw_b"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "train.py").write_text("VALUE = 1\n")
    record = [
        {"name": "pkg_tw_a/train.py", "real": str((project / "pkg_tw_a/train.py").resolve())},
        {"name": "pkg_tw_b/train.py", "real": str((project / "pkg_tw_b/train.py").resolve())},
    ]
    (project / "pkg_tw_b").mkdir()
    (project / "pkg_tw_b" / "train.py").write_text("VALUE = 2\n")
    recorder = lines.LineRecorder(target["real"] for target in record)
    before = list(sys.meta_path)
    watch = Watch(recorder, record, str(project))
    monkeypatch.syspath_prepend(str(other))
    try:
        recorder.enter("t::a")
        watch.audit("open", (str(project / "pkg_tw_a/train.py"), "r", 0))  # what runpy raises
        runpy.run_path(str(project / "pkg_tw_a/train.py"))
        import pkg_tw_b.train  # noqa: F401  (the copy in "site", not the project's)

        recorder.leave()
        found = watch.result()
    finally:
        sys.meta_path[:] = before
        for name in ("pkg_tw_b", "pkg_tw_b.train"):
            sys.modules.pop(name, None)
    assert "read as a file in t::a" in found["unprobed"]["pkg_tw_a/train.py"]
    # Only a process that may run the mutated code makes every test run: not ``uname``.
    recorder.enter("t::b")
    watch.audit("subprocess.Popen", ("uname", ["uname", "-p"], None, None))
    assert watch.result()["spawned"] == []
    watch.audit("subprocess.Popen", (sys.executable, [sys.executable, "-c", "1"], None, None))
    assert watch.result()["spawned"][0].startswith("t::b: subprocess.Popen")
    assert found["elsewhere"] == {"pkg_tw_b/train.py": str(other / "pkg_tw_b" / "train.py")}


def test_fail_under_compares_the_score_it_prints() -> None:
    """77.3% printed passes --fail-under 77.3 (an unrounded 0.77272... failed it)."""
    job = _job(TRAIN)
    rows = [outcome.row_for(job, "killed")] * 17 + [outcome.row_for(job, "survived")] * 5
    assert report.percent(rows) == 77.3
    assert report.fail_under(rows, 77.3) == (True, "--fail-under 77.3: passed, 77.3% >= 77.3%")
    assert report.fail_under(rows, 80) == (False, "--fail-under 80: failed, 77.3% < 80%")
    assert not report.fail_under([outcome.row_for(job, "unreached")], 0)[0]


def test_a_kill_by_a_crash_is_told_from_a_verdict() -> None:
    result = {
        "errors": [
            {"test": "t::a", "when": "call", "raised": "TypeError", "verdict": False},
            {"test": "t::b", "when": "call", "raised": "CheckFailed", "verdict": True},
        ]
    }
    assert outcome.crash_kind(["t::a"], result) == "TypeError"
    assert outcome.crash_kind(["t::a", "t::b"], result) == ""  # one test gave a verdict
    assert outcome.crash_kind(["<exit status 1>"], result) == ""  # nothing recorded


def test_check_failed_reads_as_the_public_name() -> None:
    from trainwreck.checks import CheckFailed

    assert f"{CheckFailed.__module__}.{CheckFailed.__qualname__}" == "trainwreck.checks.CheckFailed"


# -- the warm project's swap ----------------------------------------------------------------

MODULE = textwrap.dedent(
    """\
    import functools
    RATE = 0.1


    def logged(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return fn(*args)
        return wrapper


    class Net:
        scale = 2

        def __init__(self, p=0.5):
            self.p = p

        @logged
        def double(self, x):
            return x * self.scale


    def total(n):
        out = 0
        for i in range(n):
            out += i
        return out
    """
)


@pytest.mark.parametrize(
    ("old", "new", "swappable"),
    [
        ("        out += i\n", "        out += 2 * i\n", True),  # a function's body
        ("    out = 0\n", "", True),  # a removed line: every later line moves
        ("RATE = 0.1", "RATE = 10.0", False),  # module level
        ("p=0.5", "p=0.0", False),  # a default value, made at import
        ("    scale = 2\n", "    scale = 3\n", False),  # a class attribute
        ("    @logged\n", "", False),  # a decorator
    ],
)
def test_a_mutant_is_swapped_in_only_when_only_function_bodies_differ(old, new, swappable):
    from experiments.mutation_testing import hotswap

    mutant = MODULE.replace(old, new, 1)
    assert mutant != MODULE
    assert (hotswap.swappable(MODULE, mutant, "m.py") == "") is swappable


def test_the_swap_reaches_every_function_object_made_from_the_file(tmp_path: Path) -> None:
    """Functions held elsewhere (a test module's ``from m import total``, a decorated
    method's wrapped original) run the mutant's code after the swap."""
    from experiments.mutation_testing import hotswap

    path = str(tmp_path / "m.py")
    namespace: dict = {}
    exec(compile(MODULE, path, "exec"), namespace)
    held = namespace["total"]  # what ``from m import total`` keeps
    method = namespace["Net"].double
    mutant = MODULE.replace("        out += i\n", "        out += 2 * i\n").replace(
        "return x * self.scale", "return x * self.scale + 1"
    )
    found = hotswap.functions_of([path])[os.path.realpath(path)]
    assert {f.__code__.co_name for f in found} >= {"total", "double", "wrapper", "__init__"}
    assert hotswap.swap(found, MODULE, path, compile(mutant, path, "exec")) == len(found)
    assert held(4) == 12 and method(namespace["Net"](), 3) == 7


def test_a_survivor_names_its_tests_the_check_and_a_test_that_parses() -> None:
    """What a maintainer gets for a survivor: the tests that ran its line, the check of
    trainwreck.checks that would catch it, and a test skeleton calling it."""
    import ast

    from experiments.mutation_testing import survivors

    job = _job(TRAIN)  # drop_zero_grad in train.py's step()
    row = outcome.row_for(job, "survived", covered_by=["t::a", "t::b"], tests_run=2)
    text = report.markdown([row], [job], "pytest", [])
    assert "Ran by: 2 tests (`t::a`, `t::b`), none failed." in text
    assert "Catch it with trainwreck.checks.check_params_change" in text
    test = survivors.skeleton(job)
    ast.parse(test)
    assert "from train import step" in test and "check_params_change(model, batch, step)" in test
    from types import SimpleNamespace

    retained = SimpleNamespace(mutant=SimpleNamespace(operators=["retain_graph_left_in"]))
    assert "No check of trainwreck.checks catches it: memory per step" in report.catch_it(retained)
    assert survivors.skeleton(retained) == ""
