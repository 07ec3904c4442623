"""``trainwreck test`` counts a mutant only where its bug ran: each test's witness facts
against the same test's in the baseline (``experiments/mutation_testing/verdict.py``).

The rules on recorded facts first (no run), then the whole command on
``tests/projects/witnessed``: a kill whose witness fired, a survivor whose witness fired,
one whose bug had no effect (unconfirmed), a crash before the witness (stillborn), a crash
after it (a kill marked ``undeclared``), a test that does not seed (unconfirmed: its values
cannot be compared), in warm runs and in a cold child.
"""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from experiments.mutation_testing import discovery, outcome, randomness, report
from experiments.mutation_testing.verdict import judge

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "projects" / "witnessed"
STEP = """\
def step(model, optimizer, loss):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _job(operator: str = "drop_zero_grad", source: str = STEP) -> discovery.Job:
    from mutations.registry import get_operator

    target = discovery.Target("train.py", "/nowhere/train.py", source)
    return discovery.jobs([target], [get_operator(operator)])[0]


EMPTY = {"stale_grad": [0, None], "losses": {"n": 0, "chain": "00000000", "at": []}}


LOSS = """\
import torch
def f(logits, y):
    return torch.nn.functional.cross_entropy(logits, y)
"""


def _facts(stale: int = 0, losses: tuple = ()) -> dict:
    at = [[index, value] for index, value in enumerate(losses)]
    return {
        "stale_grad": [stale, 1 if stale else None],
        "losses": {"n": len(losses), "chain": str(hash(losses)), "at": at},
    }


def _seeded(seed: int = 0) -> dict:
    return {"start": {"torch": 1}, "end": {"torch": 2}, "seeds": [["torch", seed]]}


def _run(tests: dict, failed=(), errors=(), exit_code=None) -> dict:
    failed = list(failed)
    return {
        "exit": (1 if failed else 0) if exit_code is None else exit_code,
        "failed": failed,
        "errors": list(errors),
        "durations": dict.fromkeys(tests, 0.1),
        "reach": [3],
        "witness": {
            "empty": EMPTY,
            "tests": {
                test: {"facts": facts, "random": _seeded()}
                for test, facts in tests.items()
                if facts is not None
            },
        },
    }


BASELINE = {
    "durations": {"t::a": 0.1, "t::b": 0.1, "t::quiet": 0.1},
    "witness": {
        "empty": EMPTY,
        "tests": {
            "t::a": {"facts": _facts(0, (1.0, 0.5)), "random": _seeded()},
            "t::b": {"facts": _facts(0, (1.0, 0.4)), "random": _seeded()},
        },
    },
}


def _crash(test: str, kind: str, message: str, verdict: bool = False) -> dict:
    return {
        "test": test,
        "when": "call",
        "raised": kind,
        "verdict": verdict,
        "types": [kind],
        "message": message,
        "frames": [],
    }


def test_killed_only_where_the_witness_fired_in_the_failing_test() -> None:
    job = _job()
    run = _run({"t::a": _facts(3), "t::b": _facts(0)}, failed=["t::a"])
    run["errors"] = [_crash("t::a", "AssertionError", "loss too high", verdict=True)]
    found = judge(job, run, BASELINE)
    assert (found.status, found.state, found.killed_by) == ("killed", "confirmed", ["t::a"])
    assert found.ran_bug == ["t::a"] and "3 vs 0" in found.witness
    # The failing test is not the one in which the bug ran: not a kill.
    other = _run({"t::a": _facts(3), "t::b": _facts(0)}, failed=["t::b"])
    found = judge(job, other, BASELINE)
    assert (found.status, found.state) == ("unconfirmed", "unconfirmed")
    assert found.witness.startswith("a test failed, but its bug did not run there")


def test_a_survivor_is_a_gap_only_where_its_bug_ran() -> None:
    job = _job()
    found = judge(job, _run({"t::a": _facts(0), "t::b": _facts(2)}), BASELINE)
    assert (found.status, found.ran_bug) == ("survived", ["t::b"])
    found = judge(job, _run({"t::a": _facts(0), "t::b": _facts(0)}), BASELINE)
    assert found.status == "unconfirmed"
    assert found.witness.startswith("unconfirmed (no effect on this model)")
    assert "the baseline's run of this test" in found.witness


def test_an_undeclared_crash_before_the_witness_is_stillborn_after_it_a_marked_kill() -> None:
    job = _job()
    before = _run({"t::a": _facts(0)}, failed=["t::a"])
    before["errors"] = [_crash("t::a", "TypeError", "'NoneType' object is not iterable")]
    found = judge(job, before, BASELINE)
    assert (found.status, found.state) == ("stillborn", "stillborn")
    assert "crashed (TypeError" in found.witness
    after = _run({"t::a": _facts(4)}, failed=["t::a"])
    after["errors"] = [_crash("t::a", "ValueError", "cannot convert float NaN to integer")]
    found = judge(job, after, BASELINE)
    assert (found.status, found.killed_by) == ("killed", ["t::a"])
    assert found.witness.startswith("undeclared: ValueError: cannot convert float NaN")


def test_a_declared_crash_is_the_bugs_own() -> None:
    job = _job("drop_backward")
    run = _run({"t::a": _facts(0)}, failed=["t::a"])
    run["errors"] = [_crash("t::a", "TypeError", "unsupported operand: 'NoneType' and 'float'")]
    found = judge(job, run, BASELINE)
    assert (found.status, found.state) == ("killed", "confirmed")
    assert found.witness.startswith("crashed as its bug does")


def test_a_test_with_nothing_observed_compares_as_empty_and_an_unknown_test_has_no_reference():
    job = _job()
    # t::quiet ran in the baseline and observed nothing: its facts are the empty ones.
    found = judge(job, _run({"t::quiet": _facts(2)}), BASELINE)
    assert found.status == "survived"
    found = judge(job, _run({"t::new": _facts(2)}), BASELINE)
    assert found.status == "unconfirmed" and "no reference run" in found.witness


def test_values_from_unseeded_randomness_are_left_out_and_said_so() -> None:
    job = _job("softmax_before_cross_entropy", LOSS)
    run = _run({"t::a": _facts(0, (1.0, 0.9))})
    assert judge(job, run, BASELINE).status == "survived"  # seeded alike: compared
    run["witness"]["tests"]["t::a"]["random"] = {"start": {"torch": 7}, "end": {"torch": 8}}
    found = judge(job, run, BASELINE)
    assert found.status == "unconfirmed"
    assert found.witness.startswith("unconfirmed (randomness not seeded): the test draws torch")
    # A witness that is no value (a count) is compared whatever the randomness.
    run = _run({"t::a": _facts(2)})
    run["witness"]["tests"]["t::a"]["random"] = {"start": {"torch": 7}, "end": {"torch": 8}}
    assert judge(_job(), run, BASELINE).status == "survived"


@pytest.mark.parametrize(
    ("mine", "theirs", "expected"),
    [
        (
            {"start": {"torch": 1}, "end": {"torch": 2}},
            {"start": {"torch": 1}, "end": {"torch": 2}},
            "",
        ),
        (
            {"start": {"torch": 1}, "end": {"torch": 2}},
            {"start": {"torch": 5}, "end": {"torch": 6}},
            "torch",
        ),
        (
            {"start": {"torch": 1}, "end": {"torch": 1}},
            {"start": {"torch": 5}, "end": {"torch": 5}},
            "",
        ),
        (_seeded(3), {**_seeded(3), "start": {"torch": 9}}, ""),
        (_seeded(3), _seeded(4), "torch"),
        (
            {**_seeded(), "seeds": [["torch", None]]},
            {**_seeded(), "seeds": [["torch", None]]},
            "torch",
        ),
        (
            {"start": {"random": 1}, "end": {"random": 2}},
            {"start": {"random": 3}, "end": {"random": 4}},
            "random",
        ),
    ],
)
def test_which_tests_drew_the_same_random_numbers(mine, theirs, expected) -> None:
    """Unused generators do not matter; the same start or the same seeds compare; a seed
    from the system's entropy never does."""
    assert randomness.comparable(mine, theirs) == expected


