"""The rules, discovered by walking this package: a rule in a new module needs no list."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from experiments.bench.lint.rule import LintRule

_PACKAGE = "experiments.bench.lint"
# Modules of the package that hold machinery, not rules.
_MACHINERY = frozenset({"rule", "script", "facts", "project", "registry", "layers"})


@cache
def rule_classes() -> tuple[type[LintRule], ...]:
    """Every concrete rule class of the package, ordered by code; codes are unique."""
    package = importlib.import_module(_PACKAGE)
    found: dict[str, type[LintRule]] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        if module_info.name in _MACHINERY:
            continue
        module = importlib.import_module(f"{_PACKAGE}.{module_info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, LintRule)
                and value.code
                and value.__module__ == module.__name__
            ):
                if value.code in found and found[value.code] is not value:
                    raise TypeError(
                        f"lint code {value.code} used by {found[value.code].__name__} and {value.__name__}"
                    )
                found[value.code] = value
    return tuple(found[code] for code in sorted(found))


@cache
def rules() -> tuple[LintRule, ...]:
    return tuple(cls() for cls in rule_classes())
