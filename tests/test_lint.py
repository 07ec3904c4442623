"""trainwreck-lint: the classic interview loop, zero false positives on correct code,
every rule's own valid/invalid examples, and the command's exit statuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.bench.cli import lint_main
from experiments.bench.lint import RULES, LintRule, lint_source
from experiments.bench.lint.rule import example_source, marked_lines
from experiments.loops import loop_paths

ROOT = Path(__file__).resolve().parent.parent
LOOPS = loop_paths()
STYLES = sorted((ROOT / "tests" / "styles").glob("*.py"))

# The "debug this training loop" interview question, written out as a runnable-looking
# script: a 10-class classifier moved to a device, trained with five bugs in it.
INTERVIEW_LOOP = """\
import torch
import torch.nn as nn
import torch.optim as optim

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class DigitNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, num_classes))

    def forward(self, x):
        return self.body(x)


model = DigitNet().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.MSELoss()

for epoch in range(10):
    for x, y in train_loader:
        pred = model(x)
        loss = criterion(pred, y)
        loss.backward()
        optimizer.step()
        if epoch % 2 == 0:
            model.eval()
            val_pred = model(x_val)
            val_loss = criterion(val_pred, y_val)
            print(f"epoch {epoch} val loss {val_loss.item():.3f} acc {(val_pred.argmax(1) == y_val).float().mean():.3f}")
"""

CLASSIC_FIVE = {
    "TW101": 25,  # missing zero_grad: reported at the backward() it lets accumulate
    "TW303": 24,  # MSE on a classification target
    "TW201": 28,  # eval() in the training loop, never train() again
    "TW203": 29,  # the eval forward builds a graph (no torch.no_grad())
    "TW401": 22,  # x and y never moved to the device the model is on
}


def codes(source: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for finding in lint_source(source, "t.py"):
        found.setdefault(finding.rule.code, []).append(finding.line)
    return found


def test_the_interview_loop_has_its_five_classic_bugs_found():
    found = codes(INTERVIEW_LOOP)
    for code, line in CLASSIC_FIVE.items():
        assert line in found.get(code, []), f"{code} not reported at line {line}: {found}"
    assert set(found) == set(CLASSIC_FIVE), f"unexpected extra findings: {found}"


def test_the_fixed_interview_loop_is_clean():
    fixed = (
        INTERVIEW_LOOP.replace("nn.MSELoss()", "nn.CrossEntropyLoss()")
        .replace(
            "        pred = model(x)\n",
            "        x, y = x.to(device), y.to(device)\n        optimizer.zero_grad()\n        pred = model(x)\n",
        )
        .replace(
            "            val_pred = model(x_val)\n",
            "            with torch.no_grad():\n                val_pred = model(x_val)\n",
        )
        .replace('.float().mean():.3f}")\n', '.float().mean():.3f}")\n            model.train()\n')
    )
    assert codes(fixed) == {}


def _correct_scripts():
    return [pytest.param(path, id=path.name) for path in LOOPS + STYLES]


@pytest.mark.parametrize("path", list(_correct_scripts()))
def test_no_false_positives_on_correct_scripts(path: Path):
    findings = lint_source(path.read_text(encoding="utf-8"), str(path))
    assert [f.format() for f in findings] == []


def test_the_zero_false_positive_check_has_its_inputs():
    # An empty parametrisation would skip the check above silently: fail instead.
    assert len(LOOPS) >= 5, f"only {len(LOOPS)} reference loops found"
    assert len(STYLES) >= 3, f"only {len(STYLES)} style scripts found"


# -- every rule's own examples ---------------------------------------------------------------


def _examples(kind: str) -> list:
    return [
        pytest.param(rule, example, id=f"{rule.code}-{kind}{index}")
        for rule in RULES
        for index, example in enumerate(getattr(rule, kind))
    ]


@pytest.mark.parametrize(("rule", "example"), _examples("invalid"))
def test_invalid_example_is_reported_on_its_marked_lines(rule: LintRule, example: str):
    source = example_source(example)
    marked = marked_lines(example)
    found = lint_source(source, "example.py", RULES)  # every rule, low confidence too
    assert [f.line for f in found if f.rule is rule] == marked
    on_marked = {f.rule.code for f in found if f.line in marked}
    assert on_marked == {rule.code}, f"other rules fire on the marked line: {on_marked}"


@pytest.mark.parametrize(("rule", "example"), _examples("valid"))
def test_valid_example_is_left_alone(rule: LintRule, example: str):
    found = lint_source(example_source(example), "example.py", [rule])
    assert [f.format() for f in found] == []


def test_every_code_of_the_linter_is_still_there():
    # Users filter on these codes (--select, noqa habits): none may vanish or be renumbered.
    expected = {f"TW1{n:02d}" for n in range(1, 22)} | {f"TW20{n}" for n in range(1, 6)}
    expected |= {f"TW30{n}" for n in range(1, 9)} | {"TW401", "TW402", "TW403"}
    expected |= {f"TW50{n}" for n in range(1, 9)}
    expected |= {f"TW60{n}" for n in range(1, 8)} | {f"TW70{n}" for n in range(1, 8)}
    expected |= {"TW801", "TW802"}
    expected |= {"TW206", "TW309", "TW608", "TW609", "TW610"}  # lint-b
    assert {rule.code for rule in RULES} == expected
    assert len(expected) == 66


def test_every_rule_class_of_the_package_is_registered():
    import importlib
    import pkgutil

    import experiments.bench.lint as package

    declared = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        declared |= {
            value
            for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, LintRule) and value.code
        }
    assert declared == {type(rule) for rule in RULES}


def test_a_rule_without_examples_is_refused_at_class_creation():
    with pytest.raises(TypeError, match="valid and one invalid example"):

        class Bare(LintRule):  # defining it is the test
            """Doc."""

            code = "TW999"
            category = "gradient"
            summary = "bare"


def test_every_rule_has_a_code_category_and_unique_code():
    from mutator.operator import CATEGORIES

    assert len({rule.code for rule in RULES}) == len(RULES)
    assert all(rule.category in CATEGORIES and rule.code.startswith("TW") for rule in RULES)


def test_rule_operator_names_exist_in_the_registry():
    from mutations.registry import operator_classes

    known = set(operator_classes())
    targeted = {name for rule in RULES for name in rule.operators}
    assert targeted <= known, f"rules target unknown operators: {sorted(targeted - known)}"


def test_command_exit_statuses(tmp_path: Path, capsys):
    buggy = tmp_path / "buggy.py"
    buggy.write_text(INTERVIEW_LOOP)
    clean = tmp_path / "clean.py"
    clean.write_text("x = 1\n")
    assert lint_main([str(buggy)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"{buggy}:25:") and " TW101 " in line for line in out), out
    assert all(line.split(" ")[1].startswith("TW") for line in out)
    assert lint_main([str(clean)]) == 0
    assert lint_main([str(tmp_path / "missing.py")]) == 2
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    assert lint_main([str(broken)]) == 2
    assert "syntax error" in capsys.readouterr().err
    assert lint_main([]) == 2
    assert lint_main(["--select", "TW1", str(buggy)]) == 1
    assert all(" TW1" in line for line in capsys.readouterr().out.splitlines())
    assert lint_main(["--select", "ZZ9", str(buggy)]) == 2
    assert lint_main(["--list-rules", "--select", "TW10"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split()[:3] == ["TW101", "gradient", "high"] and len(listed) == 9


TRAIN_WITH_IMPORTED_MODEL = """\
import torch.nn.functional as F
from model import Net

