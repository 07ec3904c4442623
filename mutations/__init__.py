"""The operator library: ``mutations/<category>/`` packages, one module per operator or close
family, each package's private analyses in its ``_shared`` module. The registry walks this
package, so an operator placed in any module under it is found."""

from mutations.registry import all_operators, get_operator, operator_classes, resolve

__all__ = ["all_operators", "get_operator", "operator_classes", "resolve"]
