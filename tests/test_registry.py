"""The registry finds operators by walking the ``mutations`` package, wherever they live."""

from __future__ import annotations

import importlib
import re
import sys
import textwrap
from pathlib import Path

import pytest

import mutations
from mutations.registry import operator_classes, operator_modules
from mutator.operator import Operator

OPERATOR_MODULE = '''
import libcst as cst

from mutator.operator import Operator


class {cls}(Operator):
    """Test operator."""

    name = "{name}"
    category = "gradient"
    summary = "A test operator."
    expected = "silent"
    node_types = (cst.Call,)

    def plan(self, node, ctx):
        return None
'''


@pytest.fixture
def extra_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package ``mutations.extra_ops`` in a temporary folder; ``write(module, name)`` adds
    an operator module to it. The registry cache and imported modules are reset after."""
    package = tmp_path / "extra_ops"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.setattr(mutations, "__path__", [*mutations.__path__, str(tmp_path)])
    importlib.invalidate_caches()
    operator_classes.cache_clear()

    def write(module: str, name: str, cls: str = "ExtraOperator") -> None:
        (package / f"{module}.py").write_text(
            textwrap.dedent(OPERATOR_MODULE.format(cls=cls, name=name))
        )
        importlib.invalidate_caches()

    yield write
    for key in [key for key in sys.modules if key.startswith("mutations.extra_ops")]:
        del sys.modules[key]
    operator_classes.cache_clear()


def test_every_operator_module_under_the_package_is_walked():
    modules = operator_modules()
    assert "mutations.gradient.drop_zero_grad" in modules
    defined = {cls.__module__ for cls in operator_classes().values()}
    assert defined <= set(modules)
    assert all(module.startswith("mutations.") for module in defined)


def test_a_module_added_anywhere_under_the_package_is_discovered(extra_package):
    before = set(operator_classes())
    operator_classes.cache_clear()
    extra_package("nested_op", "zz_added_operator")
    found = operator_classes()
    assert set(found) - before == {"zz_added_operator"}
    assert found["zz_added_operator"].__module__ == "mutations.extra_ops.nested_op"


def test_a_duplicate_operator_name_fails_loudly(extra_package):
    extra_package("copy_of_drop_zero_grad", "drop_zero_grad", cls="DropZeroGradAgain")
    with pytest.raises(TypeError, match="'drop_zero_grad' is defined twice"):
        operator_classes()


def test_a_subclass_outside_the_package_is_not_registered():
    class Throwaway(Operator):
        """Not an operator module's class."""

        name = "zz_throwaway"
        category = "gradient"
        summary = "x"
        expected = "silent"
        node_types = (object,)  # type: ignore[assignment]

    assert "zz_throwaway" not in operator_classes()


def test_a_numeric_parameter_must_declare_its_range():
    import libcst as cst
    import pytest

    from mutator.operator import Operator, Param

    with pytest.raises(TypeError, match="declares no valid range"):

        class Unbounded(Operator):
            name = "unbounded_for_test"
            category = "optim"
            summary = "a strength with no range"
            expected = "degrades"
            node_types = (cst.Float,)
            parameters = {"factor": Param(2.0, "multiplier")}

            def plan(self, node, ctx):
                return None


# "65 operators", "65 mutation operators", "(LibCST, 65 of them": a count written in prose.
_OPERATOR_COUNT = re.compile(
    r"\b(\d+) (?:mutation )?operators\b|\b(\d+) of them in \d+ categories", re.IGNORECASE
)


def test_docs_state_no_operator_count_other_than_the_registrys():
    """Counts in README and docs come from the registry: a number written there must be
    ``len(registry)`` (issue 14: the README said 65 while the CLI listed 64)."""
    root = Path(__file__).resolve().parent.parent
    count = len(operator_classes())
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for match in _OPERATOR_COUNT.finditer(path.read_text(encoding="utf-8")):
            stated = int(match.group(1) or match.group(2))
            assert stated == count, (
                f"{path.name}: says {match.group(0)!r}, the registry has {count}"
            )
