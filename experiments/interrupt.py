"""Ctrl-C in ``python -m experiments.run``: one line, exit 130, no traceback.

Until the first run can start, nothing has been written and the process is mostly loading
native code (numpy, torch, scikit-learn): a KeyboardInterrupt raised inside such an import
can abort the process (pybind11's ``terminate``) or leave a half-imported module behind
that fails later with an unrelated error. So ``while_loading`` makes Ctrl-C leave at once
with ``os._exit(130)``; ``ready`` (called by the runner once the warm parent has imported
everything) puts the usual KeyboardInterrupt back, on which the runner ends every run it
started. Standard library only: installed before anything heavy is imported.
"""

from __future__ import annotations

import os
import signal
import sys


def _leave(*_: object) -> None:
    sys.stderr.write("[trainwreck] interrupted\n")
    sys.stderr.flush()
    os._exit(130)


def while_loading() -> None:
    """Ctrl-C exits at once (only where Python's own handler is still in place)."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _leave)


def ready() -> None:
    """Back to KeyboardInterrupt, if ``while_loading`` installed its handler."""
    if signal.getsignal(signal.SIGINT) is _leave:
        signal.signal(signal.SIGINT, signal.default_int_handler)
