"""Progress output of ``trainwreck bench``: plain lines off a terminal, one line on it."""

from __future__ import annotations

import io

from experiments.bench.progress import progress_printer


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_few_plain_lines_never_carriage_returns():
    out = io.StringIO()
    report = progress_printer("trainwreck-lint", out)
    for done in range(1, 452):
        report(done, 451)
    assert out.getvalue().splitlines() == [
        "trainwreck-lint: 113/451",
        "trainwreck-lint: 226/451",
        "trainwreck-lint: 339/451",
        "trainwreck-lint: 451/451",
    ]
    assert "\r" not in out.getvalue()


def test_a_small_run_off_a_terminal_still_ends_with_its_total():
    out = io.StringIO()
    report = progress_printer("x", out)
    for done in range(1, 3):
        report(done, 2)
    assert out.getvalue() == "x: 1/2\nx: 2/2\n"


def test_a_terminal_gets_one_line_rewritten_in_place_and_ended():
    out = _Terminal()
    report = progress_printer("x", out)
    for done in range(1, 26):
        report(done, 25)
    assert out.getvalue() == "\rx: 10/25\rx: 20/25\rx: 25/25\n"
