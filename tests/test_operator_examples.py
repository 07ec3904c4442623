"""Every registered operator's examples and non-examples, turned into tests."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from mutations.registry import operator_classes
from mutator import SourceFile
from mutator.operator import DOC_SECTIONS, Example, Operator, Swap
from mutator.semantics import is_call_statement

CLASSES = operator_classes()
EXAMPLES = [
    pytest.param(cls, index, id=f"{name}-example{index}")
    for name, cls in CLASSES.items()
    for index in range(len(cls.examples))
]
NON_EXAMPLES = [
    pytest.param(cls, index, id=f"{name}-non_example{index}")
    for name, cls in CLASSES.items()
    for index in range(len(cls.non_examples))
]


@pytest.mark.parametrize(("cls", "index"), EXAMPLES)
def test_example_rewrites_exactly(cls, index):
    example = cls.examples[index]
    source = SourceFile(example.before, "example.py")
    sites = source.find_sites([cls(**example.params)])
    assert len(sites) == 1, f"expected one site, found {[s.identity for s in sites]}"
    mutant = source.apply(sites)
    assert mutant.source == example.after, mutant.diff


@pytest.mark.parametrize(("cls", "index"), NON_EXAMPLES)
def test_non_example_has_no_site(cls, index):
    source = SourceFile(cls.non_examples[index], "non_example.py")
    assert [site.identity for site in source.find_sites([cls()])] == []


@pytest.mark.parametrize("cls", list(CLASSES.values()), ids=list(CLASSES))
def test_operator_is_documented(cls):
    sections = cls.doc_sections()
    assert tuple(sections) == DOC_SECTIONS, (
        f"docstring sections {list(sections)}: write 'Bug: ... Impact: ... Fix: ... Check: ...'"
    )
    for section, text in sections.items():
        assert len(text.split()) >= 2, f"the {section} section is empty: {text!r}"
    assert len(cls.doc().split()) >= 40, "docstring must explain bug, impact, fix and check"
    assert cls.examples, "at least one example"
    assert cls.non_examples, "at least one non-example"
    for variant in cls.variants:
        cls(**variant)  # declared variants are valid parameter sets


def test_doc_sections_are_parsed_in_order_and_a_missing_one_shows():
    class Documented(Operator):
        """Title line.

        Bug: the bug text. Impact: what
        it does. Fix: the fix. Check: how to see it.
        """

    class Partial(Operator):
        """Title. Bug: only a bug. Check: and a check."""

    assert Documented.doc_sections() == {
        "Bug": "the bug text.",
        "Impact": "what it does.",
        "Fix": "the fix.",
        "Check": "how to see it.",
    }
    assert tuple(Partial.doc_sections()) != DOC_SECTIONS


def test_the_readme_operator_recipe_works():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Writing an operator", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {"cst": cst, "Swap": Swap, "Example": Example}
    namespace["is_call_statement"] = is_call_statement
    exec(code, namespace)
    cls = namespace["DropZeroGrad"]
    (example,) = cls.examples
    source = SourceFile(example.before, "readme.py")
    sites = source.find_sites([cls()])
    assert len(sites) == 1 and source.apply(sites).source == example.after
    for text in cls.non_examples:
        assert SourceFile(text, "readme.py").find_sites([cls()]) == []
