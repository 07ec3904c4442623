"""``trainwreck-lint``: a static LibCST linter for training-loop bugs.

Every rule is a small declared class (``rule.LintRule``) in one of this package's modules,
found by walking the package. Rules are tuned for precision: on the unmutated reference
loops and the style scripts they report nothing (a test enforces it), so a finding is
worth reading. Each rule states its confidence; ``low`` ones (a finding that depends on
data the linter cannot see, such as whether a feature is ever constant) are left out unless
asked for (``trainwreck lint --min-confidence low``). Output is flake8-style:
``path:line:col TW### message``.
"""

from __future__ import annotations

from collections.abc import Iterable

from experiments.bench.api import Finding, ScriptInput, StaticDetector, register
from experiments.bench.lint.registry import rules
from experiments.bench.lint.rule import CONFIDENCES, LintFinding, LintRule
from experiments.bench.lint.script import Script

__all__ = ["DEFAULT_RULES", "RULES", "LintFinding", "LintRule", "TrainwreckLint", "lint_source"]

RULES: tuple[LintRule, ...] = rules()


def rules_at(min_confidence: str) -> tuple[LintRule, ...]:
    """The rules whose confidence is ``min_confidence`` or higher (high > medium > low)."""
    cutoff = CONFIDENCES.index(min_confidence)
    return tuple(rule for rule in RULES if CONFIDENCES.index(rule.confidence) <= cutoff)


DEFAULT_RULES = rules_at("medium")


def lint_source(
    source: str, path: str = "<string>", rules: Iterable[LintRule] = DEFAULT_RULES
) -> list[LintFinding]:
    """All findings for one file, sorted by position; raises MutationError on bad syntax."""
    script = Script(source, path)
    found: dict[tuple[int, int, str], LintFinding] = {}
    for rule in rules:
        for node, message in rule.check(script):
            line, column = script.position(node)
            found.setdefault(
                (line, column, rule.code), LintFinding(path, line, column, rule, message)
            )
    return [found[key] for key in sorted(found)]


@register
class TrainwreckLint(StaticDetector):
    name = "trainwreck-lint"
    summary = "static LibCST rules for training-loop bugs (flake8-style TW### codes)"
    timeout_s = 30.0

    def check_source(self, script: ScriptInput) -> list[Finding]:
        return [finding.to_finding() for finding in lint_source(script.source, script.path)]
