"""How a run's status is decided. The rules, in the order they apply:

The parent decides first, because it knows why it killed a process:

1. ``timeout``: the parent killed the run's process group at its deadline.
2. ``oom``: the parent killed it because its resident memory passed the cap.

Then the child's own end record, written when the script returned, raised or exited:

3. ``oom``: ``MemoryError`` (the address-space cap on CPU makes a runaway allocation
   raise it), or an exception whose message says an allocation failed (torch's
   "can't allocate memory", "CUDA out of memory", ``torch.OutOfMemoryError``).
4. ``invalid``: the run says nothing about the bug: the source does not compile, or the
   script stopped on purpose (cleanly, or by ``SystemExit`` with any code, e.g. an
   argparse error) before any ``backward()``, optimizer step or training loss. Also a
   run that could not start (the engine could not build the mutant, the script is missing).
5. ``crash``: any other exception, before or after training started (a mutant that
   fails at its first forward is a crash, the most common symptom of all), including
   ``SystemExit`` with a nonzero code after training started; ``exc_type`` is the
   exception's class name.
6. ``nan``: the script ended normally but some loss (a ``backward()`` loss or a
   training ``loss_fn``) was NaN or infinite; the run may have gone on after it.
7. ``ok``: it ended normally, trained, and every loss was finite.

(A run with telemetry switched off has no counters: rule 4 then applies only to a
source that does not compile.)

Without an end record the process died abruptly:

8. ``killed``: a signal that stops processes on request (SIGKILL from outside the
   harness, e.g. the kernel's OOM killer or a user; SIGTERM, SIGINT, SIGHUP).
9. ``crash`` with ``exc_type`` the signal name (``SIGSEGV``, ``SIGABRT``, ``SIGBUS``,
   ``SIGFPE``, ``SIGILL``...): the process faulted, e.g. a segfault in native code.
10. a plain exit code without an end record (``os._exit`` in the script): the rules
    4-7 apply to what the trace shows, with a nonzero code as a crash ``exc_type="exit"``.

Then, for a mutant, from the whole run (``ending``): ``unreached`` when its changed lines
never ran (instead of ok, nan, crash or invalid); ``stillborn`` when a ``crash`` is a
Python-level error (``NameError``, ``AttributeError``, ``ImportError``, a call's arity or
keywords) raised at one of its changed lines before the first optimizer step and its
operator does not declare a crash (``raised``, ``experiments.stillborn``).
"""

from __future__ import annotations

import os
import signal
from typing import Any

OOM_MESSAGES = ("can't allocate memory", "out of memory", "cannot allocate memory")
KILL_SIGNALS = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
MESSAGE_LIMIT = 2000
# The statuses of a run that trained to its end: the rest count as "not ok" in progress,
# and only these give a reference wall time to derive its group's deadline from.
OK_STATUSES = ("ok", "nan")


def trained(counters: dict[str, Any]) -> bool:
    if counters.get("telemetry") is False:  # run without hooks: nothing to tell, assume so
        return True
    return bool(
        counters.get("steps") or counters.get("backward_calls") or counters.get("loss_fn_calls")
    )


def is_oom(error: BaseException) -> bool:
    if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
        return True
    return isinstance(error, RuntimeError) and any(
        text in str(error).lower() for text in OOM_MESSAGES
    )


def after_exception(
    error: BaseException | None, counters: dict[str, Any], nonfinite: bool
) -> tuple[str, str | None, str | None]:
    """Rules 3-7: (status, exc_type, exc_message) for how the script ended in the child.

    ``error`` is None when the script returned; a ``SystemExit`` carries its code.
    """
    if error is None or (isinstance(error, SystemExit) and error.code in (0, None)):
        if not trained(counters):
            return "invalid", None, "the script ended before any training step"
        return ("nan" if nonfinite else "ok"), None, None
    exc_type, message = type(error).__name__, str(error)[:MESSAGE_LIMIT]
    if is_oom(error):
        return "oom", exc_type, message
    if isinstance(error, SyntaxError) or (isinstance(error, SystemExit) and not trained(counters)):
        return "invalid", exc_type, message
    return "crash", exc_type, message


def after_abrupt_end(
    wait_status: int, counters: dict[str, Any], nonfinite: bool
) -> tuple[str, str | None, str | None, int]:
    """Rules 8-10 from ``os.wait4``'s status: (status, exc_type, message, exit_code).
    The exit code of a signalled process is reported as ``-signal`` (like subprocess)."""
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        name = signal_name(number)
        if number in KILL_SIGNALS:
            return "killed", name, f"killed by {name}", -number
        return "crash", name, f"the process died of {name}", -number
    code = os.waitstatus_to_exitcode(wait_status)
    if code != 0:
        if not trained(counters):
            return "invalid", "exit", f"exited with code {code} before training", code
        return "crash", "exit", f"exited with code {code}", code
    status, exc_type, message = after_exception(None, counters, nonfinite)
    return status, exc_type, message, 0


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
