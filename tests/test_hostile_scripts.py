"""Issue 15's probes (tests/hostile.py) as tests: each one a real process against the
harness or the CLI. ``benchmarks/reliability.py`` writes the same probes as the table of
docs/reliability.md."""

from __future__ import annotations

import pytest
from hostile import PROBES


@pytest.mark.parametrize(
    "probe",
    [pytest.param(probe, marks=[pytest.mark.slow] if probe.slow else []) for probe in PROBES],
    ids=[probe.run.__name__ for probe in PROBES],
)
def test_probe_holds(probe, tmp_path):
    observed, held = probe.run(tmp_path)
    assert held, f"{probe.name}: expected {probe.expected}, observed {observed}"


def test_capped_trace_behaves_like_the_file_the_writer_expects(tmp_path):
    from experiments.harness import tracecap

    trace = tracecap.open_trace(tmp_path / "trace.jsonl")
    assert not trace.closed
    trace.write('{"kind": "start"}\n')
    trace.flush()
    trace.close()
    assert trace.closed
