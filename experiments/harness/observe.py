"""The witness probes for a process that is not a harness run: ``trainwreck test``'s child
(a pytest session against a mutant) installs them the way it installs the reach counters
(``reach.install_counters``), then asks for the facts and lets ``experiments.witness``
decide against the same facts of the unmutated project's session::

    from experiments.harness import observe
    from experiments.witness import decide, operator_parts

    observed = observe.install()            # the telemetry hooks and probes, this process
    ...                                     # run the tests
    facts = observed.facts()                # JSON: what fired, and when
    observed.remove()
    verdict = decide(
        operator_parts(["drop_zero_grad"], [{}]),
        {"status": "ok", "device": "cpu", "seed": 0, "witness": facts},
        {"status": "ok", "witness": baseline_facts},
    )

``install(trace=path)`` also streams the trace records (losses, steps, and ``witness``
records as they change) to ``path``, so a process that dies keeps what fired; without a
path they go nowhere, and no writer thread is started (a process that forks after
installing, as ``trainwreck test``'s warm server does, must hold no other thread).
One installation per process at a time.

``reset()`` starts the facts afresh without reinstalling (``trainwreck test`` keeps facts
per test): the wrappers stay the ones the project's modules bound at import (``from
torch.nn.functional import cross_entropy``), and only what they record is emptied.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from experiments.harness.hooks import Telemetry
from experiments.harness.writer import TraceWriter


class _NoTrace:
    """The part of ``TraceWriter`` the telemetry calls, writing nothing."""

    def __init__(self) -> None:
        self.before_flush: Any = None
        self.has_tensors = False

    def add(self, *_: Any) -> None:
        pass

    def append(self, *_: Any, **__: Any) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class Observed:
    """Installed probes (``install``)."""

    def __init__(self, telemetry: Telemetry, writer: TraceWriter | _NoTrace) -> None:
        self.telemetry = telemetry
        self.writer = writer

    def facts(self) -> dict[str, Any]:
        """The witness facts so far (what ``experiments.witness.decide`` compares)."""
        self.telemetry.finish()
        return self.telemetry.witness_facts()

    def reset(self) -> None:
        """Empty every fact and counter in place, as a fresh ``install`` would have them.
        The telemetry, its forwards and probes keep their identity: the installed wrappers
        hold them."""
        telemetry = self.telemetry
        forwards, probes = telemetry.forwards, telemetry.probes
        undo, statm = telemetry._undo, telemetry._statm
        Telemetry.__init__(
            telemetry, telemetry.writer, telemetry.sample_every, witness=probes is not None
        )
        if telemetry._statm >= 0:
            os.close(telemetry._statm)
        forwards.__init__()
        if probes is not None:
            probes.__init__()
        forwards.probes = probes
        telemetry.forwards, telemetry.probes = forwards, probes
        telemetry._undo, telemetry._statm = undo, statm

    def remove(self) -> None:
        """Undo the hooks and close the trace."""
        self.telemetry.close()
        self.writer.close()


def install(trace: str | Path | None = None) -> Observed:
    writer = TraceWriter(trace) if trace is not None else _NoTrace()
    telemetry = Telemetry(writer)  # type: ignore[arg-type]
    telemetry.install()
    return Observed(telemetry, writer)