def test_a_replayed_state_draws_what_the_baseline_drew() -> None:
    """The states a test started from, encoded as the baseline keeps them and put back,
    give the same draws; the seed wrappers do not see the restore as a seed."""
    import numpy as np

    from experiments.mutation_testing import replay

    seeds = randomness.Seeds()
    seeds.install()
    try:
        seeds.start()
        drawn = (torch.rand(3), random.random(), np.random.rand(2))
        record = seeds.record()
        assert set(record["replay"]) == {"torch", "random", "numpy"}
        torch.rand(7), random.random(), np.random.rand(5)  # elsewhere now
        state = json.loads(json.dumps(record["replay"]))  # as the baseline stores it
        replay.restore(state)
        seeds.start()
        again = (torch.rand(3), random.random(), np.random.rand(2))
        assert seeds.seeds == [] and seeds.record()["start"] == record["start"]
    finally:
        seeds.remove()
    assert torch.equal(drawn[0], again[0]) and drawn[1] == again[1]
    assert (drawn[2] == again[2]).all()


def test_the_seed_wrappers_record_what_a_test_seeds_and_come_off() -> None:
    original = torch.manual_seed
    seeds = randomness.Seeds()
    seeds.install()
    try:
        seeds.start()
        torch.manual_seed(3)
        random.seed(5)
        torch.rand(2)
        record = seeds.record()
    finally:
        seeds.remove()
    assert record["seeds"] == [["torch", 3], ["random", 5]]
    assert record["start"]["torch"] != record["end"]["torch"]
    assert torch.manual_seed is original


