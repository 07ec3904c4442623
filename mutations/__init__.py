"""The operator library: one module per category, one small class per bug."""

from mutations.registry import all_operators, get_operator, operator_classes, resolve

__all__ = ["all_operators", "get_operator", "operator_classes", "resolve"]
