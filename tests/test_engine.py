"""The engine: sites, identities, pragma, parameters, higher-order mutants, diffs."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from mutations.registry import get_operator, operator_classes, resolve
from mutator import Example, MutationError, Operator, Param, SourceFile, Swap, choose_higher_order
from mutator.context import Context
from mutator.semantics import find_arg, number_value
from mutator.semantics import resolve as resolve_name

LOOP = """\
import torch


def helper():
    return 1


def train(model, opt, loader):
    for x, y in loader:
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()


class Trainer:
    def step(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
"""


class ScaleConstant(Swap):
    """Multiply a ``lr=`` keyword literal. A throwaway operator for engine tests: it is defined
    outside the operator modules, so the registry never lists it. Fix: none. Check: none; it only
    exercises declared parameters, labels and identities in the engine's own tests here."""

    name = "test_scale_constant"
    category = "optim"
    summary = "test operator"
    expected = "degrades"
    node_types = (cst.Arg,)
    parameters = {"factor": Param(10.0, "multiplier", valid="(0, inf)")}

    def swap(self, node, ctx: Context):
        if node.keyword is None or node.keyword.value != "lr":
            return None
        value = number_value(node.value)
        if value is None:
            return None
        return node.with_changes(value=cst.Float(repr(value * self.params["factor"])))


def identities(source: str, *names: str) -> list[str]:
    operators = [get_operator(name) for name in names]
    return [site.identity for site in SourceFile(source, "loop.py").find_sites(operators)]


def test_identity_counts_sites_per_operator_inside_each_function():
    assert identities(LOOP, "drop_zero_grad") == [
        "loop.py::train::drop_zero_grad#0",
        "loop.py::train::drop_zero_grad#1",
        "loop.py::Trainer.step::drop_zero_grad#0",
    ]


def test_identity_is_stable_when_an_unrelated_function_changes():
    edited = LOOP.replace(
        "def helper():\n    return 1\n",
        "def helper():\n    a = 1\n    b = 2\n    return a + b\n\n\ndef more():\n    pass\n",
    )
    assert identities(edited, "drop_zero_grad") == identities(LOOP, "drop_zero_grad")


def test_mutant_sha_and_diff_describe_the_change():
    source = SourceFile(LOOP, "loop.py")
    site = source.find_sites([get_operator("drop_zero_grad")])[0]
    mutant = source.apply([site])
    assert "opt.zero_grad()" in LOOP.splitlines()[9]
    assert mutant.lines == (10,)
    assert mutant.source.count("opt.zero_grad()") == 1
    assert len(mutant.sha256) == 64
    assert mutant.diff.startswith("--- a/loop.py\n+++ b/loop.py\n")
    assert "-        opt.zero_grad()" in mutant.diff
    assert source.source == LOOP, "the original is never modified"


def test_removing_the_only_statement_keeps_the_block_valid():
    source = SourceFile("for x in xs:\n    opt.zero_grad()\n", "t.py")
    mutant = source.apply(source.find_sites([get_operator("drop_zero_grad")]))
    assert mutant.source == "for x in xs:\n    pass\n"


def test_an_edit_inside_an_elif_branch_keeps_the_elif():
    source = SourceFile(
        "if a:\n    pass\nelif b:\n    opt.zero_grad()\n    loss.backward()\nelse:\n    pass\n",
        "t.py",
    )
    sites = source.find_sites([get_operator("drop_zero_grad")])
    mutant = source.apply(sites)
    assert mutant.source == "if a:\n    pass\nelif b:\n    loss.backward()\nelse:\n    pass\n"
    assert mutant.source == source.render_whole_module(sites)


def test_pragma_excludes_a_line():
    skipped = LOOP.replace(
        "        opt.zero_grad()\n        loss",
        "        opt.zero_grad()  # trainwreck: skip\n        loss",
    )
    assert identities(skipped, "drop_zero_grad") == [
        # ordinals do not shift when a site is skipped: identities stay comparable
        "loop.py::train::drop_zero_grad#1",
        "loop.py::Trainer.step::drop_zero_grad#0",
    ]


def test_parameters_default_label_and_validation():
    default = ScaleConstant()
    assert default.params == {"factor": 10.0} and default.label == "test_scale_constant"
    scaled = ScaleConstant(factor=0.5)
    assert scaled.label == "test_scale_constant(factor=0.5)"
    source = SourceFile("opt = SGD(p, lr=0.1)\n", "t.py")
    mutant = source.apply(source.find_sites([scaled]))
    assert mutant.source == "opt = SGD(p, lr=0.05)\n"
    assert mutant.identity == "t.py::<module>::test_scale_constant(factor=0.5)#0"
    with pytest.raises(ValueError, match="no parameter 'fator'"):
        ScaleConstant(fator=2)
    with pytest.raises(ValueError, match="must be float"):
        ScaleConstant(factor="big")


def test_resolve_parses_parameters_and_suggests_names():
    with pytest.raises(KeyError, match="did you mean drop_zero_grad"):
        resolve("drop_zero_gard")
    assert resolve("drop_zero_grad").label == "drop_zero_grad"


def test_registry_ignores_operators_defined_outside_operator_modules():
    assert "test_scale_constant" not in operator_classes()


def test_higher_order_sites_are_distinct_operators_without_overlap_and_reproducible():
    source = SourceFile(LOOP, "loop.py")
    operators = [get_operator("drop_zero_grad"), get_operator("zero_grad_after_backward")]
    sites = source.find_sites(operators)
    groups = choose_higher_order(sites, 2, count=5, seed=3)
    assert groups, "the loop has compatible pairs"
    assert groups == choose_higher_order(sites, 2, count=5, seed=3)
    for group in groups:
        assert len({site.operator.name for site in group}) == 2
        assert not group[0].overlaps(group[1])
        mutant = source.apply(group)
        assert mutant.identity == "+".join(site.identity for site in group)
        assert mutant.parts == tuple(site.identity for site in group)
        compile(mutant.source, "m", "exec")


def test_overlapping_sites_are_refused():
    source = SourceFile(LOOP, "loop.py")
    drop, move = (
        source.find_sites([get_operator(name)])[0]
        for name in ("drop_zero_grad", "zero_grad_after_backward")
    )
    assert drop.overlaps(move)  # both touch the first zero_grad line
    with pytest.raises(MutationError, match="overlap"):
        source.apply([drop, move])


def test_higher_order_order_is_bounded():
    with pytest.raises(MutationError, match="between 2 and 5"):
        choose_higher_order([], 6, 1, 0)


def test_syntax_error_names_the_location():
    with pytest.raises(MutationError, match=r"bad\.py:2:\d+: syntax error"):
        SourceFile("x = 1\ny = (\n", "bad.py")


def test_find_arg_by_keyword_and_position():
    call = cst.parse_expression("f(a, b, lr=3)")
    assert find_arg(call, keyword="lr").value.value == "3"
    assert find_arg(call, position=1).value.value == "b"
    assert find_arg(call, keyword="momentum") is None


def test_windowed_diff_equals_difflib_on_random_edits():
    import difflib
    import random

    from mutator.diff import unified_diff as _diff

    rng = random.Random(1)
    base = [f"line {i}\n" for i in range(120)]
    for trial in range(300):
        new = list(base)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(new))
            kind = rng.choice("dir")
            if kind == "d":
                del new[i]
            elif kind == "i":
                new.insert(i, f"inserted {trial}\n")
            else:
                new[i] = f"replaced {trial}\n"
        if new == base:
            continue
        expected = "".join(difflib.unified_diff(base, new, "a/t.py", "b/t.py"))
        assert _diff("".join(base), "".join(new), "t.py")[0] == expected