model = Net()
for data, target in loader:
    output = model(data)
    loss = F.nll_loss(output, target)
"""
MODEL_FILE = """\
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def forward(self, x):
        x = self.fc(x)
        return {end}
"""


@pytest.mark.parametrize(
    ("end", "expected"), [("F.log_softmax(x, dim=1)", []), ("x", ["TW302"])], ids=["log", "raw"]
)
def test_nll_reads_the_forward_of_a_model_defined_in_another_file(tmp_path: Path, end, expected):
    (tmp_path / "model.py").write_text(MODEL_FILE.format(end=end))
    train = tmp_path / "train.py"
    train.write_text(TRAIN_WITH_IMPORTED_MODEL)
    found = lint_source(train.read_text(), str(train))
    assert [(f.rule.code, f.line) for f in found] == [(code, 7) for code in expected]


def test_low_confidence_rules_only_on_request(capsys):
    from experiments.bench.cli import lint_main
    from experiments.bench.lint import DEFAULT_RULES

    low = {rule.code for rule in RULES if rule.confidence == "low"}
    assert "TW606" in low and not low & {rule.code for rule in DEFAULT_RULES}
    script = str(ROOT / "tests" / "styles" / "manual_sgd_regression.py")
    assert lint_main([script]) == 0  # silent by default: the data decides, not the code
    assert lint_main(["--min-confidence", "low", script]) == 1
    assert "TW606" in capsys.readouterr().out
