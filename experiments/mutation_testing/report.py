"""What a session says: the summary line, a table per operator and per category, and
each survivor with its diff and the check that would catch it; written as
``mutants.csv``, ``mutation-report.md`` and ``mutation-report.html`` (``html``).

The score is killed / (killed + survived), both confirmed by the mutant's witness (its
bug ran under the tests: ``verdict``): an unconfirmed, timed-out, stillborn or unreached
mutant says nothing about whether the tests would notice the bug, so it is counted apart
and never in the score. With no killed or survived mutant there is no score, and the line
says so instead of printing one.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Sequence

from experiments.mutation_testing.discovery import Job
from experiments.mutation_testing.outcome import SCORED, STATUSES, Row
from experiments.mutation_testing.survivors import advice, skeleton

CSV_FIELDS = (
    "identity",
    "file",
    "line",
    "operator",
    "category",
    "status",
    "witness_state",
    "witness",
    "killed_by",
    "failed_with",
    "crash",
    "tests_run",
    "covered_by",
    "ran_bug",
    "wall_s",
    "tests_s",
    "cpu_s",
    "detail",
    "warm",
    "sha256",
    "cached",
)


def score(rows: Sequence[Row]) -> float | None:
    counts = Counter(row.status for row in rows)
    scored = sum(counts[status] for status in SCORED)
    return counts["killed"] / scored if scored else None


def percent(rows: Sequence[Row]) -> float | None:
    """The score in percent as printed (one decimal): what ``--fail-under`` compares."""
    value = score(rows)
    return None if value is None else round(100 * value, 1)


def summary_line(rows: Sequence[Row]) -> str:
    counts = Counter(row.status for row in rows)
    shown = percent(rows)
    head = (
        "mutation score: n/a (no mutant was killed or survived)"
        if shown is None
        else f"mutation score: {counts['killed']}/{counts['killed'] + counts['survived']} "
        f"({shown:.1f}%)"
    )
    parts = [f"{status} {counts[status]}" for status in STATUSES]
    crashes = Counter(_crash_label(row) for row in rows if row.status == "killed" and row.crash)
    if crashes:
        kinds = ", ".join(f"{kind} {count}" for kind, count in crashes.most_common())
        parts[0] += f" ({sum(crashes.values())} by a crash, no test's verdict: {kinds})"
    tail = f"{len(rows)} mutants"
    # Of the mutants no test caught, those whose bug ran (checked: confirmed survivors)
    ran = sum(row.status == "survived" and row.witness_state == "confirmed" for row in rows)
    passed = ran + sum(row.status == "unconfirmed" and not failed_anyway(row) for row in rows)
    if passed:
        tail += (
            f"; of the {passed} no test caught, {ran} ran their bug "
            f"under the tests and {passed - ran} did not (unconfirmed)"
        )
    unchecked = sum(row.witness_state == "unknown" for row in rows)
    if unchecked:
        tail += f"; witness not checked for {unchecked}"
    return f"{head}; {', '.join(parts)}; {tail}"


def _crash_label(row: Row) -> str:
    """A kill by a crash: ``undeclared RuntimeError`` when its operator does not declare it
    (the witness fired first: for a reader to judge), else the class alone."""
    return f"undeclared {row.crash}" if row.witness.startswith("undeclared:") else row.crash


def failed_anyway(row: Row) -> bool:
    """An unconfirmed mutant whose run had a failing test (in which its bug did not run)."""
    return row.status == "unconfirmed" and row.detail.startswith("failed")


def why_unconfirmed(row: Row) -> str:
    """The reason words of an unconfirmed mutant's witness (``no effect on this model``)."""
    found = re.search(r"unconfirmed \(([^)]*)\)", row.witness)
    return found.group(1) if found else "not observed"


def unconfirmed_reasons(rows: Sequence[Row]) -> str:
    reasons = Counter(why_unconfirmed(row) for row in rows if row.status == "unconfirmed")
    return ", ".join(f"{reason} {count}" for reason, count in reasons.most_common())