def test_import_aliases_resolve_to_qualified_names():
    source = SourceFile(
        "import torch\nimport torch.nn as nn\nfrom torch.nn import functional as F\n"
        "from torch.optim import Adam as A\nx = nn.CrossEntropyLoss()\ny = F.cross_entropy\n"
        "z = A\nw = torch.optim.SGD\nv = len\ncriterion = 1\nu = criterion\n",
        "t.py",
    )
    ctx = source.context
    values = [a.value for a in ctx.nodes(cst.Assign)]
    names = [resolve_name(v, ctx, strict=False).names for v in values]
    assert names == [
        {"torch.nn.CrossEntropyLoss"},
        {"torch.nn.functional.cross_entropy"},
        {"torch.optim.Adam"},
        {"torch.optim.SGD"},
        {"builtins.len"},
        set(),
        set(),
    ]


class DropLrKeyword(Operator):
    """Remove an ``lr=`` keyword, written with ``plan`` alone. A throwaway operator for the
    engine's tests (outside the operator modules, so never registered). Fix: none. Check:
    none; it only shows a multi-node-capable ``plan`` and that it runs once per candidate."""

    name = "test_drop_lr_keyword"
    category = "optim"
    summary = "test operator"
    expected = "degrades"
    node_types = (cst.Call,)

    calls = 0

    def plan(self, node, ctx: Context):
        DropLrKeyword.calls += 1
        arg = find_arg(node, keyword="lr")
        if arg is None:
            return None
        args = [a for a in node.args if a is not arg]
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return {node: node.with_changes(args=args)}


