"""Progress output (``experiments.progress``): plain lines off a terminal, one line on it;
``progress_printer`` for ``trainwreck bench``, ``ProgressBar`` for the runs of a sweep."""

from __future__ import annotations

import io

from experiments.progress import ProgressBar, progress_printer


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


def test_a_sweep_off_a_terminal_gets_a_line_per_tenth_with_its_counts():
    out = io.StringIO()
    bar = ProgressBar(out)
    for done in range(1, 41):
        bar(done, 40, cached=min(done, 30), failed=done // 20)
    bar.close()
    lines = out.getvalue().splitlines()
    # The first run, then one line per tenth (4/40, 8/40, ... 40/40).
    assert [line.split("] ")[1].split(" ")[0] for line in lines] == [
        f"{done}/40" for done in (1, *range(4, 41, 4))
    ]
    assert lines[-1].startswith("[" + "#" * 30 + "] 40/40 runs  cached 30  not ok 2")
    assert "ETA" not in lines[-1]  # nothing left to estimate
    assert "\r" not in out.getvalue()


def test_a_sweep_on_a_terminal_rewrites_one_line_and_ends_it_on_close():
    out = _Terminal()
    bar = ProgressBar(out)
    bar(1, 3, cached=1, failed=0)
    bar(2, 3, cached=1, failed=1)
    assert out.getvalue().count("\r") == 2 and "\n" not in out.getvalue()
    assert "ETA" in out.getvalue().split("\r")[-1]  # one run trained: the rest is estimated
    bar.close()
    assert out.getvalue().endswith("\n")
