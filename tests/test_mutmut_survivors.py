"""benchmarks/mutmut_survivors.py on a fabricated mutmut 3 run folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_modules import load

survivors_mod = load("mutmut_survivors")

# A trimmed copy of the layout mutmut 3 writes: trampolines left out, the originals and
# mutants kept under their mangled names, methods inside their class.
MUTANTS = """
def x_scale__mutmut_orig(lr, factor=2):
    return lr * factor


def x_scale__mutmut_1(lr, factor=3):
    return lr * factor


def x_scale__mutmut_2(lr, factor=2):
    return lr / factor


class Trainer:
    def xǁTrainerǁfit__mutmut_orig(self, epochs):
        self.model.train()
        for _ in range(epochs):
            self.step()

    def xǁTrainerǁfit__mutmut_1(self, epochs):
        self.model.train()
        for _ in range(epochs + 1):
            self.step()

    def xǁTrainerǁfit__mutmut_2(self, epochs):
        self.model.train()
        for _ in range(None):
            self.step()

    def xǁTrainerǁfit__mutmut_10(self, epochs):
        pass
"""
EXIT_CODES = {
    "pkg.mod.x_scale__mutmut_1": 0,
    "pkg.mod.x_scale__mutmut_2": 1,
    "pkg.mod.xǁTrainerǁfit__mutmut_1": 0,
    "pkg.mod.xǁTrainerǁfit__mutmut_2": 33,
    "pkg.mod.xǁTrainerǁfit__mutmut_10": 0,
}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    folder = tmp_path / "proj" / "mutmut"
    package = folder / "mutants" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text(MUTANTS, encoding="utf-8")
    meta = {"exit_code_by_key": EXIT_CODES, "durations_by_key": {}}
    (package / "mod.py.meta").write_text(json.dumps(meta), encoding="utf-8")
    # A second file whose mutants all ran and were killed, or were never checked.
    (package / "other.py").write_text("def x_f__mutmut_orig():\n    return 1\n", encoding="utf-8")
    other = {"exit_code_by_key": {"pkg.other.x_f__mutmut_1": 1, "pkg.other.x_f__mutmut_2": None}}
    (package / "other.py.meta").write_text(json.dumps(other), encoding="utf-8")
    return folder


def test_survivors_are_the_exit_code_zero_mutants_with_their_diffs(run: Path) -> None:
    found = survivors_mod.survivors(run)
    assert [s.name for s in found] == [
        "pkg.mod.x_scale__mutmut_1",
        "pkg.mod.xǁTrainerǁfit__mutmut_1",
        "pkg.mod.xǁTrainerǁfit__mutmut_10",
    ]
    assert {s.file for s in found} == {"pkg/mod.py"}
    assert [s.function for s in found] == ["scale", "Trainer.fit", "Trainer.fit"]
    scale, fit, emptied = found
    assert "-def x_scale__mutmut_orig(lr, factor=2):" in scale.diff
    assert "+def x_scale__mutmut_orig(lr, factor=3):" in scale.diff
    # The def line is renamed alike on both sides: only the changed line differs.
    assert "-    for _ in range(epochs):" in fit.diff
    assert "+    for _ in range(epochs + 1):" in fit.diff
    assert "def " not in "".join(line for line in fit.diff.splitlines() if line[:1] in "+-")
    assert "+    pass" in emptied.diff and "-    self.model.train()" in emptied.diff


def test_statuses_follow_mutmuts_exit_codes(run: Path) -> None:
    text = survivors_mod.report(run, 25, 30, names_only=True)
    assert "statuses: killed 2, no tests 1, not checked 1, survived 3" in text
    assert "survivors: 3; sampled: 3 (seed 30)" in text
    assert text.startswith("# proj (")


def test_sample_is_seeded_and_takes_all_when_fewer(run: Path) -> None:
    found = survivors_mod.survivors(run)
    assert survivors_mod.sample(found, 25, 1) == found
    many = [survivors_mod.Survivor(f"m.x_f__mutmut_{i}", "m.py", "f", "") for i in range(50)]
    first = survivors_mod.sample(many, 10, 30)
    assert len(first) == 10 and len(set(first)) == 10
    assert first == survivors_mod.sample(many, 10, 30)
    assert first != survivors_mod.sample(many, 10, 31)
    assert first == sorted(first, key=many.index)


def test_a_folder_without_mutmut_results_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert survivors_mod.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no mutants/**/*.py.meta" in err
    assert survivors_mod.main([str(tmp_path), "--sample", "0"]) == 2


def test_wilson_interval_matches_the_formula_and_stays_in_bounds() -> None:
    low, high = survivors_mod.wilson(5, 25)
    assert round(low, 4) == 0.0886 and round(high, 4) == 0.3913
    assert survivors_mod.wilson(0, 25)[0] == 0.0
    assert survivors_mod.wilson(25, 25)[1] == 1.0


def test_labels_summary_counts_and_scales_to_all_survivors(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "project,mutant,label,reason\n"
        "proj,pkg.mod.x_scale__mutmut_1,training gap,default factor\n"
        "proj,pkg.mod.xǁTrainerǁfit__mutmut_1,training gap,one more epoch\n"
        "proj,pkg.mod.xǁTrainerǁfit__mutmut_10,other gap,body emptied\n",
        encoding="utf-8",
    )
    assert survivors_mod.main([str(run), "--labels", str(labels)]) == 0
    row = capsys.readouterr().out.splitlines()[-1]
    # Every survivor read: the estimate is what was seen, whatever the interval says.
    assert row == "| proj | 3 | 3 | other gap 1, training gap 2 | 2/3 (21-94%) | 2 (2-2) |"
    # A killed mutant labelled as a survivor means labels and run differ: refuse.
    with labels.open("a", encoding="utf-8") as handle:
        handle.write("proj,pkg.mod.x_scale__mutmut_2,other gap,killed in fact\n")
    assert survivors_mod.main([str(run), "--labels", str(labels)]) == 2
    assert "not a survivor of this run: pkg.mod.x_scale__mutmut_2" in capsys.readouterr().err