def test_plan_is_called_once_per_candidate_node():
    source = SourceFile("opt = SGD(p, lr=0.1)\nsched = Step(opt, 3)\n", "t.py")
    DropLrKeyword.calls = 0
    sites = source.find_sites([DropLrKeyword()])
    assert DropLrKeyword.calls == len(source.context.nodes(cst.Call)) == 2
    assert [site.identity for site in sites] == ["t.py::<module>::test_drop_lr_keyword#0"]
    assert source.apply(sites).source == "opt = SGD(p)\nsched = Step(opt, 3)\n"


def test_an_operator_still_defining_match_or_rewrite_is_rejected_at_class_creation():
    with pytest.raises(TypeError, match="match, rewrite is no longer called; implement plan"):

        class Legacy(Operator):
            def match(self, node, ctx):
                return True

            def rewrite(self, node, ctx):
                return node


def test_examples_and_non_examples_may_be_indented_blocks():
    class Indented(Swap):
        """Throwaway (no ``name``: never registered)."""

        examples = (
            Example(
                before="""
                    x = f(lr=0.1)
                    if x:
                        y = 2
                """,
                after="x = 1\n",
            ),
        )
        non_examples = (
            """
            z = 3
            """,
        )

        def swap(self, node, ctx):
            return None

    assert Indented.examples[0].before == "x = f(lr=0.1)\nif x:\n    y = 2\n"
    assert Indented.examples[0].after == "x = 1\n"
    assert Indented.non_examples == ("z = 3\n",)


def test_no_part_of_the_engine_imports_the_engine_back():
    """The site type lives in ``mutator.site``: the gate and the higher-order draw read it
    there, so no module the engine imports imports the engine (not even for type hints,
    where the circle hid from the import-graph test; issue 29)."""
    root = Path(__file__).resolve().parent.parent / "mutator"
    back = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts in (("__init__.py",), ("engine.py",)):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "mutator.engine":
                back.append(str(path.relative_to(root)))
    assert back == []


def test_a_removed_statement_leaves_its_blank_and_comment_lines_where_they_were():
    """The mutant's changed line is the statement's, never the blank line above it: a
    runner that picks the tests covering a changed line ran every test for a blank one
    (issue 30). A comment above a block's last statement stays too, in the block."""
    text = (
        "def train(model, opt, loader):\n"
        "    for x in loader:\n"
        "        opt.zero_grad()\n"
        "        loss = model(x).sum()\n"
        "\n"
        "        loss.backward()\n"
        "\n"
        "        # update\n"
        "        opt.step()\n"
        "    return model\n"
    )
    source = SourceFile(text, "t.py")
    for name, line in (("drop_backward", 6), ("drop_optimizer_step", 9)):
        (site,) = source.find_sites([get_operator(name)])
        mutant = source.apply([site])
        assert mutant.lines == (line,)
        kept = text.splitlines(keepends=True)
        assert mutant.source == "".join(kept[: line - 1] + kept[line:])
        assert source.render_whole_module([site]) == mutant.source
