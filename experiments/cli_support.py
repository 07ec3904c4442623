"""What every ``trainwreck`` command shares: the user-error type, an argparse parser that
raises it, and the guard that turns it into one line on stderr and exit status 2.

Domain errors (``QuizError``, ``CatalogError``) subclass ``UserError``, so one guard
reports them all the same way and never prints a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from experiments import interrupt

USAGE_ERROR = 2

_Argv = TypeVar("_Argv", bound=Sequence[str] | None)


class UserError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are UserErrors (one line, exit 2, no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(message)


def guarded(prog: str, command: Callable[[_Argv], int], argv: _Argv) -> int:
    """Run ``command(argv)``; a UserError becomes ``PROG: error: ...`` and exit 2, Ctrl-C
    exit 130 and SIGTERM 143 (``experiments.interrupt``), a closed pipe (``| head``) a
    quiet 0."""
    try:
        with interrupt.handling():
            return command(argv)
    except UserError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except PermissionError as error:
        from experiments.files import permission_message

        print(f"{prog}: error: {permission_message(error)}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt as error:
        print(f"{prog}: interrupted", file=sys.stderr)
        return interrupt.exit_status(error)
    except BrokenPipeError:
        return 0
