"""Real faults in the detector benchmark (issue 32): ``bench --real-faults`` and ``bench
export --real-faults`` on faulty/fixed git repositories written here, the ground-truth rules
of their runs, the gym shim; one slow test on the replay set's mirrors when present."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pandas as pd
import pytest
from real_fault_repos import FIXED, VERSIONS, fault_entry, line_of, make_repo

from experiments.bench.api import Finding, ScriptInput
from experiments.bench.cli import bench_main
from experiments.bench.corpus import Case, Truth
from experiments.bench.real import replay as replay_module
from experiments.bench.real.bench import prepare
from experiments.bench.real.cases import collect, run_all, run_cases, source_cases
from experiments.bench.real.report import new_finding
from experiments.bench.real.runs import LIVE, faulty_entry
from experiments.bench.score import Outcome

REPO = "someone/train"
LIVE_LINE = line_of(VERSIONS["live.py"][0], "    loss = criterion(model(x), y)")
INERT_LINE = line_of(VERSIONS["inert.py"][0], "    loss = criterion(model(x), y) * 1.0")
RUN = '{ argv = [], cwd = "." }'


@pytest.fixture(scope="module")
def replay(tmp_path_factory) -> tuple[Path, Path]:
    """(mirrors, replay set): three faults of one fix, plus one that declares no run."""
    tmp_path = tmp_path_factory.mktemp("replay")
    mirrors = tmp_path / "mirrors"
    commits = make_repo(mirrors, REPO, VERSIONS)
    entries = [
        fault_entry("live", REPO, commits, "live.py", [LIVE_LINE], run=RUN),
        fault_entry("inert", REPO, commits, "inert.py", [INERT_LINE], "loss", "scale_loss", RUN),
        fault_entry("broken", REPO, commits, "broken.py", [LIVE_LINE], run=RUN),
        fault_entry("static-only", REPO, commits, "live.py", [LIVE_LINE]),
    ]
    path = tmp_path / "set.toml"
    path.write_text("".join(entries))
    return mirrors, path


@pytest.fixture(scope="module")
def results(replay, tmp_path_factory) -> Path:
    """A results folder whose ``real_faults`` holds the faults' runs on 2 seeds (made once
    for the module: the bench and the export find them in the harness's cache)."""
    mirrors, path = replay
    folder = tmp_path_factory.mktemp("results")
    run_all(collect(mirrors, path), mirrors, 2, folder / "real_faults")
    return folder


def _outcome(truth: Truth, *rules: str) -> Outcome:
    case = Case("c", "real/x", truth, ScriptInput("", "x.py"))
    return Outcome(case, [Finding("gradient", rule=rule) for rule in rules])


def test_a_finding_counts_only_when_the_fixed_version_does_not_have_it():
    fault = Truth("real::x", categories=("gradient",), mutant_lines=(3,))
    fixed = _outcome(Truth(), "TW101")
    assert not new_finding(_outcome(fault, "TW101"), fixed)  # the fix did not remove it
    assert new_finding(_outcome(fault, "TW101", "TW101"), fixed)  # one more of the same rule
    assert new_finding(_outcome(fault, "TW102"), fixed)
    assert new_finding(_outcome(fault, "TW101"), None)


def test_the_faulty_versions_reach_probes_cover_the_fault_lines(replay):
    mirrors, path = replay
    item = next(i for i in collect(mirrors, path) if i.fault.id == "live")
    entry = faulty_entry(item.fault, item.pair)
    assert entry["identity"] == "real::live"
    assert entry["mutant_lines"] == [LIVE_LINE]
    # zero_grad() is missing just before the pinned line: a deletion region there.
    assert entry["reach_regions"] == [{"after": LIVE_LINE - 1, "col": 4}]
    assert item.coupled == ("drop_zero_grad",) and item.fixed_lines


