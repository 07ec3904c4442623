"""Finds every operator class: every module under the ``mutations`` package, plus entry points.

Operators live in ``mutations/<category>/`` packages, one module per operator or close
family; the registry imports every module it finds walking the package, so an operator
moved or added anywhere under it is registered, and two operators with one name fail loudly.

Third-party packages add operators through the ``trainwreck.operators`` entry-point
group (each entry point names a module; importing it defines Operator subclasses).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from mutator.operator import CATEGORIES, Operator

PACKAGE = "mutations"


def operator_modules() -> list[str]:
    """Every module under the ``mutations`` package (imported, so its classes exist)."""
    package = importlib.import_module(PACKAGE)
    found = []
    for info in pkgutil.walk_packages(package.__path__, f"{PACKAGE}."):
        importlib.import_module(info.name)
        found.append(info.name)
    return found


def _subclasses(base: type) -> list[type]:
    found = []
    for sub in base.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


@cache
def operator_classes() -> dict[str, type[Operator]]:
    """name -> class, for every registered operator, in category order then name."""
    modules = set(operator_modules())
    for entry in entry_points(group="trainwreck.operators"):
        modules.add(entry.load().__name__)
    by_name: dict[str, type[Operator]] = {}
    for cls in _subclasses(Operator):
        # Only classes defined in operator modules count: a test's throwaway subclass does not.
        if not cls.name or cls.__module__ not in modules:
            continue
        if cls.name in by_name and by_name[cls.name] is not cls:
            raise TypeError(
                f"operator name {cls.name!r} is defined twice: in {by_name[cls.name].__module__} "
                f"and {cls.__module__}"
            )
        by_name[cls.name] = cls
    order = {category: index for index, category in enumerate(CATEGORIES)}
    return dict(sorted(by_name.items(), key=lambda kv: (order[kv[1].category], kv[0])))


def get_operator(name: str, **params: Any) -> Operator:
    """An operator instance by name; unknown names suggest close matches."""
    classes = operator_classes()
    if name not in classes:
        close = difflib.get_close_matches(name, list(classes), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see `trainwreck operators`"
        raise KeyError(f"unknown operator {name!r}{hint}")
    return classes[name](**params)


def all_operators(category: str | None = None) -> list[Operator]:
    """One instance (default parameters) of every operator, optionally of one category."""
    return [
        cls() for cls in operator_classes().values() if category is None or cls.category == category
    ]


def all_variants(category: str | None = None) -> list[Operator]:
    """Every operator with defaults, plus each of its declared variants."""
    result = []
    for cls in operator_classes().values():
        if category is not None and cls.category != category:
            continue
        result.append(cls())
        result.extend(cls(**variant) for variant in cls.variants)
    return result


def resolve(spec: str) -> Operator:
    """Parse ``name`` or ``name(key=value,...)`` / ``name:key=value,...`` into an instance."""
    spec = spec.strip()
    name, _, rest = spec.partition("(") if "(" in spec else spec.partition(":")
    rest = rest.rstrip(")")
    params: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, raw = item.partition("=")
        if not eq:
            raise ValueError(f"bad operator parameter {item!r} in {spec!r} (expected key=value)")
        params[key.strip()] = _literal(raw.strip())
    return get_operator(name.strip(), **params)


def _literal(raw: str) -> Any:
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    if raw in ("true", "True"):
        return True
    if raw in ("false", "False"):
        return False
    return raw.strip("'\"")
