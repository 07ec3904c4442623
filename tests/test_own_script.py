"""A user's own project, unchanged, through ``trainwreck catalog --loops custom`` (#12).

Each fixture under ``tests/projects/`` is copied to a temporary folder (its data made by its
own ``make_data.py``), and the catalog runs from there, as a user would run it. The runs
are real processes; budgets are tiny.
"""

from __future__ import annotations

import hashlib
import json
import runpy
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from experiments import cli
from experiments.trace import read_trace

PROJECTS = Path(__file__).parent / "projects"


def _project(tmp_path: Path, name: str, monkeypatch) -> Path:
    folder = tmp_path / name
    shutil.copytree(PROJECTS / name, folder)
    monkeypatch.chdir(folder)
    # The runs' private mirrors go to this test's own temp folder, so what is left there
    # is this test's (other sweeps on the machine use the shared one).
    (tmp_path / "tmp").mkdir(exist_ok=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    if (folder / "make_data.py").exists():
        runpy.run_path(str(folder / "make_data.py"), run_name="__main__")
    return folder


def _tree(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a digest of its content."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _catalog(
    capsys, results: Path, *args: str, operators: str | None = None, seeds: int = 2
) -> tuple[int, str]:
    """``trainwreck catalog --loops custom`` on the project's ``train.py`` (every fixture's
    entry point): the exit code and what it wrote to stderr."""
    code = cli.main(
        [
            "catalog",
            "--loops",
            "custom",
            "--seeds",
            str(seeds),
            "--workers",
            "2",
            *(("--operators", operators) if operators else ()),
            "loop.script=train.py",
            *args,
            f"results_dir={results}",
        ]
    )
    return code, capsys.readouterr().err


def _catalog_ok(capsys, results: Path, *args: str, operators: str) -> tuple[pd.DataFrame, str]:
    """``_catalog`` that must succeed: its runs table and stderr."""
    code, err = _catalog(capsys, results, *args, operators=operators)
    assert code == 0, err
    return _runs(results), err


def _runs(results: Path) -> pd.DataFrame:
    return pd.read_csv(results / "catalog" / "runs.csv")


def _losses(folder: str) -> list[float]:
    return [r["loss"] for r in read_trace(Path(folder) / "trace.jsonl") if r["kind"] == "backward"]


@pytest.mark.slow
def test_relative_data_and_checkpoint_never_touch_the_project(tmp_path, monkeypatch, capsys):
    folder = _project(tmp_path, "data_ckpt", monkeypatch)
    (folder / "model.pt").write_text("the user's own checkpoint")
    monkeypatch.setenv("BLOBS_SCALE", "1.0")  # the caller's environment reaches the run
    before = _tree(folder)
    runs, err = _catalog_ok(
        capsys, tmp_path / "results", "loop.seed_arg=--seed", operators="scale_lr,drop_zero_grad"
    )
    # model.pt overwritten and out/run.txt written by every run, two at a time: all in
    # private copies (the script checks that no other run changed its out/run.txt).
    assert _tree(folder) == before
    assert not (folder / "out").exists()
    assert set(runs["status"]) == {"ok"}, runs[["identity", "status", "exc_message"]]
    assert runs["loop"].unique().tolist() == ["train"]  # its path from where it runs
    assert "identical curves" not in err  # the seed reaches the script
    assert "could not be judged" in err and "report(" in err  # no validation numbers
    assert (tmp_path / "tmp").is_dir()
    assert not list((tmp_path / "tmp").glob("trainwreck-run-*"))


@pytest.mark.slow
def test_a_failing_reference_stops_everything_with_its_reason(tmp_path, monkeypatch, capsys):
    folder = _project(tmp_path, "data_ckpt", monkeypatch)
    monkeypatch.setenv("BLOBS_SCALE", "1.0")
    code, err = _catalog(
        capsys, tmp_path / "results", 'loop.argv="--bogus 3"', operators="scale_lr"
    )
    assert code == 1
    assert "did not end ok on seed 0: status invalid" in err
    assert "unrecognized arguments: --bogus 3" in err  # argparse's message, not "2"
    assert "nothing was labelled" in err
    assert not (tmp_path / "results" / "catalog").exists()
    results = [json.loads(p.read_text()) for p in (tmp_path / "results").rglob("result.json")]
    assert results and all(r["identity"] == "none" for r in results)  # no mutant ran
    assert not (folder / "out").exists()


@pytest.mark.slow
def test_an_import_that_fails_stops_the_catalog(tmp_path, monkeypatch, capsys):
    _project(tmp_path, "import_fails", monkeypatch)
    code, err = _catalog(capsys, tmp_path / "results")
    assert code == 1
    assert "seed 0: status crash, ModuleNotFoundError: No module named" in err
    assert "trainwreck_fixture_vision_missing" in err  # from the stderr tail too
    assert "last lines of its stderr" in err
    assert not (tmp_path / "results" / "catalog").exists()


@pytest.mark.slow
def test_configurator_with_key_value_arguments(tmp_path, monkeypatch, capsys):
    folder = _project(tmp_path, "configurator", monkeypatch)
    before = _tree(folder)
    runs, err = _catalog_ok(
        capsys,
        tmp_path / "results",
        'loop.argv="config/tiny.py --device=cpu --max_iters=20"',
        "loop.seed_arg=--seed",
        "loop.flag_style=equals",
        operators="scale_lr",
    )
    assert set(runs["status"]) == {"ok"}
    reference = runs[(runs["identity"] == "none") & (runs["seed"] == 1)].iloc[0]
    assert json.loads(reference["argv"]) == [
        "config/tiny.py",
        "--device=cpu",
        "--max_iters=20",
        "--seed=1",
    ]
    assert (runs["optimizer_steps"] == 20).all()
    assert "identical curves" not in err
    assert _tree(folder) == before  # out/ckpt.pt went to each run's private folder


@pytest.mark.slow
def test_two_file_project_mutates_the_model_module(tmp_path, monkeypatch, capsys):
    folder = _project(tmp_path, "two_file", monkeypatch)
    before = _tree(folder)
    runs, _ = _catalog_ok(
        capsys,
        tmp_path / "results",
        "loop.seed_arg=--seed",
        "loop.mutate=[model.py,train.py]",
        operators="drop_activation,drop_zero_grad",
    )
    model_side = runs[runs["identity"] == "model.py::MLP.forward::drop_activation#0"]
    assert len(model_side) == 2
    assert model_side["target"].str.endswith("model.py").all()
    assert model_side["reached"].astype(bool).all() and (model_side["status"] == "ok").all()
    assert (runs["identity"].str.startswith("train.py::")).any()
    for _, row in model_side.iterrows():  # the mutant ran, not the file on disk
        reference = runs[(runs["identity"] == "none") & (runs["seed"] == row["seed"])]
        assert _losses(row["folder"])[5:] != _losses(reference.iloc[0]["folder"])[5:]
    assert _tree(folder) == before


@pytest.mark.slow
def test_self_seeding_script_is_flagged_once(tmp_path, monkeypatch, capsys):
    _project(tmp_path, "self_seeding", monkeypatch)
    runs, err = _catalog_ok(capsys, tmp_path / "results", operators="scale_lr,drop_zero_grad")
    assert err.count("identical curves on seeds") == 1
    assert "loop.seed_arg=--seed" in err
    references = runs[runs["identity"].isin(["none", "noop"])]
    assert references["seed_insensitive"].astype(bool).all()
    # No spread to divide by: mutants are compared by exact differences, never effect sizes.
    symptoms = pd.read_csv(tmp_path / "results" / "catalog" / "symptoms.csv")
    mutants = symptoms[~symptoms["identity"].isin(["none", "noop"])]
    assert len(mutants) and mutants["comparison"].str.startswith("exact").all()
    effect_sizes = mutants[[c for c in mutants.columns if c.startswith("d_")]]
    assert effect_sizes.isna().all().all()
    # drop_zero_grad finishes with another loss: named as reference value -> mutant value.
    finished = mutants[mutants["n_finished"] > 0]
    assert finished["top_effects"].fillna("").str.contains(" -> ").any()
    noop = symptoms[symptoms["identity"] == "noop"]
    assert noop["top_effects"].fillna("").eq("").all()  # the same code: nothing moved


@pytest.mark.slow
def test_lbfgs_closure_and_hand_written_sgd_run_unchanged(tmp_path, monkeypatch, capsys):
    _project(tmp_path, "lbfgs", monkeypatch)  # loads traindata.pt from the current folder
    runs, err = _catalog_ok(capsys, tmp_path / "results", operators="drop_zero_grad")
    assert (runs.loc[runs["identity"] == "none", "status"] == "ok").all()
    assert (runs["backward_calls"] > 0).all()

    _project(tmp_path, "sgd_by_hand", monkeypatch)
    # drop_backward alone: the hand-written update also has step/zero_grad sites since
    # issue 14 (tests/test_ops_*), this checks the run and the crash summary.
    runs, err = _catalog_ok(capsys, tmp_path / "results2", operators="drop_backward")
    mutants = runs[~runs["identity"].isin(["none", "noop"])]
    assert len(mutants) == 2 and (mutants["reached"].astype(bool)).all()  # drop_backward
    # The summary line: a count per status and one example's exception line.
    assert "crash 2 (e.g. TypeError: unsupported operand type(s)" in err
    assert ", ok 4" in err


@pytest.mark.slow
def test_a_branch_never_taken_is_unreached(tmp_path, monkeypatch, capsys):
    _project(tmp_path, "branch_never_taken", monkeypatch)
    runs, err = _catalog_ok(capsys, tmp_path / "results", operators="scale_lr")
    runs = runs.set_index("identity")
    assert set(runs.loc["train.py::<module>::scale_lr#1", "status"]) == {"unreached"}
    assert (runs.loc["train.py::<module>::scale_lr#0", "reach_hits"] == 1).all()
    symptoms = pd.read_csv(tmp_path / "results" / "catalog" / "symptoms.csv")
    measured = dict(zip(symptoms["identity"], symptoms["measured"]))
    assert measured["train.py::<module>::scale_lr#1"] == "unreached"
    assert measured["train.py::<module>::scale_lr#0"] != "unreached"
    assert "unreached 2" in err


@pytest.mark.slow
def test_trainwreck_sweep_is_gated_too(tmp_path, monkeypatch, capsys):
    from experiments.run import main as sweep_main

    _project(tmp_path, "import_fails", monkeypatch)
    with pytest.raises(SystemExit) as stopped:
        sweep_main(
            [
                "loop=custom",
                "loop.script=train.py",
                "mutation=drop_zero_grad",
                "seeds=[0,1]",
                f"results_dir={tmp_path / 'results'}",
                f"hydra.run.dir={tmp_path / 'hydra'}",
            ]
        )
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert "did not end ok on seed 0: status crash, ModuleNotFoundError" in err
    results = [json.loads(p.read_text()) for p in (tmp_path / "results").rglob("result.json")]
    assert results and all(r["identity"] == "none" for r in results)