def test_a_state_the_test_read_and_gives_back_is_no_seed() -> None:
    """A check's seeded() forks the RNG and gives the test's state back: the test's stream
    continues, so the restore is no seed (else a mutant that drew more random numbers before
    the check would make every later value incomparable); a state from elsewhere is one."""
    seeds = randomness.Seeds()
    seeds.install()
    try:
        seeds.start()
        torch.rand(int(torch.randint(1, 5, ()).item()))  # any draws: the state now is the test's
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            torch.rand(3)
        foreign = torch.Generator().manual_seed(11).get_state()
        torch.set_rng_state(foreign)
        record = seeds.record()
    finally:
        seeds.remove()
    assert record["seeds"][0] == ["torch", 7]
    assert len(record["seeds"]) == 2 and record["seeds"][1][0] == "torch"  # the foreign state


def test_reset_empties_the_facts_and_keeps_the_wrappers() -> None:
    from experiments.harness import observe

    observed = observe.install()
    try:
        empty = observed.facts()
        model = nn.Linear(3, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):  # no zero_grad: the second backward adds into a stale .grad
            nn.functional.mse_loss(model(torch.ones(4, 3)), torch.zeros(4, 2)).backward()
            optimizer.step()
        assert observed.facts()["stale_grad"][0] == 1
        observed.reset()
        assert observed.facts() == empty
        optimizer.zero_grad()
        nn.functional.mse_loss(model(torch.ones(4, 3)), torch.zeros(4, 2)).backward()
        optimizer.step()
        assert observed.facts()["steps"] == 1 and observed.facts()["optimizers"] == 1
    finally:
        observed.remove()


def test_the_report_keeps_unconfirmed_mutants_out_of_the_score() -> None:
    job = _job()
    rows = [
        outcome.row_for(job, "killed", witness="x", witness_state="confirmed"),
        outcome.row_for(job, "survived", witness="y", witness_state="confirmed"),
        outcome.row_for(job, "unconfirmed", witness="unconfirmed (no effect on this model): z"),
        outcome.row_for(
            job,
            "unconfirmed",
            witness="a test failed, but its bug did not run there: unconfirmed (not observed): q",
            detail="failed: t::c",
        ),
        outcome.row_for(job, "killed", crash="OverflowError", witness="undeclared: OverflowError"),
    ]
    line = report.summary_line(rows)
    assert line.startswith(
        "mutation score: 2/3 (66.7%); killed 2 (1 by a crash, no test's "
        "verdict: undeclared OverflowError 1), survived 1, unconfirmed 2"
    )
    assert "of the 2 no test caught, 1 ran their bug under the tests and 1 did not" in line
    assert report.fail_under(rows, 66.7)[0] and not report.fail_under(rows, 70)[0]
    text = report.markdown(rows, [job], "pytest", [])
    assert "## Unconfirmed" in text and "no effect on this model 1, not observed 1" in text
    header = report.csv_text(rows).splitlines()[0].split(",")
    assert header[5:8] == ["status", "witness_state", "witness"] and "ran_bug" in header