def fail_under(rows: Sequence[Row], threshold: float) -> tuple[bool, str]:
    """``--fail-under``: whether the printed score reaches ``threshold``, and the line that
    says so (a score of "77.3%" passes ``--fail-under 77.3``)."""
    shown = percent(rows)
    if shown is None:
        return (
            False,
            f"--fail-under {threshold:g}: failed, no score (no mutant was killed or survived)",
        )
    if shown < threshold:
        return False, f"--fail-under {threshold:g}: failed, {shown:.1f}% < {threshold:g}%"
    return True, f"--fail-under {threshold:g}: passed, {shown:.1f}% >= {threshold:g}%"


def table(rows: Sequence[Row], by: str) -> list[list[str]]:
    """One row per operator (or category): counts per status and the score."""
    groups: dict[str, Counter] = {}
    for row in rows:
        groups.setdefault(getattr(row, by), Counter())[row.status] += 1
    lines = [[by, *STATUSES, "score"]]
    for name in sorted(groups):
        counts = groups[name]
        scored = counts["killed"] + counts["survived"]
        value = f"{counts['killed']}/{scored}" if scored else "n/a"
        lines.append([name, *(str(counts[status]) for status in STATUSES), value])
    return lines


def markdown_table(cells: list[list[str]]) -> str:
    head, *body = cells
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(line) + " |" for line in body]
    return "\n".join(out)


def survivors(
    rows: Sequence[Row], jobs: Sequence[Job], status: str = "survived"
) -> list[tuple[Row, Job]]:
    by_identity = {job.identity: job for job in jobs}
    return [(row, by_identity[row.identity]) for row in rows if row.status == status]


def markdown(rows: Sequence[Row], jobs: Sequence[Job], command: str, notes: Sequence[str]) -> str:
    parts = [
        "# Mutation testing: would the tests catch these training bugs?",
        "",
        f"Command: `{command}`",
        "",
        f"**{summary_line(rows)}**",
        "",
        *(f"- note: {note}" for note in notes),
        "",
        "## By category",
        "",
        markdown_table(table(rows, "category")),
        "",
        "## By operator",
        "",
        markdown_table(table(rows, "operator")),
        "",
        "## Survivors: bugs no test caught",
        "",
    ]
    found = survivors(rows, jobs)
    if not found:
        parts.append("None.")
    for row, job in found:
        parts += [
            f"### `{row.identity}` ({row.file}:{row.line})",
            "",
            f"Ran by: {ran_by(row)}.",
            "",
            f"Its bug ran: {bug_in(row)}.",
            "",
            *(f"Check: {check}" for check in job.checks if check),
            "",
            "```diff",
            job.mutant.diff.rstrip(),
            "```",
            "",
            catch_it(job),
            "",
        ]
        test = skeleton(job)
        if test:
            parts += ["```python", test.rstrip(), "```", ""]
    unconfirmed = [row for row in rows if row.status == "unconfirmed"]
    parts += [
        "## Unconfirmed: the bug did not run under the tests (not in the score)",
        "",
        f"{len(unconfirmed)} mutants: {unconfirmed_reasons(rows)}." if unconfirmed else "None.",
        "",
    ]
    parts += [f"- `{row.identity}` ({row.file}:{row.line}): {row.witness}" for row in unconfirmed]
    parts += ["", "## Every mutant", "", markdown_table(_every(rows)), ""]
    return "\n".join(parts)


def _every(rows: Sequence[Row]) -> list[list[str]]:
    lines = [["mutant", "line", "status", "killed by / detail", "witness"]]
    for row in rows:
        why = ", ".join(f"`{test}`" for test in row.killed_by) or row.detail
        if row.crash:
            why += f" (crashed: {row.crash})"
        cells = [f"`{row.identity}`", str(row.line), row.status, why, row.witness]
        lines.append([cell.replace("|", "\\|") for cell in cells])
    return lines


