"""What a session says: the summary line, a table per operator and per category, and
each survivor with its diff and the check that would catch it; written as
``mutants.csv``, ``mutation-report.md`` and ``mutation-report.html`` (``html``).

The score is killed / (killed + survived): a timeout, a stillborn or an unreached mutant
says nothing about whether the tests would notice the bug, so it is counted apart and
never in the score. With no killed or survived mutant there is no score, and the line
says so instead of printing one.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Sequence

from experiments.mutation_testing.discovery import Job
from experiments.mutation_testing.outcome import SCORED, STATUSES, Row

CSV_FIELDS = (
    "identity",
    "file",
    "line",
    "operator",
    "category",
    "status",
    "killed_by",
    "tests_run",
    "wall_s",
    "tests_s",
    "cpu_s",
    "detail",
    "sha256",
    "cached",
)


def score(rows: Sequence[Row]) -> float | None:
    counts = Counter(row.status for row in rows)
    scored = sum(counts[status] for status in SCORED)
    return counts["killed"] / scored if scored else None


def summary_line(rows: Sequence[Row]) -> str:
    counts = Counter(row.status for row in rows)
    value = score(rows)
    head = (
        "mutation score: n/a (no mutant was killed or survived)"
        if value is None
        else f"mutation score: {counts['killed']}/{counts['killed'] + counts['survived']} "
        f"({100 * value:.1f}%)"
    )
    parts = ", ".join(f"{status} {counts[status]}" for status in STATUSES)
    return f"{head}; {parts}; {len(rows)} mutants"


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


def survivors(rows: Sequence[Row], jobs: Sequence[Job]) -> list[tuple[Row, Job]]:
    by_identity = {job.identity: job for job in jobs}
    return [(row, by_identity[row.identity]) for row in rows if row.status == "survived"]


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
            *(f"Check: {check}" for check in job.checks if check),
            "",
            "```diff",
            job.mutant.diff.rstrip(),
            "```",
            "",
        ]
    parts += ["## Every mutant", "", markdown_table(_every(rows)), ""]
    return "\n".join(parts)


def _every(rows: Sequence[Row]) -> list[list[str]]:
    lines = [["mutant", "line", "status", "killed by / detail"]]
    for row in rows:
        why = ", ".join(f"`{test}`" for test in row.killed_by) or row.detail
        lines.append([f"`{row.identity}`", str(row.line), row.status, why.replace("|", "\\|")])
    return lines


def csv_text(rows: Sequence[Row]) -> str:
    stream = io.StringIO()
    writer = csv.DictWriter(stream, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        values = row.as_dict()
        values["killed_by"] = ";".join(row.killed_by)
        writer.writerow({name: values[name] for name in CSV_FIELDS})
    return stream.getvalue()


def terminal(rows: Sequence[Row], jobs: Sequence[Job], limit: int = 10) -> str:
    """What the command prints: tables, then the survivors (the first ``limit``)."""
    parts = [_plain(table(rows, "category")), "", _plain(table(rows, "operator"))]
    found = survivors(rows, jobs)
    for row, job in found[:limit]:
        parts += ["", f"survived: {row.identity} ({row.file}:{row.line})"]
        parts += [f"  check: {check}" for check in job.checks if check]
        parts += ["  " + line for line in job.mutant.diff.rstrip().splitlines()]
    if len(found) > limit:
        parts.append(f"\n... and {len(found) - limit} more survivors in mutation-report.md")
    return "\n".join(parts)


def _plain(cells: list[list[str]]) -> str:
    widths = [max(len(line[index]) for line in cells) for index in range(len(cells[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells
    )
