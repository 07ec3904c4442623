"""Training checks for a project's own tests: ``from trainwreck.checks import check_...``.

The implementation lives in ``experiments.checks``; this module is its stable public name
and re-exports exactly its ``__all__`` (one list of names, kept there).
"""

from experiments.checks import *  # noqa: F403
from experiments.checks import __all__ as __all__
