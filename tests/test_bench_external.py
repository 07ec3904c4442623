"""Third-party adapters: output parsing (fast, no tools needed) and, marked slow, the real
tools when their venvs exist (they are never installed by the tests)."""

from __future__ import annotations

import json

import pytest
from test_lint import CLASSIC_FIVE, INTERVIEW_LOOP

from experiments.bench.api import GarbageOutput, ScriptInput
from experiments.bench.external import (
    TOOLS,
    ToolOutput,
    Torcheck,
    TorchFix,
    TrainCheck,
    parse_torcheck,
    parse_torchfix,
)

TORCHFIX_OUTPUT = (
    "loop.py:20:5: TOR102 [*] `torch.load` without `weights_only` parameter is unsafe.\n"
    "loop.py:21:5: TOR001 Use of removed function torch.solve\n"
    "--- /tmp/loop.py\n+++ /tmp/loop.py\n@@ -20 +20 @@\n"
)


def test_torchfix_output_is_parsed_from_its_report_lines():
    findings = parse_torchfix(
        ToolOutput(TORCHFIX_OUTPUT, "Finished checking 1 files.\n", 0), "x/loop.py"
    )
    assert [(f.rule, f.line, f.category) for f in findings] == [
        ("TOR102", 20, "checkpoint"),
        ("TOR001", 21, "unknown"),
    ]


def test_torchfix_without_its_closing_line_is_garbage():
    with pytest.raises(GarbageOutput):
        parse_torchfix(ToolOutput("Traceback (most recent call last):\n", "", 1), "loop.py")


def test_torcheck_records_are_parsed_with_their_step():
    lines = [
        json.dumps(
            {
                "kind": "finding",
                "step": 3,
                "message": "The following errors...\nparam[0.0] (2, 4) should change.",
            }
        ),
        json.dumps({"kind": "end", "status": "stopped", "steps": 3}),
    ]
    [finding] = parse_torcheck(lines)
    assert (finding.category, finding.step, finding.rule) == ("gradient", 3, "params_should_change")
    nan = json.dumps({"kind": "finding", "step": 9, "message": "x contains NaN."})
    assert parse_torcheck([nan, lines[1]])[0].category == "numerics"
    with pytest.raises(GarbageOutput):
        parse_torcheck(["not json", lines[1]])
    with pytest.raises(GarbageOutput, match="no end record"):
        parse_torcheck(lines[:1])


def test_missing_tools_report_unavailable_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINWRECK_TOOLS", str(tmp_path))
    assert "not installed" in TorchFix().unavailable()
    assert "bench install-tool torcheck" in Torcheck().unavailable()
    assert "not installed" in TrainCheck().unavailable()


def test_traincheck_says_exactly_why_it_cannot_run_even_when_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINWRECK_TOOLS", str(tmp_path))
    program = TOOLS["traincheck"].program("traincheck-collect")
    program.parent.mkdir(parents=True)
    program.write_text("")
    reason = TrainCheck().unavailable()
    assert "from __future__" in reason and "traincheck-infer" in reason


# The interview loop plus one line TorchFix does know (TOR102): the positive control that
# makes "TorchFix sees none of the five bugs" mean something (an adapter returning [] fails).
INTERVIEW_WITH_UNSAFE_LOAD = INTERVIEW_LOOP + 'state = torch.load("ckpt.pt")\n'
UNSAFE_LOAD_LINE = INTERVIEW_WITH_UNSAFE_LOAD.count("\n")
# torchfix 0.7.0 --select ALL output for it, in the tool's format (stdout, stderr, exit 1).
RECORDED_INTERVIEW_OUTPUT = ToolOutput(
    f"interview.py:{UNSAFE_LOAD_LINE}:9: TOR102 [*] `torch.load` without `weights_only`"
    " parameter is unsafe. Explicitly set `weights_only` to False only if you trust the data"
    " you load and full pickle functionality is needed, otherwise set `weights_only=True`.\n",
    "Finished checking 1 files.\n[*] 1 violations are fixable, run with --fix\n",
    1,
)


def _assert_torchfix_verdict_on_the_interview_loop(findings) -> None:
    flagged = {(finding.rule, finding.line) for finding in findings}
    assert ("TOR102", UNSAFE_LOAD_LINE) in flagged, f"positive control missed: {flagged}"
    assert not {line for _, line in flagged} & set(CLASSIC_FIVE.values())


def test_torchfix_adapter_reports_the_control_and_none_of_the_interview_bugs(monkeypatch):
    import experiments.bench.external as external

    seen = []

    def recorded(argv, cwd, timeout):
        seen.append((cwd / argv[-1]).read_text(encoding="utf-8"))
        return RECORDED_INTERVIEW_OUTPUT

    monkeypatch.setattr(external, "run_tool", recorded)
    findings = TorchFix().detect(ScriptInput(INTERVIEW_WITH_UNSAFE_LOAD, "x/interview.py"))
    assert seen == [INTERVIEW_WITH_UNSAFE_LOAD]
    _assert_torchfix_verdict_on_the_interview_loop(findings)


@pytest.mark.slow
def test_torchfix_sees_none_of_the_interview_bugs():
    detector = TorchFix()
    if detector.unavailable():
        pytest.skip(detector.unavailable())
    findings = detector.detect(ScriptInput(INTERVIEW_WITH_UNSAFE_LOAD, "interview.py"))
    _assert_torchfix_verdict_on_the_interview_loop(findings)


TINY_FROZEN = """\
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
for step in range(5):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.step()
"""


@pytest.mark.slow
def test_torcheck_fires_when_parameters_never_change():
    detector = Torcheck(max_steps=20)
    if detector.unavailable():
        pytest.skip(detector.unavailable())
    findings = detector.detect(ScriptInput(TINY_FROZEN, "frozen.py"))
    assert findings and findings[0].step == 1 and findings[0].category == "gradient"
    healthy = TINY_FROZEN.replace("    opt.step()", "    loss.backward()\n    opt.step()")
    assert detector.detect(ScriptInput(healthy, "healthy.py")) == []
