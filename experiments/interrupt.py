"""Ctrl-C and SIGTERM in every trainwreck command: one line, exit 130 (143), no traceback.

``install`` makes SIGINT raise ``KeyboardInterrupt`` and SIGTERM raise ``Terminated`` (a
KeyboardInterrupt), so the one cleanup path every command has for Ctrl-C (end every run,
unlock the cache, remove private folders) also serves ``kill``; ``exit_status`` maps each
to its conventional status.

Except inside an import. Much of a command's life is spent loading native code (numpy,
torch, scikit-learn, lazily, at any point of a command): an exception raised inside such
an import can abort the process (pybind11's ``terminate``) or leave a half-imported module
behind that fails later with an unrelated error. When the signal lands while an import is
on the stack, the process leaves at once with ``os._exit``; its runs end with it (they die
with their parent) and nothing is half-written (result files are written atomically).

A process started as a background job of a non-interactive shell (``cmd &`` in a script,
some CI runners, a test suite started that way) inherits SIGINT *ignored*, and Python then
leaves it ignored: such a trainwreck shrugged off every Ctrl-C and ``kill -INT`` until its
runs' deadlines. trainwreck is a command a person stops on purpose, so both signals are
always taken over, whatever disposition was inherited; only a handler a caller installed
itself (an in-process caller) is left alone, and ``handling`` gives it back afterwards.

A raise can be swallowed or replaced on its way up. Swallowed: a signal that lands in an
at-fork callback, a ``__del__`` or a weakref callback ("Exception ignored in: ...", seen when
Ctrl-C met the runner's fork of a run, logging's at-fork lock release taking the
KeyboardInterrupt). Replaced: a ``finally`` that fails while the KeyboardInterrupt passes
through it raises its own error instead (LibCST 1.9's position metadata does: a Ctrl-C
during ``PositionProvider`` comes out as a ``KeyError`` naming a syntax node, which a
detector's ``except Exception`` then recorded as a crash while ``bench`` went on; seen in
CI). So the handler also remembers the signal; loops that go on for long (the runner's,
the benchmark's, the sweep's) and every ``except Exception`` that keeps a command going
call ``check``, which raises it again, and ``handling`` turns any error that ends a
command after a signal into that signal's exit.

Standard library only: installed before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType

INTERRUPTED = 130  # 128 + SIGINT
TERMINATED = 143  # 128 + SIGTERM
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be, so the same cleanup runs."""


def exit_status(error: BaseException) -> int:
    """The exit status a command ends with after ``error`` (130 or 143)."""
    return TERMINATED if isinstance(error, Terminated) else INTERRUPTED


def _importing(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


_pending: int | None = None  # a signal taken and not yet seen through to the end


def _raise(number: int) -> None:
    raise Terminated if number == signal.SIGTERM else KeyboardInterrupt


def check() -> None:
    """Raise the signal taken earlier whose exception was swallowed on its way."""
    if _pending is not None:
        _raise(_pending)


def _stop(number: int, frame: FrameType | None) -> None:
    global _pending
    _pending = number
    if _importing(frame):
        sys.stderr.write("[trainwreck] interrupted\n")
        sys.stderr.flush()
        os._exit(TERMINATED if number == signal.SIGTERM else INTERRUPTED)
    _raise(number)


# Dispositions nobody chose for this command: Python's own, the default, an inherited
# ignore. Anything else is a caller's handler and stays.
_UNCHOSEN = (signal.default_int_handler, signal.SIG_DFL, signal.SIG_IGN, None, _stop)


def install() -> None:
    """SIGINT and SIGTERM stop the command (see the module docstring). Idempotent."""
    for number in SIGNALS:
        if signal.getsignal(number) in _UNCHOSEN:
            signal.signal(number, _stop)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """``install`` for one command; the dispositions the process had before come back
    afterwards, so an in-process caller (a test) keeps its own. An error that ends the
    command after a signal was taken is that signal's doing: it leaves as the signal's
    KeyboardInterrupt (chained to the error), so the command exits 130 (143), not 1."""
    global _pending
    previous = {number: signal.getsignal(number) for number in SIGNALS}
    _pending = None
    install()
    try:
        yield
    except Exception as error:  # not SystemExit: a command's own exit after a signal stands
        if _pending is None:
            raise
        raise (Terminated() if _pending == signal.SIGTERM else KeyboardInterrupt()) from error
    finally:
        _pending = None
        for number, handler in previous.items():
            if handler is not None:
                signal.signal(number, handler)
