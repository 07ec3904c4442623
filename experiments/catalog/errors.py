"""The catalog commands' user error (one line, exit 2; see ``cli_support.UserError``)."""

from __future__ import annotations

from experiments.cli_support import UserError


class CatalogError(UserError):
    """A user mistake (unknown profile/loop, bad override): one line, exit 2."""
