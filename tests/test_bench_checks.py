"""``benchmarks/bench_checks.py``'s tables from a small synthetic results table: a check's
kill counts only when its own test failed with ``CheckFailed``, anything else that killed
a mutant is counted apart, and the rates leave out what the suite did not judge."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_modules import load

from experiments.mutation_testing.outcome import Row
from experiments.mutation_testing.report import csv_text

REPO = Path(__file__).resolve().parents[1]
bench = load("bench_checks")

T = "tests/loop_checks/test_x.py::test_"


def _row(name: str, operator: str, category: str, status: str, *failures: str) -> Row:
    """``failures``: ``"check=phase:Class"`` per failing test (``"<id>="`` for no record)."""
    tests = [f.partition("=")[0] for f in failures]
    return Row(
        identity=f"reference_loops/x.py::main::{name}",
        file="reference_loops/x.py",
        line=1,
        operator=operator,
        category=category,
        status=status,
        killed_by=[t if t.startswith("<") else T + t for t in tests],
        failed_with=[f.partition("=")[2] for f in failures],
    )


LOOP_A = [
    _row(
        "a#0",
        "drop_zero_grad",
        "gradient",
        "killed",
        "overfit_batch=call:CheckFailed",
        "params_change=call:CheckFailed",
    ),
    _row(
        "a#1",
        "detach",
        "gradient",
        "killed",
        "overfit_batch=call:CheckFailed",
        "gradients=call:RuntimeError",
    ),
    _row("a#2", "drop_optimizer_step", "optim", "killed", "initial_loss=setup:AssertionError"),
    _row("a#3", "scale_lr", "optim", "survived"),
    _row("a#4", "scale_lr", "optim", "unreached"),
    _row("a#5", "detach", "gradient", "stillborn"),
    _row("a#6", "drop_zero_grad", "gradient", "timeout"),
]
LOOP_B = [
    _row("b#0", "swap_loss", "loss", "killed", "<the test process died>="),
    _row("b#1", "drop_zero_grad", "gradient", "survived"),
]


@pytest.fixture
def mutants(tmp_path: Path) -> list:
    """Both loops, written by trainwreck test's own CSV writer and read back as the
    benchmark reads them (a drift of the CSV format fails here)."""
    found = []
    for loop, rows in (("loop_a", LOOP_A), ("loop_b", LOOP_B)):
        (tmp_path / loop).mkdir()
        (tmp_path / loop / "mutants.csv").write_text(csv_text(rows), encoding="utf-8")
        read, runs = bench.load(loop, tmp_path)
        assert runs == {"run": len(rows)}
        found += read
    return found


def _by_first(cells: list[list[str]]) -> dict[str, list[str]]:
    return {line[0]: line[1:] for line in cells[1:]}


def test_a_kill_counts_for_a_check_only_when_it_failed_with_check_failed(mutants: list) -> None:
    by_id = {m.identity.rpartition("::")[2]: m for m in mutants}
    assert by_id["a#0"].caught_by == ("overfit_batch", "params_change")
    assert by_id["a#1"].caught_by == ("overfit_batch",)
    assert by_id["a#1"].other == ((T + "gradients", "call:RuntimeError"),)
    assert by_id["a#2"].caught_by == () and by_id["a#2"].other[0][1] == "setup:AssertionError"
    assert by_id["b#0"].other == (("<the test process died>", "no record"),)


def test_loop_table_splits_kills_and_leaves_unjudged_out_of_the_rates(mutants: list) -> None:
    loops = _by_first(bench.loop_table(mutants, {"loop_a": 10.0, "loop_b": 5.0}))
    # mutants, by a check, otherwise only, survived, timeout, stillborn, unreached, scores, wall
    # mutants, by a check, otherwise only, survived, unconfirmed, timeout, stillborn, unreached
    assert loops["loop_a"] == [
        "7",
        "2",
        "1",
        "1",
        "0",
        "1",
        "1",
        "1",
        "2/4 (50%)",
        "3/4 (75%)",
        "10",
    ]
    assert loops["loop_b"] == ["2", "0", "1", "1", "0", "0", "0", "0", "0/2 (0%)", "1/2 (50%)", "5"]
    assert loops["**all**"][-3:] == ["2/6 (33%)", "4/6 (67%)", "15"]


def test_check_table_counts_caught_alone_and_failed_otherwise(mutants: list) -> None:
    checks = _by_first(bench.check_table(mutants))
    assert checks["overfit_batch"] == ["2/6 (33%)", "1", "0", "drop_zero_grad 1, detach 1"]
    assert checks["params_change"] == ["1/6 (17%)", "0", "0", "drop_zero_grad 1"]
    assert checks["gradients"][:3] == ["0/6 (0%)", "0", "1"]
    assert checks["initial_loss"][:3] == ["0/6 (0%)", "0", "1"]
    assert "<the test process died>" not in checks  # not a check


def test_matrix_and_what_no_check_catches(mutants: list) -> None:
    cells = bench.matrix(mutants)
    assert cells[0] == ["check", "gradient (n=3)", "loss (n=1)", "optim (n=2)"]
    rows = _by_first(cells)
    assert rows["overfit_batch"] == ["2", "0", "0"]
    assert rows["**any check**"] == ["2", "0", "0"]
    assert rows["killed otherwise only"] == ["0", "1", "1"]
    assert rows["**survived**"] == ["1", "0", "1"]

    missed = _by_first(bench.uncaught(mutants))
    assert missed["drop_zero_grad"] == ["gradient", "1", "2", "loop_b 1"]
    assert missed["scale_lr"] == ["optim", "1", "1", "loop_a 1"]  # unreached: not judged
    assert "detach" not in missed

    operators = _by_first(bench.operator_table(mutants))
    # category, mutants, by a check, which, otherwise only, survived, unconfirmed, timeout,
    # stillborn, unreached
    assert operators["drop_zero_grad"] == [
        "gradient", "3", "1", "overfit_batch 1, params_change 1", "0", "1", "0", "1", "0", "0",
    ]  # fmt: skip

    others = bench.other_kills(mutants)
    assert [line[0] for line in others[1:]] == ["`x.py::main::a#2`", "`x.py::main::b#0`"]
    assert others[1][2] == "setup:AssertionError (1 test)"

    short = _by_first(bench.summary(mutants))
    assert short["overfit_batch"] == ["2/6 (33%)", "drop_zero_grad 1, detach 1"]
    assert short["**no check**"][0] == "4/6 (67%)"
    assert "never caught: drop_optimizer_step, scale_lr, swap_loss" in short["**no check**"][1]
    assert "sometimes missed: drop_zero_grad" in short["**no check**"][1]


def test_render_has_every_section_and_an_old_csv_is_refused(mutants: list) -> None:
    text = bench.render(mutants, ["Command: `x`"], None)
    assert text.startswith("Command: `x`")
    assert text.count("### ") == 7 and "wall s" not in text
    old = {"identity": "i", "operator": "o", "category": "c", "status": "killed", "killed_by": "t"}
    with pytest.raises(SystemExit, match="no failed_with column"):
        bench.read_mutants([old], "loop_a")


@pytest.mark.parametrize(
    ("test_id", "check"),
    [
        ("tests/loop_checks/test_mlp_digits.py::test_overfit_batch", "overfit_batch"),
        ("tests/loop_checks/test_x.py::test_gradients[cpu]", "gradients"),
        ("<exit status 1>", "<exit status 1>"),
    ],
)
def test_check_of(test_id: str, check: str) -> None:
    assert bench.check_of(test_id) == check


def test_the_short_table_names_the_top_operators_and_counts_the_rest() -> None:
    caught = [
        bench.Mutant("l", f"m{i}", f"op{i}", "c", "killed", ("overfit_batch",), ())
        for i in range(bench.SUMMARY_OPERATORS + 2)
    ]
    line = bench.summary(caught)[1]
    assert line[1] == f"{len(caught)}/{len(caught)} (100%)"
    assert line[2].endswith("op5 1, 2 more operators")


def test_groups_count_a_mutant_once_and_unjudged_mutants_keep_their_reason() -> None:
    def mutant(name: str, status: str, caught: tuple[str, ...], detail: str = "") -> object:
        return bench.Mutant("p", f"p.py::f::{name}", name, "c", status, caught, (), detail)

    found = [
        mutant("a", "killed", ("fit_step_params_change", "fit_step_overfit_batch")),
        mutant("b", "killed", ("fit_step_train_mode",)),
        mutant("c", "killed", ("plateau_reaction",)),
        mutant("d", "survived", ()),
        mutant("e", "unconfirmed", (), "a test failed, but | its bug did not run there"),
    ]
    rows = _by_first(bench.grouped(found, {"fit_step": "fit_step_"}))
    assert rows["fit_step"][1:] == ["2/4 (50%)", "a 1, b 1"]  # a counted once, e not judged
    assert rows["fit_step"][0].split(", ") == [
        "fit_step_overfit_batch", "fit_step_params_change", "fit_step_train_mode",
    ]  # fmt: skip
    assert bench.unjudged(found)[1:] == [
        ["`p.py::f::e`", "unconfirmed", "a test failed, but / its bug did not run there"]
    ]
    text = bench.render(found, ["h"], None, {"fit_step": "fit_step_"}, with_unjudged=True)
    assert "### Groups of tests" in text and "### Ran, but not judged" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mutate", "x.py"], "go with --project"),
        (["--project", "tests/projects/fit_api"], "needs --mutate"),
        (["--project", "tests/projects/fit_api", "--mutate", "nope.py"], "no nope.py in"),
        (["--project", "no/such/dir", "--mutate", "x.py"], "is not a folder"),
        (
            ["--project", "tests/projects/fit_api", "--loops", "mlp_digits", "--mutate", "x"],
            "not both",
        ),
        (["--group", "fit_step"], "is not LABEL=PREFIX"),
    ],
)
def test_project_options_are_checked_before_anything_runs(
    argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit, match=message):
        bench.main(argv)