def test_static_cases_and_provenance_of_each_fault(replay):
    mirrors, path = replay
    faults = collect(mirrors, path)
    cases = source_cases(faults)
    live = {case.case_id: case for case in cases if case.loop == "real/live"}
    faulty = live["real/live/faulty"]
    assert faulty.truth.mutant_lines == (LIVE_LINE,) and "gradient" in faulty.truth.categories
    assert live["real/live/none"].truth.clean and live["real/live/none"].script.source == FIXED
    assert any("drop_zero_grad" in key for key in live)  # the coupled mutant of the same file
    record = faults[0].provenance()
    assert record["repository"] == REPO and record["lines"] == [LIVE_LINE]
    assert record["coupled_operators"] == ["drop_zero_grad"] and record["coupling"] == "exact"


def test_runs_stand_as_ground_truth_only_when_live(replay, results: Path):
    mirrors, path = replay
    faults = {item.fault.id: item for item in collect(mirrors, path)}
    stored = results / "real_faults"
    before = sorted(p.name for p in (stored / "runs").iterdir())
    # Every run comes from the harness's cache: nothing new is stored.
    run_all(list(faults.values()), mirrors, 2, stored)
    assert sorted(p.name for p in (stored / "runs").iterdir()) == before
    assert faults["live"].runs.standing == LIVE
    assert faults["inert"].runs.standing.startswith("inert offline")
    assert faults["broken"].runs.standing.startswith("the fixed version does not end ok")
    assert faults["static-only"].runs.standing.startswith("not run offline")
    cases = run_cases(list(faults.values()))
    assert {case.loop for case in cases} == {"real/live"}
    faulty = [case for case in cases if case.truth.identity == "real::live"]
    assert sorted(case.seed for case in faulty) == [0, 1]
    assert all(case.result["reached"] for case in faulty)


