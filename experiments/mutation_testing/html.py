"""``mutation-report.html``: the report as one self-contained page (no script, no link
out), readable offline and attachable to a CI run."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from experiments.mutation_testing.discovery import Job
from experiments.mutation_testing.outcome import Row
from experiments.mutation_testing.report import (
    bug_in,
    catch_it,
    ran_by,
    summary_line,
    survivors,
    table,
    unconfirmed_reasons,
)
from experiments.mutation_testing.survivors import skeleton

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em}
th{background:#f3f3f3}td.n{text-align:right}code,pre{font-family:ui-monospace,monospace}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto}.killed{color:#1a7f37}
.survived{color:#cf222e;font-weight:bold}.timeout{color:#9a6700}
.stillborn,.unreached,.unconfirmed{color:#777}
.add{color:#1a7f37}.del{color:#cf222e}
"""


def page(rows: Sequence[Row], jobs: Sequence[Job], command: str, notes: Sequence[str]) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>mutation testing report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Would the tests catch these training bugs?</h1>",
        f"<p>Command: <code>{escape(command)}</code></p>",
        f"<p><strong>{escape(summary_line(rows))}</strong></p>",
        *(f"<p>Note: {escape(note)}</p>" for note in notes),
        "<h2>By category</h2>",
        _table(table(rows, "category")),
        "<h2>By operator</h2>",
        _table(table(rows, "operator")),
        "<h2>Survivors: bugs no test caught</h2>",
    ]
    found = survivors(rows, jobs)
    if not found:
        parts.append("<p>None.</p>")
    for row, job in found:
        parts.append(
            f"<h3><code>{escape(row.identity)}</code> ({escape(row.file)}:{row.line})</h3>"
        )
        parts.append(f"<p>Ran by: {escape(ran_by(row))}.</p>")
        parts.append(f"<p>Its bug ran: {escape(bug_in(row))}.</p>")
        parts += [f"<p>Check: {escape(check)}</p>" for check in job.checks if check]
        parts.append(f"<pre>{_diff(job.mutant.diff)}</pre>")
        parts.append(f"<p>{escape(catch_it(job))}</p>")
        test = skeleton(job)
        if test:
            parts.append(f"<pre>{escape(test)}</pre>")
    unconfirmed = [row for row in rows if row.status == "unconfirmed"]
    parts.append("<h2>Unconfirmed: the bug did not run under the tests (not in the score)</h2>")
    if not unconfirmed:
        parts.append("<p>None.</p>")
    else:
        parts.append(f"<p>{len(unconfirmed)} mutants: {escape(unconfirmed_reasons(rows))}.</p><ul>")
        parts += [
            f"<li><code>{escape(row.identity)}</code> ({escape(row.file)}:{row.line}): "
            f"{escape(row.witness)}</li>"
            for row in unconfirmed
        ]
        parts.append("</ul>")
    parts.append(
        "<h2>Every mutant</h2><table><tr><th>mutant</th><th>line</th>"
        "<th>status</th><th>killed by / detail</th><th>witness</th></tr>"
    )
    for row in rows:
        why = "<br>".join(f"<code>{escape(test)}</code>" for test in row.killed_by)
        parts.append(
            f"<tr><td><code>{escape(row.identity)}</code></td><td class='n'>{row.line}</td>"
            f"<td class='{escape(row.status)}'>{escape(row.status)}</td>"
            f"<td>{why or escape(row.detail)}</td><td>{escape(row.witness)}</td></tr>"
        )
    parts.append("</table></body></html>\n")
    return "\n".join(parts)


def _table(cells: list[list[str]]) -> str:
    head, *body = cells
    out = ["<table><tr>" + "".join(f"<th>{escape(cell)}</th>" for cell in head) + "</tr>"]
    for line in body:
        first, *numbers = line
        out.append(
            f"<tr><td><code>{escape(first)}</code></td>"
            + "".join(f"<td class='n'>{escape(cell)}</td>" for cell in numbers)
            + "</tr>"
        )
    return "".join(out) + "</table>"


def _diff(diff: str) -> str:
    lines = []
    for line in diff.rstrip().splitlines():
        kind = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else ("del" if line.startswith("-") and not line.startswith("---") else "")
        )
        text = escape(line)
        lines.append(f"<span class='{kind}'>{text}</span>" if kind else text)
    return "\n".join(lines)