# -- the whole command on tests/projects/witnessed ------------------------------------------

OPERATORS = (
    "drop_zero_grad,drop_train_mode,scale_lr,change_batch_size,drop_no_grad,"
    "softmax_before_cross_entropy"
)
EXPECTED = {
    # (status, witness state, warm)
    "train_step::drop_zero_grad#0": ("killed", "confirmed", "True"),
    "fit::scale_lr#0": ("survived", "confirmed", "True"),
    "fit::drop_train_mode#0": ("unconfirmed", "unconfirmed", "True"),
    "predict::drop_no_grad#0": ("survived", "confirmed", "False"),  # a decorator: cold
    "fit_regression::scale_lr#0": ("killed", "confirmed", "True"),
    "fit_tagger::change_batch_size#0": ("stillborn", "stillborn", "True"),
    "fit_classifier::drop_zero_grad#0": ("survived", "confirmed", "True"),
    # its test does not seed torch: it gets the baseline's random state back (replay)
    "fit_classifier::softmax_before_cross_entropy#0": ("survived", "confirmed", "True"),
    # its test's noise comes from the system's entropy: the losses cannot be compared
    "fit_noisy::softmax_before_cross_entropy#0": ("unconfirmed", "unconfirmed", "True"),
}


def _command(project: Path, *argv: str, operators: str = OPERATORS) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.cli",
            "test",
            "--mutate",
            "wit/train.py",
            "--operators",
            operators,
            "--workers",
            "2",
            *argv,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _rows(project: Path) -> dict[str, dict[str, str]]:
    with open(project / "results" / "mutation-testing" / "mutants.csv", newline="") as handle:
        return {row["identity"].split("::", 1)[1]: row for row in csv.DictReader(handle)}


def test_the_witness_decides_in_warm_runs_and_in_a_cold_child(tmp_path: Path) -> None:
    project = tmp_path / "witnessed"
    shutil.copytree(FIXTURE, project)
    done = _command(project)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = _rows(project)
    got = {
        key: (rows[key]["status"], rows[key]["witness_state"], rows[key]["warm"])
        for key in EXPECTED
    }
    assert got == EXPECTED
    crash = rows["fit_regression::scale_lr#0"]
    assert crash["crash"] == "OverflowError" and crash["witness"].startswith("undeclared:")
    assert "Expected hidden size" in rows["fit_tagger::change_batch_size#0"]["witness"]
    assert "no effect on this model" in rows["fit::drop_train_mode#0"]["witness"]
    replayed = rows["fit_classifier::softmax_before_cross_entropy#0"]["witness"]
    assert "losses differ" in replayed
    unseeded = rows["fit_noisy::softmax_before_cross_entropy#0"]["witness"]
    assert unseeded.startswith("unconfirmed (randomness not seeded): the test draws NumPy")
    notes = (project / "results" / "mutation-testing" / "mutation-report.md").read_text()
    assert "ran once more on the unmutated project" in notes
    assert rows["predict::drop_no_grad#0"]["ran_bug"] == (
        "tests/test_train.py::test_fit_returns_finite_losses"
    )
    summary = done.stdout.strip().splitlines()[-1]
    assert "undeclared OverflowError 1" in summary and "unconfirmed 2" in summary
    assert "unconfirmed, not in the score (" in done.stdout

    # In a cold child too, an unseeded test gets the baseline's random state back.
    cold = _command(
        project,
        "--cold-project",
        "--out",
        str(tmp_path / "cold"),
        operators="softmax_before_cross_entropy",
    )
    assert cold.returncode == 0, cold.stderr[-3000:]
    with open(tmp_path / "cold" / "mutants.csv", newline="") as handle:
        colds = {row["identity"].split("::", 1)[1]: row for row in csv.DictReader(handle)}
    assert {row["warm"] for row in colds.values()} == {"False"}
    for key, row in colds.items():
        assert (row["status"], row["witness"]) == (rows[key]["status"], rows[key]["witness"])

    # A stored result without a witness state (an older trainwreck's) is run again.
    results = project / "results" / "mutation-testing" / "cache" / "results.jsonl"
    entries = [json.loads(line) for line in results.read_text().splitlines()]
    for entry in entries[:2]:
        del entry["row"]["witness_state"]
    results.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    again = _command(project)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"2 run, {len(entries) - 2} cached" in again.stderr
    assert {key: row["status"] for key, row in _rows(project).items()} == {
        key: row["status"] for key, row in rows.items()
    }


