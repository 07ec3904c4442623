"""Loading stored runs, the catalog tables, the signature cache and atomic writing."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from fixtures_runs import NOOP_SEEDS, REFERENCE_SEEDS, RunSpec, write_run, write_study

import experiments.report as report_package
from experiments.catalog import (
    CATALOG_FILES,
    CURVE_METRICS,
    SIGNATURE_CACHE,
    build_tables,
    load_runs,
    rebuild_report,
    variant_label,
    write_catalog,
)
from experiments.signature import FEATURES
from mutations.registry import operator_classes

MUTANTS = (
    ("flat", "toy.py::train::drop_optimizer_step#0", ("drop_optimizer_step",)),
    ("diverge", "toy.py::main::scale_lr(factor=100.0)#0", ("scale_lr",)),
    ("crash_start", "toy.py::Net.forward::swap_view#0", ("swap_view",)),
    ("nan", "toy.py::train::no_such_operator#0", ("no_such_operator",)),
)
STEPS = 120
N_RUNS = len(REFERENCE_SEEDS) * (1 + len(MUTANTS)) + len(NOOP_SEEDS)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    write_study(root, mutants=MUTANTS, steps=STEPS)
    return root


@pytest.fixture(scope="module")
def tables(results):
    return build_tables(load_runs(results))


def test_runs_table_has_one_row_per_stored_run(tables):
    runs = tables.runs
    assert len(runs) == N_RUNS
    assert runs["run_id"].is_unique
    identity = {"run_id", "loop", "identity", "operator", "variant", "seed", "device", "role"}
    context = {"argv", "torch_version", "harness_version", "diff", "sha256"}
    assert identity | context | {"status", "labels", *FEATURES} <= set(runs.columns)
    assert runs["role"].value_counts().to_dict() == {
        "mutant": len(REFERENCE_SEEDS) * len(MUTANTS),
        "reference": len(REFERENCE_SEEDS),
        "noop": len(NOOP_SEEDS),
    }
    assert (runs.loc[runs["role"] == "reference", "labels"] == "").all()
    assert (runs.loc[runs["role"] != "reference", "labels"] != "").all()
    crashed = runs[runs["operator"] == "swap_view"]
    assert (crashed["status"] == "crash").all() and (
        crashed["labels"] == "crash:RuntimeError"
    ).all()


def test_curves_table_is_long_format_with_every_loss_point(tables):
    curves = tables.curves
    assert list(curves.columns) == ["run", "step", "metric", "value"]
    assert set(curves["metric"].cat.categories) == set(CURVE_METRICS)
    loss = curves[curves["metric"] == "loss"]
    per_run = loss.groupby("run", observed=True).size()
    healthy = tables.runs.loc[tables.runs["role"] == "reference", "run_id"]
    assert (per_run[healthy] == STEPS).all()
    crashed = tables.runs.loc[tables.runs["operator"] == "swap_view", "run_id"]
    assert not set(crashed) & set(per_run.index)


def test_symptoms_table_one_row_per_mutant_with_expected_beside_measured(tables):
    symptoms = tables.symptoms
    assert len(symptoms) == len(MUTANTS) + 1  # and the noop control
    needed = {"loop", "operator", "variant", "measured", "expected", "agrees", "symptoms"}
    assert needed <= set(symptoms.columns)
    assert {"d_final_over_initial", "p_final_over_initial", "cliff_final_over_initial"} <= set(
        symptoms.columns
    )
    registered = operator_classes()
    for row in symptoms.to_dict("records"):
        if row["operator"] in registered:
            assert row["expected"] == registered[row["operator"]].expected
    unknown = symptoms[symptoms["operator"] == "no_such_operator"].iloc[0]
    assert pd.isna(unknown["expected"]) and unknown["category"] == "optim"
    assert unknown["measured"] == "breaks_training"


def test_variant_label_comes_from_the_identity():
    assert (
        variant_label("t.py::main::scale_lr(factor=100.0)#0", "scale_lr")
        == "scale_lr(factor=100.0)"
    )
    assert variant_label("a::f::x#0+a::g::y(k=1)#2", "x+y") == "x+y(k=1)"
    assert variant_label("none", "none") == "none"


def test_write_catalog_writes_every_file_and_leaves_no_temporaries(tables, tmp_path):
    out = tmp_path / "catalog"
    files = write_catalog(tables, out)
    assert sorted(path.name for path in files.values()) == sorted(CATALOG_FILES)
    assert sorted(p.name for p in out.iterdir()) == sorted(CATALOG_FILES)
    assert [p.name for p in tmp_path.iterdir()] == ["catalog"]
    runs = pd.read_parquet(out / "runs.parquet")
    assert runs.shape == tables.runs.shape
    assert pd.read_csv(out / "runs.csv").shape == tables.runs.shape
    assert len(pd.read_parquet(out / "curves.parquet")) == len(tables.curves)
    assert len(pd.read_csv(out / "symptoms.csv")) == len(tables.symptoms)


def test_failed_write_keeps_the_previous_catalog_intact(tables, tmp_path, monkeypatch):
    out = tmp_path / "catalog"
    write_catalog(tables, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(_tables):
        raise RuntimeError("renderer failed halfway")

    monkeypatch.setattr(report_package, "render_report_html", broken)
    with pytest.raises(RuntimeError, match="halfway"):
        write_catalog(tables, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["catalog"]


def test_rewrite_replaces_the_old_catalog(tables, tmp_path):
    out = tmp_path / "catalog"
    write_catalog(tables, out)
    (out / "stale.txt").write_text("from an older version")
    write_catalog(tables, out)
    assert not (out / "stale.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["catalog"]


def test_signature_cache_is_used_and_invalidated_by_a_changed_trace(tmp_path):
    folder = write_run(tmp_path, RunSpec("healthy", 0, steps=60))
    first = load_runs(tmp_path)
    assert not first[0].cached and (folder / SIGNATURE_CACHE).exists()
    second = load_runs(tmp_path)
    assert second[0].cached
    assert second[0].features == first[0].features
    for metric, (steps, values) in first[0].curves.items():
        assert steps.tolist() == second[0].curves[metric][0].tolist()
        assert values.tolist() == pytest.approx(second[0].curves[metric][1].tolist(), nan_ok=True)
    with open(folder / "trace.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"kind": "backward", "i": 60, "loss": 9.0, "step": 60}) + "\n")
    third = load_runs(tmp_path)
    assert not third[0].cached and third[0].features["n_losses"] == 61


def test_corrupt_cache_torn_trace_line_and_bad_result_are_tolerated(tmp_path):
    folder = write_run(tmp_path, RunSpec("healthy", 0, steps=60))
    (folder / SIGNATURE_CACHE).write_text("{not json")
    with open(folder / "trace.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"kind": "backward", "i": 60, "lo')  # killed mid-write
    broken = tmp_path / "runs" / "toy_mlp" / "broken" / "seed0"
    broken.mkdir(parents=True)
    (broken / "result.json").write_text("[1, 2")
    no_trace = write_run(tmp_path, RunSpec("healthy", 1, identity="x::y::z#0", operators=("z",)))
    (no_trace / "trace.jsonl").unlink()
    runs = load_runs(tmp_path)
    assert len(runs) == 2
    by_seed = {run.result["seed"]: run for run in runs}
    assert by_seed[0].features["n_losses"] == 60
    assert by_seed[1].features["n_losses"] == 0


def test_nested_and_unknown_result_fields_survive_parquet_and_csv(tmp_path):
    extra = {"nonfinite_at": ["backward", 12], "spec": {"threads": 1}, "future_field": 3}
    write_run(tmp_path, RunSpec("nan", 0, steps=60, extra_result=extra))
    tables = build_tables(load_runs(tmp_path))
    write_catalog(tables, tmp_path / "catalog")
    runs = pd.read_parquet(tmp_path / "catalog" / "runs.parquet")
    assert json.loads(runs.loc[0, "argv"])[0] == "--epochs"
    assert json.loads(runs.loc[0, "operators"]) == []


def test_n_classes_per_loop_sets_ln_c(tmp_path):
    write_run(tmp_path, RunSpec("healthy", 0, steps=60))
    (run,) = load_runs(tmp_path, n_classes={"toy_mlp": 100}, use_cache=False)
    assert run.features["init_loss_ratio"] == pytest.approx(0.5, abs=0.02)


def test_rebuild_report_from_stored_runs(results, tmp_path):
    summary = rebuild_report(results, tmp_path / "catalog")
    assert summary.n_runs == N_RUNS and summary.n_mutants == len(MUTANTS)
    assert summary.control["group_fpr"] == 0.0
    assert all(path.exists() for path in summary.files.values())
    again = rebuild_report(results, tmp_path / "catalog")
    assert again.cached_signatures == N_RUNS


def test_empty_results_folder_still_writes_a_catalog(tmp_path):
    summary = rebuild_report(tmp_path, tmp_path / "catalog")
    assert summary.n_runs == 0
    assert "No mutants" in (tmp_path / "catalog" / "symptoms.md").read_text()


def test_runs_and_symptoms_carry_the_sites_static_context(tmp_path):
    """``contexts`` in result.json (one per mutant part) becomes a ``context`` column."""
    for seed in REFERENCE_SEEDS:
        write_run(tmp_path, RunSpec("healthy", seed, steps=60))
    for seed in (0, 1):
        write_run(
            tmp_path,
            RunSpec(
                "diverge",
                seed,
                steps=60,
                identity="toy_mlp.py::evaluate::swap_loss_arguments#0",
                operators=("swap_loss_arguments",),
                extra_result={"contexts": ["eval"]},
            ),
        )
    tables = build_tables(load_runs(tmp_path))
    runs = tables.runs
    mutant_rows = runs["operator"] == "swap_loss_arguments"
    assert (runs.loc[mutant_rows, "context"] == "eval").all()
    assert (runs.loc[runs["role"] == "reference", "context"] == "").all()
    symptoms = tables.symptoms.set_index("operator")
    assert symptoms.loc["swap_loss_arguments", "context"] == "eval"
