"""Stillborn and equivalent mutants, from the run's end record to the catalog and the
benchmark (issue 22).

The rules first, on small inputs; then real runs of ``tests/scripts/validity_tiny.py`` with
hand-written mutants (each replaces one line, so which line changed is known exactly):
a ``NameError`` at a changed line (stillborn), the same crash from an operator that expects
a crash of another kind, an error at an unchanged line, an error after the first optimizer
step (all stillborn by their witness since issue 28: they crash before it fires), a crash
after the witness fired (the bug's crash, marked undeclared), a mutant identical to the
reference on every seed whose witness fired (equivalent), one whose witness never fired
(unconfirmed) and one that differs on some seeds only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from experiments.bench.corpus import run_cases
from experiments.bench.validity import mutant_validity
from experiments.catalog.rebuild import rebuild_report
from experiments.equivalence import mark_equivalent, run_digest, same_as_reference
from experiments.harness import RunSpec, reach, run_sweep
from experiments.harness.raised import describe, stillborn
from experiments.symptoms.judge import Judgement
from experiments.trace import read_trace
from experiments.validity import validity_table
from mutator.diff import unified_diff

SCRIPT = Path(__file__).parent / "scripts" / "validity_tiny.py"
SEEDS = (0, 1, 2)

# -- the stillborn rule on an end record -----------------------------------------------------


def _raise_in(source: str, filename: str) -> BaseException:
    try:
        exec(compile(source, filename, "exec"), {})
    except Exception as error:
        return error
    raise AssertionError("the source did not raise")


def test_describe_keeps_the_mutated_files_lines_outermost_first():
    error = _raise_in("def f():\n    return missing\n\nf()\n", "/m/train.py")
    record = describe(error, "/m/train.py")
    assert record["types"][0] == "NameError" and "missing" in record["message"]
    assert record["lines"] == [4, 2]
    assert describe(error, "/other.py")["lines"] == []  # frames elsewhere are not kept
    assert describe(None, "/m/train.py") is None
    assert describe(SystemExit(2), "/m/train.py") is None


def _end(lines, types=("NameError", "Exception"), message="name 'x' is not defined", **extra):
    raised = {"types": list(types), "message": message, "lines": list(lines)}
    return {"raised": raised, "steps": 0, "telemetry": True, **extra}


MUTANT = {"operators": ["reduction_sum"], "mutant_lines": [24]}


def test_a_python_level_error_at_a_changed_line_before_any_step_is_stillborn():
    assert stillborn(MUTANT, _end([40, 24]), "crash")
    keyword = _end([24], ("TypeError",), "f() got an unexpected keyword argument 'reduction'")
    assert stillborn(MUTANT, keyword, "crash")


@pytest.mark.parametrize(
    ("mutant", "end", "status", "why"),
    [
        ({**MUTANT, "operators": ["swap_loss_arguments"]}, _end([24]), "crash", "declared"),
        (MUTANT, _end([40, 29]), "crash", "raised at an unchanged line"),
        (MUTANT, _end([24], steps=3), "crash", "after the first optimizer step"),
        (MUTANT, _end([24], telemetry=False), "crash", "no telemetry: steps unknown"),
        (MUTANT, _end([24], ("TypeError",), "unsupported operand type(s)"), "crash", "a value"),
        (MUTANT, _end([24], ("RuntimeError",), "shape mismatch"), "crash", "the bug's effect"),
        ({**MUTANT, "operators": ["not_an_operator"]}, _end([24]), "crash", "unknown operator"),
        (MUTANT, _end([24]), "timeout", "not a crash"),
        (None, _end([24]), "crash", "not a mutant"),
        (MUTANT, None, "crash", "no end record from the child"),
    ],
)
def test_not_stillborn(mutant, end, status, why):
    assert not stillborn(mutant, end, status), why


# -- the equivalence rule on a runs frame ----------------------------------------------------


def _frame(mutant_digests: dict[int, str], measured: str = "silent"):
    """Reference runs with digests r0, r1, r2; one mutant with the given digests per seed."""
    rows = [
        {"identity": "none", "role": "reference", "seed": seed, "trace_digest": f"r{seed}"}
        for seed in SEEDS
    ]
    rows += [
        {"identity": "m", "role": "mutant", "seed": seed, "trace_digest": digest}
        for seed, digest in mutant_digests.items()
    ]
    frame = pd.DataFrame(rows).assign(loop="l", device="cpu")
    frame["argv"] = [["--seed", str(seed)] for seed in frame["seed"]]
    frame["same_as_reference"] = same_as_reference(frame)
    symptoms = pd.DataFrame(
        [{"loop": "l", "device": "cpu", "identity": "m", "role": "mutant", "measured": measured}]
    )
    labels = pd.Series([[] if i < 3 else ["silent"] for i in frame.index], dtype=object)
    judgement = Judgement(labels, pd.Series([None] * len(frame), dtype=object), symptoms)
    return frame, mark_equivalent(frame, judgement)


def test_identical_on_every_seed_is_equivalent():
    frame, judged = _frame({0: "r0", 1: "r1", 2: "r2"})
    assert list(frame["same_as_reference"][3:]) == [True, True, True]
    assert judged.symptoms.at[0, "measured"] == "equivalent"
    assert all(labels == ["equivalent"] for labels in judged.run_labels[3:])


@pytest.mark.parametrize(
    ("digests", "measured", "why"),
    [
        ({0: "r0", 1: "other", 2: "r2"}, "silent", "identical on some seeds only"),
        ({0: "r0", 1: "r1", 3: "r1"}, "silent", "a seed the reference did not run"),
        ({0: "r0", 1: "r1", 2: None}, "silent", "a run without a digest"),
        ({0: "r0", 1: "r1", 2: "r2"}, "cost_only", "identical values, but slower or bigger"),
    ],
)
def test_not_equivalent(digests, measured, why):
    _, judged = _frame(digests, measured)
    assert judged.symptoms.at[0, "measured"] == measured, why


def test_a_cost_only_bug_whose_witness_fired_on_every_seed_is_not_equivalent():
    """A graph kept with retain_graph=True computes the same numbers by design: the witness
    (the graph alive at the next forward) shows the bug ran, so it is no equivalent mutant."""
    frame, _ = _frame({0: "r0", 1: "r1", 2: "r2"})
    frame["operator"] = ["none"] * 3 + ["retain_graph_left_in"] * 3
    symptoms = pd.DataFrame(
        [
            {
                "loop": "l",
                "device": "cpu",
                "identity": "m",
                "role": "mutant",
                "measured": "silent",
                "operator": "retain_graph_left_in",
            }
        ]
    )
    labels = pd.Series([[] if i < 3 else ["silent"] for i in frame.index], dtype=object)
    judgement = Judgement(labels, pd.Series([None] * len(frame), dtype=object), symptoms)
    cost_only = {"retain_graph_left_in"}.__contains__
    for states, measured in (
        (["confirmed"] * 3, "silent"),  # the bug ran, and cost memory only
        (["confirmed", "unconfirmed", "confirmed"], "equivalent"),  # one seed never showed it
    ):
        frame["witness_state"] = [""] * 3 + states
        judged = mark_equivalent(frame, judgement, cost_only=cost_only)
        assert judged.symptoms.at[0, "measured"] == measured, states
    frame["witness_state"] = [""] * 3 + ["confirmed"] * 3
    assert mark_equivalent(frame, judgement).symptoms.at[0, "measured"] == "equivalent"


def test_the_digest_ignores_time_and_memory_but_not_values_or_counters():
    import numpy as np

    curves = {"loss": (np.arange(3.0), np.array([2.0, 1.0, np.inf]))}
    result = {"status": "ok", "steps": 3, "wall_s": 1.0, "peak_rss_mb": 100.0}
    features = {"holdout_metric": 0.5, "train_time_s": 1.0}
    digest = run_digest(result, features, curves)
    slower = run_digest(
        {**result, "wall_s": 9.0, "peak_rss_mb": 900.0}, {**features, "train_time_s": 9.0}, curves
    )
    assert digest == slower
    nan_curves = {"loss": (np.arange(3.0), np.array([2.0, 1.0, np.nan]))}
    assert run_digest(result, features, nan_curves) == digest  # the cache keeps both as null
    moved = {"loss": (np.arange(3.0), np.array([2.0, np.nextafter(1.0, 2.0), np.inf]))}
    assert run_digest(result, features, moved) != digest
    assert run_digest({**result, "train_forwards_eval_mode": 3}, features, curves) != digest
    assert run_digest(result, {**features, "holdout_metric": 0.51}, curves) != digest
    assert run_digest({**result, "trace_dropped": 5}, features, curves) is None


def test_validity_table_counts_per_operator():
    symptoms = pd.DataFrame(
        {
            "role": ["mutant"] * 5 + ["noop"],
            "operator": ["a", "a", "a", "b", "b", "noop"],
            "measured": ["stillborn", "equivalent", "crash", "silent", "unreached", "silent"],
        }
    )
    table = validity_table(symptoms).set_index("operator")
    assert table.loc["a", ["mutants", "stillborn", "equivalent", "judged"]].tolist() == [3, 1, 1, 1]
    assert table.loc["a", "stillborn_rate"] == pytest.approx(1 / 3)
    assert table.loc["b", ["unreached", "judged", "equivalent_rate"]].tolist() == [1, 1, 0.0]
    assert "noop" not in table.index


# -- end to end: real runs, the catalog, the benchmark --------------------------------------

ORIGINAL = SCRIPT.read_text(encoding="utf-8")
# name -> (line replaced, its replacement, the operator the mutant claims)
MUTANTS = {
    "stillborn": ("nn.CrossEntropyLoss()", "nn.CrossEntropyLoss(reduction=reduction)", "reduction_sum"),
    "declared": ("nn.CrossEntropyLoss()", "nn.CrossEntropyLoss(reduction=mode)", "swap_loss_arguments"),
    "unchanged_line": ("loss_fn = nn.CrossEntropyLoss()", "criterion = nn.CrossEntropyLoss()", "reduction_sum"),
    "after_step": ("val_loss=val_loss,", "val_loss=val_los,", "validate_on_training_data"),
    # SGD without momentum keeps no state: a new one each epoch steps exactly the same
    "equivalent": ("        model.train()\n", "        model.train()\n        optimizer = torch.optim.SGD(model.parameters(), lr=lr)\n", "optimizer_recreated_each_epoch"),
    # identical numbers by design: the graph kept alive is the bug (cost only), not equivalence
    "kept_graph": ("loss.backward()", "loss.backward(retain_graph=True)", "retain_graph_left_in"),
    "unconfirmed": ("(inputs[:, 0] > 0)", "(0 < inputs[:, 0])", "shift_labels"),
    "late_crash": ("labels[start : start + 32])", "labels[start : start + 32 + epoch])", "shift_labels"),
    "some_seeds": ("    lr = 0.1\n", "    lr = 0.1 if args.seed != 1 else 0.2\n", "scale_lr"),
}  # fmt: skip
# The mutants that die before training run on one seed; the others on every seed.
SEEDS_OF = {
    "stillborn": SEEDS,
    "equivalent": SEEDS,
    "kept_graph": SEEDS,
    "unconfirmed": SEEDS,
    "some_seeds": SEEDS,
}


def _identity(name: str) -> str:
    return f"validity_tiny.py::main::{MUTANTS[name][2]}#{name}"


def _spec(seed: int, name: str | None = None) -> RunSpec:
    argv = ("--epochs", "2", "--seed", str(seed))
    if name is None:
        return RunSpec(str(SCRIPT), ORIGINAL, argv, seed, loop="validity_tiny")
    old, new, operator = MUTANTS[name]
    assert ORIGINAL.count(old) == 1
    source = ORIGINAL.replace(old, new)
    diff, lines, mutant_lines = unified_diff(ORIGINAL, source, SCRIPT.name)
    mutant = {
        "identity": _identity(name),
        "operators": [operator],
        "categories": ["loss"],
        "lines": list(lines),
        "mutant_lines": list(mutant_lines),
        "diff": diff,
        "reach_regions": reach.regions(ORIGINAL, source),
    }
    return RunSpec(str(SCRIPT), source, argv, seed, loop="validity_tiny", mutant=mutant)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("validity")
    specs = [_spec(seed) for seed in SEEDS]
    specs += [_spec(seed, name) for name in MUTANTS for seed in SEEDS_OF.get(name, (0,))]
    rows = run_sweep(specs, folder, workers=2)
    assert len(rows) == len(specs)
    summary = rebuild_report(folder)
    return folder, {(row["identity"], row["seed"]): row for row in rows}, summary


def test_run_rows_say_stillborn_only_for_the_undeclared_error_at_a_changed_line(results):
    _, rows, _ = results
    statuses = {identity: row["status"] for (identity, seed), row in rows.items() if seed == 0}
    assert statuses[_identity("stillborn")] == "stillborn"
    assert statuses[_identity("declared")] == "crash"
    assert statuses[_identity("unchanged_line")] == "crash"
    assert statuses[_identity("after_step")] == "crash"
    assert statuses["none"] == statuses[_identity("equivalent")] == "ok"
    born_dead = rows[(_identity("stillborn"), 0)]
    assert born_dead["exc_type"] == "NameError" and born_dead["steps"] == 0
    assert rows[(_identity("after_step"), 0)]["steps"] > 0
    # The child's end record holds what the parent decided from.
    end = [r for r in read_trace(born_dead["run_dir"]) if r["kind"] == "end"][-1]
    assert end["raised"]["types"][0] == "NameError"
    assert born_dead["mutant_lines"][0] in end["raised"]["lines"]


def test_catalog_rows_and_runs_table(results):
    folder, _, _ = results
    symptoms = pd.read_csv(folder / "catalog" / "symptoms.csv").set_index("identity")
    measured = symptoms["measured"].to_dict()
    assert measured[_identity("stillborn")] == "stillborn"
    assert measured[_identity("equivalent")] == "equivalent"  # its witness fired
    kept = symptoms.loc[_identity("kept_graph")]
    assert kept["measured"] not in ("equivalent", "stillborn", "unconfirmed")
    assert "graph" in kept["witness"]
    assert measured[_identity("unconfirmed")] == "unconfirmed"  # identical targets
    assert measured[_identity("some_seeds")] not in ("equivalent", "stillborn", "unconfirmed")
    # Crashes before the witness fired that the operator does not declare (issue 28):
    # swap_loss_arguments declares dtype and shape errors, not a NameError; an error at an
    # unchanged line or after the first step is no exception.
    for name in ("declared", "unchanged_line", "after_step"):
        assert measured[_identity(name)] == "stillborn", name
    late = symptoms.loc[_identity("late_crash")]
    assert late["measured"] == "crash" and late["why"].startswith("undeclared: ValueError")
    assert "targets differ" in late["witness"]
    row = symptoms.loc[_identity("stillborn")]
    assert "NameError" in row["outcome"] and row["why"].startswith("stillborn")
    assert pd.isna(row["agrees"])  # left out of the agreement with the declared severity
    assert pd.isna(symptoms.loc[_identity("equivalent"), "agrees"])
    why = symptoms.loc[_identity("unconfirmed"), "why"]
    assert why.startswith("unconfirmed (no effect on this model): not seen: the targets")
    runs = pd.read_csv(folder / "catalog" / "runs.csv")
    of = runs.set_index(["identity", "seed"])
    assert of.loc[(_identity("stillborn"), 0), "labels"] == "stillborn"
    assert (runs.loc[runs["identity"] == _identity("equivalent"), "labels"] == "equivalent").all()
    assert of.loc[(_identity("unconfirmed"), 1), "status"] == "unconfirmed"
    assert of.loc[(_identity("unconfirmed"), 1), "ended"] == "ok"
    assert of.loc[(_identity("after_step"), 0), "ended"] == "crash"
    same = of.loc[_identity("some_seeds"), "same_as_reference"].to_dict()
    assert same == {0: True, 1: False, 2: True}
    # Judged on the seed whose learning rate differs; the other two are unconfirmed.
    statuses = of.loc[_identity("some_seeds"), "status"].to_dict()
    assert statuses == {0: "unconfirmed", 1: "ok", 2: "unconfirmed"}


def test_stillborn_and_equivalent_are_out_of_the_statistics(results):
    folder, _, summary = results
    symptoms = pd.read_csv(folder / "catalog" / "symptoms.csv").set_index("identity")
    aside = symptoms.loc[_identity("stillborn")]
    assert aside["n_reference"] == 0 and pd.isna(aside["comparison"])  # no effect sizes
    # Judged with a declared severity: late_crash, some_seeds, kept_graph.
    assert summary.agreement[1] == 3
    assert summary.validity == (
        "9 mutants: 4 stillborn, 1 unconfirmed, 1 equivalent, 0 unreached, 3 judged as bugs"
    )
    text = (folder / "catalog" / "symptoms.md").read_text()
    section = text[text.index("## Mutant validity") :]
    assert "| reduction_sum | 2 | 2 | 0 | 0 | 0 | 0 | 100% | 0% | 0% |  |" in section
    assert (
        "| shift_labels | 2 | 0 | 1 | 0 | 0 | 1 | 0% | 50% | 0% | no effect on this model 1 |"
        in section
    )
    assert 'id="validity"' in (folder / "catalog" / "report.html").read_text()
    study = (folder / "catalog" / "study.md").read_text()
    if "## Where the textbook claim does not hold" in study:
        textbook = study.split("## Where the textbook claim does not hold")[1].split("\n## ")[0]
        assert "stillborn" not in textbook and "equivalent" not in textbook


def test_benchmark_leaves_their_runs_and_stillborn_code_out_of_the_ground_truth(results):
    from experiments.bench.corpus import Case, Truth

    folder, _, _ = results
    cases = run_cases(folder)
    assert not [c for c in cases if c.result.get("status") == "stillborn"]
    validity = mutant_validity(folder)
    assert validity.of("validity_tiny", _identity("equivalent")) == "equivalent on cpu"
    assert validity.of("validity_tiny", _identity("stillborn")) == "stillborn"
    assert validity.of("validity_tiny", _identity("unconfirmed")) == "unconfirmed on cpu"
    assert validity.of("validity_tiny", _identity("declared")) == "stillborn"
    kept = [c for c in cases if validity.keeps(c)]
    identities = {c.truth.identity for c in kept}
    assert _identity("equivalent") not in identities and _identity("some_seeds") in identities
    assert _identity("unconfirmed") not in identities
    # Of a mutant confirmed on one seed, only that seed's run is ground truth.
    seeds = sorted(c.result["seed"] for c in kept if c.truth.identity == _identity("some_seeds"))
    assert seeds == [1]
    assert "| optimizer_recreated_each_epoch | 1 | 0 | 0 | 1 |" in validity.section()

    # Source cases: a stillborn rewrite is no ground truth; an equivalent or unconfirmed
    # one's code stays (measured on the CPU only).
    def source(name: str) -> Case:
        return Case(name, "validity_tiny", Truth(_identity(name), (MUTANTS[name][2],)))

    assert not validity.keeps(source("stillborn")) and not validity.keeps(source("after_step"))
    assert validity.keeps(source("equivalent")) and validity.keeps(source("some_seeds"))
    assert validity.keeps(source("unconfirmed"))


def test_without_a_catalog_the_benchmark_says_equivalence_was_not_measured(results, tmp_path):
    folder, _, _ = results
    bare = tmp_path / "bare"
    (bare / "runs").mkdir(parents=True)
    for result in folder.glob("runs/**/result.json"):
        target = bare / result.parent.relative_to(folder)
        target.mkdir(parents=True)
        (target / "result.json").write_bytes(result.read_bytes())
    validity = mutant_validity(bare)
    assert validity.of("validity_tiny", _identity("stillborn")) == "stillborn"
    assert validity.of("validity_tiny", _identity("equivalent")) == ""
    # The witness verdicts come from the stored runs, against the stored unmutated ones.
    assert validity.of("validity_tiny", _identity("unconfirmed")) == "unconfirmed on cpu"
    assert validity.of("validity_tiny", _identity("after_step")) == "stillborn"
    assert "equivalence not measured" in validity.section()
    assert "4 stillborn, 1 unconfirmed, 0 unreached" in validity.section()


def test_bench_export_marks_what_was_measured_and_drops_stillborn_code(tmp_path: Path):
    from experiments.bench.export import export_bundle
    from mutations.registry import get_operator
    from mutator import SourceFile

    style = Path(__file__).parent / "styles" / "flat_script.py"
    (tmp_path / "loops").mkdir()
    loop = Path(shutil.copy(style, tmp_path / "loops" / "flat.py"))
    source = SourceFile(style.read_text(), "flat.py")
    (zero_grad,) = source.find_sites([get_operator("drop_zero_grad")])
    (step,) = source.find_sites([get_operator("drop_optimizer_step")])
    equivalent, stillborn = (source.apply([site]).identity for site in (zero_grad, step))
    catalog = tmp_path / "results" / "catalog"
    catalog.mkdir(parents=True)
    rows = [
        {"identity": equivalent, "operator": "drop_zero_grad", "measured": "equivalent"},
        {"identity": stillborn, "operator": "drop_optimizer_step", "measured": "stillborn"},
    ]
    pd.DataFrame(rows).assign(loop="flat", device="cpu", role="mutant").to_csv(
        catalog / "symptoms.csv"
    )
    counts = export_bundle(tmp_path / "bundle", [loop], tmp_path / "results")
    bundle = tmp_path / "bundle"
    lines = (bundle / "ground_truth.jsonl").read_text().splitlines()
    truth = {entry["identity"]: entry for entry in map(json.loads, lines)}
    assert stillborn not in truth and truth[equivalent]["validity"] == "equivalent on cpu"
    index = pd.read_csv(bundle / "index.csv").set_index("identity")
    assert index.loc[stillborn, "validity"] == "stillborn"
    assert (bundle / index.loc[stillborn, "path"]).is_file()  # the file stays, marked
    assert counts["not ground truth"] == 1
    assert "`stillborn`" in (bundle / "README.md").read_text()


def test_the_digest_covers_what_the_script_printed():
    import numpy as np

    curves = {"loss": (np.arange(2.0), np.array([2.0, 1.0]))}
    result = {"status": "ok"}
    printed = run_digest(result, {}, curves, b"test acc 0.95\n")
    assert printed == run_digest(result, {}, curves, b"test acc 0.95\n")
    assert printed != run_digest(result, {}, curves, b"test acc 0.62\n")


def test_a_mutated_module_the_script_imports_is_stillborn_at_its_own_lines(tmp_path: Path):
    """The mutant is ``helpers.py``, served by the import hook: the frames the rule reads
    are that file's, numbered in the mutant, not the script's."""
    project = tmp_path / "project"
    project.mkdir()
    script = project / "train.py"
    shutil.copy(SCRIPT, script)
    text = script.read_text().replace(
        "    loss_fn = nn.CrossEntropyLoss()\n", "    loss_fn = helpers.make_loss()\n"
    )
    script.write_text("import helpers\n" + text)
    helper = "from torch import nn\n\n\ndef make_loss():\n    return nn.CrossEntropyLoss()\n"
    (project / "helpers.py").write_text(helper)
    broken = helper.replace("CrossEntropyLoss()", "CrossEntropyLoss(reduction=reduction)")
    diff, lines, mutant_lines = unified_diff(helper, broken, "helpers.py")
    assert list(mutant_lines) == [5]
    mutant = {
        "identity": "helpers.py::make_loss::reduction_sum#0",
        "operators": ["reduction_sum"],
        "lines": list(lines),
        "mutant_lines": list(mutant_lines),
        "diff": diff,
        "reach_regions": reach.regions(helper, broken),
    }
    argv = ("--epochs", "1")
    common = {"loop": "project", "cwd": str(project)}
    specs = [
        RunSpec(str(script), script.read_text(), argv, 0, **common),
        RunSpec(
            str(script),
            broken,
            argv,
            0,
            mutant=mutant,
            target=str(project / "helpers.py"),
            **common,
        ),
    ]
    reference, row = run_sweep(specs, tmp_path / "results", workers=1)
    assert reference["status"] == "ok"
    assert row["status"] == "stillborn" and row["exc_type"] == "NameError"
    end = [r for r in read_trace(row["run_dir"]) if r["kind"] == "end"][-1]
    assert end["raised"]["lines"] == [5]  # helpers.py's line; the script's frames are not kept