def test_a_model_traced_under_the_probes_traces_as_without_them() -> None:
    """``torch.jit.trace`` records every op a forward runs: the probes' reads must not be
    among them (ignite's tests trace a model; its baseline failed with an internal assert
    on the digest's ``view(dtype)``)."""
    import warnings

    from experiments.harness import observe

    observed = observe.install()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.trace's own
            warnings.simplefilter("error", torch.jit.TracerWarning)  # a probe's fails here
            traced = torch.jit.trace(nn.Linear(3, 1), torch.rand(4, 3))
        optimizer = torch.optim.SGD(traced.parameters(), lr=0.1)
        nn.functional.mse_loss(traced(torch.rand(5, 3)), torch.zeros(5, 1)).backward()
        optimizer.step()
        assert observed.facts()["first_batch"] == 5  # the traced model's training forward
    finally:
        observed.remove()


def test_tests_that_fail_with_the_probes_run_without_them_and_say_so(tmp_path: Path) -> None:
    """A test that inspects torch's functions sees the probes' wrappers: the baseline fails
    with them and passes without, so the session runs without them, with a note, and every
    mutant is counted by its exit status (witness not checked), never silently."""
    project = tmp_path / "inspects"
    (project / "pkg").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "train.py").write_text(STEP)
    (project / "tests" / "test_step.py").write_text(
        "import torch\n"
        "from pkg.train import step\n\n\n"
        "def test_backward_is_torchs_own():\n"
        "    assert not hasattr(torch.autograd.backward, '__wrapped__')\n"
        "    model = torch.nn.Linear(2, 1)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    step(model, optimizer, model(torch.ones(3, 2)).sum())\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.cli",
            "test",
            "--mutate",
            "pkg/train.py",
            "--operators",
            "drop_zero_grad",
            "--workers",
            "1",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report_text = (project / "results" / "mutation-testing" / "mutation-report.md").read_text()
    assert "the tests fail with the witness probes installed" in report_text
    assert "test_backward_is_torchs_own" in report_text
    with open(project / "results" / "mutation-testing" / "mutants.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["status"], row["witness_state"]) == ("survived", "unknown")
    assert done.stdout.strip().splitlines()[-1].endswith("witness not checked for 1")


def _clipped(max_norm: float) -> dict:
    from experiments.harness import observe

    observed = observe.install()
    try:
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            nn.functional.mse_loss(model(torch.ones(8, 4)), torch.full((8, 2), 9.0)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            optimizer.step()
        return observed.facts()
    finally:
        observed.remove()


def test_a_clipping_threshold_scaled_where_every_step_is_cut_shows() -> None:
    """stable-baselines3 clips every step at max_norm 0.5; scaled by 0.01 it still cuts
    every step (clip_active is the same), to a gradient 100x smaller: the threshold of the
    cuts is the witness there."""
    from experiments.witness import decide, operator_parts

    reference, scaled = _clipped(0.5), _clipped(0.005)
    assert reference["clip_active"] == scaled["clip_active"] == 3
    assert (reference["clip_cut_at"], scaled["clip_cut_at"]) == (0.5, 0.005)
    parts = operator_parts(["clip_norm_scaled"], [{}])
    run = {"status": "ok", "seed": 0, "witness": scaled}
    assert decide(parts, run, {"status": "ok", "witness": reference}).state == "confirmed"
    same = {"status": "ok", "witness": reference}
    assert decide(parts, {**run, "witness": reference}, same).state == "unconfirmed"


def test_an_optimizer_state_left_unloaded_shows_without_a_step() -> None:
    """pytorch-accelerated's round-trip test saves, reloads and compares the optimizer's
    state, with no step after: the load itself is the witness there."""
    from experiments.harness import observe
    from experiments.witness import decide, operator_parts

    def resume(load: bool) -> dict:
        observed = observe.install()
        try:
            model = nn.Linear(2, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            model(torch.ones(3, 2)).sum().backward()
            optimizer.step()
            saved = optimizer.state_dict()
            fresh = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
            fresh.load_state_dict(fresh.state_dict())  # an empty state: not counted
            if load:
                fresh.load_state_dict(saved)
            return observed.facts()
        finally:
            observed.remove()

    loaded, skipped = resume(True), resume(False)
    assert (loaded["optimizer_loads"], skipped["optimizer_loads"]) == (1, 0)
    parts = operator_parts(["resume_without_optimizer_state"], [{}])
    verdict = decide(parts, {"status": "ok", "witness": skipped}, {"witness": loaded})
    assert verdict.state == "confirmed" and "1" in verdict.text


def test_a_loss_term_rebuilt_from_item_shows_in_the_parameters_it_no_longer_reaches() -> None:
    """stable-baselines3's value loss rebuilt from ``.item()`` beside the policy loss: the
    step still has gradients (no empty step), but the value head gets none."""
    from experiments.harness import observe
    from experiments.witness import decide, operator_parts

    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body, self.policy, self.value = nn.Linear(3, 4), nn.Linear(4, 2), nn.Linear(4, 1)

        def forward(self, x):
            hidden = self.body(x)
            return self.policy(hidden), self.value(hidden)

    def train(from_item: bool) -> dict:
        observed = observe.install()
        try:
            torch.manual_seed(0)
            model = TwoHeads()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            logits, value = model(torch.ones(5, 3))
            value_loss = nn.functional.mse_loss(value, torch.zeros(5, 1))
            if from_item:
                value_loss = torch.tensor(value_loss.item(), requires_grad=True)
            optimizer.zero_grad()
            (logits.sum() + value_loss).backward()
            optimizer.step()
            return observed.facts()
        finally:
            observed.remove()

    mutant, reference = train(True), train(False)
    assert (mutant["empty_steps"][0], mutant["no_grad_params"], reference["no_grad_params"]) == (
        0,
        2,
        0,
    )
    parts = operator_parts(["loss_from_item"], [{}])
    verdict = decide(parts, {"status": "ok", "witness": mutant}, {"witness": reference})
    assert verdict.state == "confirmed"


def test_facts_that_change_between_two_unmutated_runs_are_left_out() -> None:
    """A value that differs between two runs of the unmutated test (entropy inside a
    library, timing) cannot show a mutant: said so, never counted."""
    from experiments.mutation_testing import stability
    from experiments.mutation_testing.selection import Selection

    job = _job("softmax_before_cross_entropy", LOSS)
    run = _run({"t::a": _facts(0, (1.0, 0.9))})
    shaky = {**BASELINE, stability.UNSTABLE: {"t::a": ["losses"]}}
    found = judge(job, run, shaky)
    assert found.status == "unconfirmed"
    assert found.witness.startswith("unconfirmed (values change from run to run): this test's")
    assert judge(_job(), _run({"t::a": _facts(2)}), shaky).status == "survived"  # a count
    # Only tests with values, selected by a mutant, not repeated before, are repeated.
    chosen = [Selection(["t::a", "t::quiet"], ""), Selection([], "")]
    assert stability.needed(BASELINE, chosen) == ["t::a"]
    assert stability.needed({**BASELINE, stability.REPEATED: ["t::a"]}, chosen) == []