def csv_text(rows: Sequence[Row]) -> str:
    stream = io.StringIO()
    writer = csv.DictWriter(stream, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        values = row.as_dict()
        values["killed_by"] = ";".join(row.killed_by)
        values["failed_with"] = ";".join(row.failed_with)
        values["covered_by"] = ";".join(row.covered_by)
        values["ran_bug"] = ";".join(row.ran_bug)
        writer.writerow({name: values[name] for name in CSV_FIELDS})
    return stream.getvalue()


def terminal(rows: Sequence[Row], jobs: Sequence[Job], limit: int = 10) -> str:
    """What the command prints: tables, then the survivors (the first ``limit``)."""
    parts = [_plain(table(rows, "category")), "", _plain(table(rows, "operator"))]
    found = survivors(rows, jobs)
    for row, job in found[:limit]:
        parts += ["", f"survived: {row.identity} ({row.file}:{row.line})"]
        parts.append(f"  ran by: {ran_by(row)}")
        parts.append(f"  its bug ran: {bug_in(row)}")
        parts += [f"  check: {check}" for check in job.checks if check]
        parts.append(f"  {catch_it(job)} (a test skeleton in mutation-report.md)")
        parts += ["  " + line for line in job.mutant.diff.rstrip().splitlines()]
    if len(found) > limit:
        parts.append(f"\n... and {len(found) - limit} more survivors in mutation-report.md")
    crashed = [row for row in rows if row.status == "killed" and row.crash]
    if crashed:
        parts += ["", "killed by a crash, not by a test's verdict (does a test check the bug?):"]
        parts += [
            f"  {row.identity} ({row.file}:{row.line}): {_crash_label(row)}"
            for row in crashed[:limit]
        ]
        if len(crashed) > limit:
            parts.append(f"  ... and {len(crashed) - limit} more in mutation-report.md")
    parts += terminal_unconfirmed(rows, limit)
    return "\n".join(parts)


def terminal_unconfirmed(rows: Sequence[Row], limit: int = 10) -> list[str]:
    """The unconfirmed mutants, out of the score: how many, why, the first ``limit``."""
    found = [row for row in rows if row.status == "unconfirmed"]
    if not found:
        return []
    parts = ["", f"unconfirmed, not in the score ({unconfirmed_reasons(rows)}):"]
    parts += [f"  {row.identity} ({row.file}:{row.line}): {row.witness}" for row in found[:limit]]
    if len(found) > limit:
        parts.append(f"  ... and {len(found) - limit} more in mutation-report.md")
    return parts


def bug_in(row: Row, shown: int = 3) -> str:
    """Where a survivor's witness fired, and what it showed."""
    tests = row.ran_bug
    if not tests:
        return row.witness or "not checked"
    names = ", ".join(f"`{test}`" for test in tests[:shown])
    more = f" and {len(tests) - shown} more" if len(tests) > shown else ""
    return f"in {names}{more}: {row.witness}"


def ran_by(row: Row, shown: int = 3) -> str:
    """The tests that ran the survivor's changed lines, as the baseline recorded them."""
    tests = row.covered_by
    if not tests:
        return "every test (no per-test lines for it)" if row.tests_run is None else "its tests"
    names = ", ".join(f"`{test}`" for test in tests[:shown])
    more = f" and {len(tests) - shown} more" if len(tests) > shown else ""
    return f"{len(tests)} {'test' if len(tests) == 1 else 'tests'} ({names}{more}), none failed"


def catch_it(job: Job) -> str:
    found = advice(job)
    if found.check:
        return f"Catch it with trainwreck.checks.{found.check}: {found.why}."
    return f"No check of trainwreck.checks catches it: {found.why}."


def _plain(cells: list[list[str]]) -> str:
    widths = [max(len(line[index]) for line in cells) for index in range(len(cells[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells
    )
