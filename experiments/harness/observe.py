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
path they go nowhere. One installation per process at a time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from experiments.harness.hooks import Telemetry
from experiments.harness.writer import TraceWriter


class Observed:
    """Installed probes (``install``)."""

    def __init__(self, telemetry: Telemetry, writer: TraceWriter) -> None:
        self.telemetry = telemetry
        self.writer = writer

    def facts(self) -> dict[str, Any]:
        """The witness facts so far (what ``experiments.witness.decide`` compares)."""
        self.telemetry.finish()
        return self.telemetry.witness_facts()

    def remove(self) -> None:
        """Undo the hooks and close the trace."""
        self.telemetry.close()
        self.writer.close()


def install(trace: str | Path | None = None) -> Observed:
    writer = TraceWriter(trace if trace is not None else os.devnull)
    telemetry = Telemetry(writer)
    telemetry.install()
    return Observed(telemetry, writer)