def test_bench_real_faults_scores_a_static_and_a_run_detector(replay, results: Path, capsys):
    mirrors, path = replay
    argv = ["--detector", "trainwreck-lint", "--detector", "trainwreck-rules"]
    argv += ["--loops", "mlp_digits", "--operator", "drop_zero_grad", "--results-dir", str(results)]
    argv += [
        "--real-faults",
        "--mirrors",
        str(mirrors),
        "--real-set",
        str(path),
        "--real-seeds",
        "2",
    ]
    assert bench_main(argv) == 0
    out = capsys.readouterr().out
    assert "## Real faults beside the mutants" in out
    text = (results / "bench" / "real_faults.md").read_text()
    assert text.strip() in out
    with open(results / "bench" / "real_faults.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    lint = {row["fault"]: row for row in rows if row["detector"] == "trainwreck-lint"}
    rules = {row["fault"]: row for row in rows if row["detector"] == "trainwreck-rules"}
    # The linter reads every fault's files: the missing zero_grad() is a new finding.
    assert lint["live"]["standing"] == LIVE
    assert (lint["live"]["faulty_cases"], lint["live"]["detected"]) == ("1", "1")
    assert lint["live"]["fixed_flagged"] == "0"
    # drop_zero_grad's mutants of mlp_digits stand beside it.
    assert int(lint["live"]["operator_mutants"]) >= 1
    # The run detector counts only the live fault's runs; the others are shown with why.
    assert rules["live"]["faulty_cases"] == "2"
    assert rules["inert"]["standing"].startswith("inert offline")
    assert rules["broken"]["faulty_cases"] == "0"
    assert "Shown, not counted" in text and "inert offline" in text


def test_bench_real_faults_bad_mirrors_is_one_line_and_exit_2(tmp_path: Path, capsys, monkeypatch):
    argv = ["--detector", "trainwreck-lint", "--results-dir", str(tmp_path / "r")]
    code = bench_main([*argv, "--real-faults", "--mirrors", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--mirrors" in err[0]
    assert not (tmp_path / "r").exists()  # nothing written
    # Without --mirrors, $TRAINWRECK_MIRRORS or the fetch tool's folder, and neither here.
    monkeypatch.delenv("TRAINWRECK_MIRRORS", raising=False)
    monkeypatch.setattr(replay_module, "FETCH_MIRRORS", tmp_path / "no-fetch-folder")
    with pytest.raises(ValueError, match="give --mirrors DIR"):
        prepare(None, None, 3)
    monkeypatch.setenv("TRAINWRECK_MIRRORS", str(tmp_path))
    assert prepare(None, None, 3).mirrors == tmp_path


def test_export_includes_the_real_faults_with_provenance(
    replay, results: Path, tmp_path: Path, capsys
):
    mirrors, path = replay
    bundle = tmp_path / "bundle"
    argv = ["export", str(bundle), "--loops", "mlp_digits", "--results-dir", str(results)]
    assert (
        bench_main([*argv, "--real-faults", "--mirrors", str(mirrors), "--real-set", str(path)])
        == 0
    )
    records = {
        record["id"]: record
        for record in map(json.loads, (bundle / "real_faults.jsonl").read_text().splitlines())
    }
    live = records["live"]
    assert (live["repository"], live["path"], live["lines"]) == (REPO, "live.py", [LIVE_LINE])
    assert live["fix"] != live["parent"] and live["class"] == "gradient"
    assert live["coupled_operators"] == ["drop_zero_grad"] and live["run_standing"] == LIVE
    assert (bundle / live["files"]["faulty"]).read_text() == VERSIONS["live.py"][0]
    assert (bundle / live["files"]["fixed"]).read_text() == FIXED
    assert len(live["files"]["traces"]) >= 4  # fixed and faulty on 2 seeds
    assert records["inert"]["run_standing"].startswith("inert offline")
    assert "traces" not in records["inert"]["files"]
    index = pd.read_parquet(bundle / "index.parquet")
    real = index[index["loop"] == "real/live"]
    assert set(real["kind"]) >= {"real_faulty", "real_fixed", "real_run"}
    assert set(real["target"]) == {f"{REPO}/live.py"}
    assert "## Real faults" in (bundle / "README.md").read_text()


def test_gym_shim_gives_the_old_api_seeded_and_with_an_episode_budget(monkeypatch):
    pytest.importorskip("gymnasium")
    import torch

    from experiments.bench.real import gym_shim

    def first_observations():
        torch.manual_seed(7)
        env = gym_shim.make("CartPole-v1")
        observation = env.reset()
        step = env.step(env.action_space.sample())
        return observation.tolist(), len(step), step[2]

    assert first_observations() == first_observations()  # seeded from the run's seed
    assert first_observations()[1:] == (4, False)
    monkeypatch.setattr(gym_shim, "EPISODES", 2)
    env = gym_shim.make("Pendulum-v0")  # renamed to gymnasium's Pendulum-v1
    env.reset()
    env.reset()
    with pytest.raises(SystemExit) as stop:
        env.reset()
    assert stop.value.code == 0


MIRRORS = Path(os.environ.get("TRAINWRECK_MIRRORS", "/work/.mirror"))


@pytest.mark.slow
@pytest.mark.skipif(not MIRRORS.is_dir(), reason="no git mirrors of the replay set here")
def test_the_replay_sets_offline_faults_on_the_mirrors(tmp_path: Path):
    pytest.importorskip("gymnasium")
    from experiments.bench.real.replay import REPLAY_SET

    faults = [item for item in collect(MIRRORS, REPLAY_SET) if item.fault.run]
    if not all(item.read for item in faults):
        pytest.skip("a mirror of an offline fault is missing here")
    run_all(faults, MIRRORS, 3, tmp_path / "results")
    standing = {item.fault.id: item.runs.standing for item in faults}
    live = {fault_id for fault_id, state in standing.items() if state == LIVE}
    assert {
        "morvan-rnn-windows-repeat-endpoint",
        "minimalrl-acer-policy-not-detached",
        "minimalrl-sac-policy-on-next-state",
        "minimalrl-reinforce-done-not-reset",
        "minimalrl-actor-critic-last-next-state",
        "minimalrl-ppo-lstm-wrong-hidden",
    } <= live
    # The 2017 script's fixed version crashes on today's torch: no reference, not counted.
    assert standing["hunkim-rnn-cuda-not-assigned"].startswith("the fixed version")
