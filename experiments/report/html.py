"""``report.html``: one self-contained page (inline CSS, JS and SVG; nothing fetched at view time).

The symptom table is sortable (click a header) and filterable (free text, severity); every
mutant has a card with its loss curves against the reference band (median and min-max over
the reference seeds), its numbers beside the reference's, its labels and its diff. Every
piece of text from runs or operators goes through ``html.escape``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timezone
from html import escape
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from experiments.report.assets import SCRIPT, STYLE
from experiments.report.markdown import control_line, loop_notes, overview_line, sentence
from experiments.report.operators import OperatorInfo
from experiments.report.svg import Series, band_svg
from experiments.report.validity import validity_html
from experiments.symptoms import SEVERITY_ORDER, SUMMARY_FEATURES
from experiments.validity import NOT_THE_BUG

if TYPE_CHECKING:
    from experiments.report.tables import CatalogTables

TABLE_COLUMNS = (
    # (symptoms column, header, kind)
    ("loop", "loop", "text"),
    ("variant", "mutant", "text"),
    ("category", "category", "text"),
    ("expected", "expected", "severity"),
    ("measured", "measured", "severity"),
    ("outcome", "outcome (seeds)", "text"),
    ("symptoms", "how you would notice (seeds)", "text"),
    ("unstable", "unstable (< 80%)", "text"),
    ("top_effects", "strongest effects", "text"),
    ("n_seeds", "seeds", "number"),
    ("stopped", "stopped (docs/adaptive.md)", "text"),
)
FEATURE_TITLES = {
    "initial_loss": "initial loss",
    "final_over_initial": "final / initial loss",
    "max_over_initial": "peak / initial loss",
    "log_slope_last_half": "log-loss slope, last half (/100 steps)",
    "val_metric_final": "final val metric (reported)",
    "holdout_metric": "held-out metric",
    "val_loss_final": "final val loss (reported)",
    "holdout_loss": "held-out loss",
    "train_time_s": "training time (s)",
}


def render_report_html(tables: CatalogTables) -> str:
    symptoms = tables.symptoms
    loss = _loss_series(tables.curves)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>trainwreck symptom catalog</title>",
        f"<style>{STYLE}</style></head><body>",
        "<header><h1>trainwreck symptom catalog</h1>",
        f"<p>{escape(overview_line(tables))} <span class='muted'>Generated {generated}.</span></p>",
        f"<p>{escape(control_line(tables.control).replace('`', ''))}</p>",
        *(
            f"<p class='loop-note'>{escape(note.replace('`', ''))}</p>"
            for note in loop_notes(symptoms)
        ),
        "<p class='muted'>Each mutant is judged seed by seed against the unmutated loop on the same "
        "seeds; a label is stable when it holds in at least 80% of seeds. Severity comes from the "
        "outcome only (status, the model's quality on the loop's held-out evaluation, a reported "
        "number that lies, extra cost); the symptoms say how you would notice. Measured severity "
        "sits beside the operator's declared (expected) one; a dashed outline marks disagreement "
        "and the card says why.</p>",
        "</header>",
    ]
    if symptoms.empty:
        parts.append("<p>No mutants were judged.</p>")
    else:
        parts.append(_table(symptoms))
        parts.append(validity_html(symptoms))
        parts.append(_cards(symptoms, tables.runs, loss, tables.operators))
    parts.append(f"<script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)


def _table(symptoms: pd.DataFrame) -> str:
    options = "".join(
        f'<option value="{s}">{s}</option>' for s in (*SEVERITY_ORDER, "invalid", *NOT_THE_BUG)
    )
    header = "".join(
        f'<th data-type="{"number" if kind != "text" else "text"}" scope="col">{escape(title)}</th>'
        for _, title, kind in TABLE_COLUMNS
    )
    rows = [_table_row(index, row) for index, row in enumerate(symptoms.to_dict("records"))]
    return (
        "<section><h2>Symptoms</h2><div class='controls'>"
        '<input id="filter" type="search" placeholder="filter: operator, label, loop..." '
        'aria-label="filter rows">'
        f'<select id="severity-filter" aria-label="measured severity"><option value="">'
        f"every measured severity</option>{options}</select>"
        '<span id="shown-count" class="muted"></span></div>'
        f'<div class="table-wrap"><table id="symptom-table" class="symptoms"><thead><tr>{header}'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def _table_row(index: int, row: dict[str, Any]) -> str:
    cells = []
    for column, _, kind in TABLE_COLUMNS:
        value = row.get(column)
        if kind == "severity":
            disagree = column == "measured" and row.get("agrees") is False
            cells.append(_severity_cell(value, disagree))
        elif column == "variant":
            site = _text(row.get("site"))
            where = f"<br><span class='muted site'>{escape(site)}</span>" if site else ""
            cells.append(f'<td><a href="#{_card_id(index)}">{escape(_text(value))}</a>{where}</td>')
        elif column == "top_effects":
            effects = "<br>".join(escape(part) for part in _text(value).split("; ")[:3])
            cells.append(f"<td class='effects'>{effects}</td>")
        else:
            cells.append(f"<td>{escape(_text(value))}</td>")
    measured = escape(_text(row.get("measured")))
    return f'<tr data-severity="{measured}" data-target="{_card_id(index)}">{"".join(cells)}</tr>'


def _severity_cell(value: Any, disagree: bool) -> str:
    text = _text(value)
    if not text:
        return '<td data-sort="99"></td>'
    rank = SEVERITY_ORDER.index(text) if text in SEVERITY_ORDER else len(SEVERITY_ORDER)
    extra = " disagree" if disagree else ""
    title = ' title="differs from the expected severity"' if disagree else ""
    return (
        f'<td data-sort="{rank}"><span class="sev sev-{escape(text)}{extra}"{title}>'
        f"{escape(text)}</span></td>"
    )


def _cards(
    symptoms: pd.DataFrame,
    runs: pd.DataFrame,
    loss: dict[str, Series],
    operators: Mapping[str, OperatorInfo],
) -> str:
    index = _RunIndex(runs)
    cards = [
        _card(position, row, index, loss, operators.get(row["operator"]))
        for position, row in enumerate(symptoms.to_dict("records"))
    ]
    return (
        "<section><h2>Mutants: loss curves against the reference</h2>"
        "<p class='legend'><span class='swatch' style='background:#bee3f8'></span>reference "
        "min-max over seeds<span class='swatch' style='background:#2b6cb0;height:3px'></span>"
        "reference median<span class='swatch' style='background:#c53030;height:3px'></span>"
        "mutant, one line per seed (a cross marks a non-finite loss)</p>"
        f"<div class='mutants'>{''.join(cards)}</div></section>"
    )


class _RunIndex:
    """Runs by (loop, device, identity) and reference runs by (loop, device, seed)."""

    COLUMNS = (
        "run_id",
        "loop",
        "device",
        "identity",
        "seed",
        "status",
        "role",
        "diff",
        "exc_type",
        "exc_message",
    )

    def __init__(self, runs: pd.DataFrame) -> None:
        self.members: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        self.references: dict[tuple[str, str, int], list[str]] = {}
        for run in runs[list(self.COLUMNS)].to_dict("records"):
            group = (run["loop"], run["device"])
            self.members.setdefault((*group, run["identity"]), []).append(run)
            if run["role"] == "reference":
                self.references.setdefault((*group, int(run["seed"])), []).append(run["run_id"])

    def mutant_runs(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        seeds = set(json.loads(row.get("seeds") or "[]"))
        runs = self.members.get((row["loop"], row["device"], row["identity"]), [])
        return [run for run in runs if run["seed"] in seeds]

    def reference_ids(self, row: dict[str, Any]) -> list[str]:
        seeds = json.loads(row.get("reference_seeds") or "[]")
        return [
            run_id
            for seed in seeds
            for run_id in self.references.get((row["loop"], row["device"], int(seed)), [])
        ]


def _card(
    index: int,
    row: dict[str, Any],
    runs: _RunIndex,
    loss: dict[str, Series],
    info: OperatorInfo | None,
) -> str:
    mutant_runs = runs.mutant_runs(row)
    reference = [loss[run_id] for run_id in runs.reference_ids(row) if run_id in loss]
    mutant = []
    for run in mutant_runs:
        series = loss.get(run["run_id"])
        if series is not None:
            label = f"seed {run['seed']} ({run['status']})"
            mutant.append(Series(series.steps, series.values, label))
    title = f"{row['loop']}: {row['variant']} vs reference"
    figure = band_svg(reference, mutant, title=title)
    if not any(series.values.size for series in mutant):
        figure += "<p class='muted'>The mutant recorded no loss (it stopped before a backward).</p>"
    statuses = ", ".join(
        f"{count} {status}"
        for status, count in Counter(run["status"] for run in mutant_runs).most_common()
    )
    diff = next(
        (run["diff"] for run in mutant_runs if isinstance(run["diff"], str) and run["diff"]), ""
    )
    error = next((run for run in mutant_runs if _text(run["exc_type"])), None)
    error_line = (
        f"<p class='muted'>error (seed {escape(_text(error['seed']))}): "
        f"<code>{escape(_text(error['exc_type']))}: {escape(_text(error['exc_message'])[:300])}"
        "</code></p>"
        if error
        else ""
    )
    summary = _text(row.get("summary"))
    labels = _text(row.get("symptoms")) or "no stable label"
    outcome = _text(row.get("outcome")) or "as reference"
    source = _text(row.get("outcome_source"))
    why = _text(row.get("why"))
    witness = _text(row.get("witness"))  # what showed the mutant is its bug (issue 28)
    unstable = _text(row.get("unstable"))
    return (
        f'<article class="mutant" id="{_card_id(index)}">'
        f"<h3>{escape(_text(row['variant']))} <span class='muted'>&#183; {escape(_text(row['loop']))}"
        f" &#183; {escape(_text(row['device']))}</span></h3>"
        f"<p><code>{escape(_text(row['identity']))}</code></p>"
        + (f"<p class='muted'>{escape(summary)}</p>" if summary else "")
        + f"<p>measured {_severity_badge(row.get('measured'))} expected "
        f"{_severity_badge(row.get('expected'))} &#183; outcome: {escape(outcome)}"
        f" <span class='muted'>(measured by {escape(source)})</span>"
        f" &#183; how you would notice: {escape(labels)}"
        + (f" &#183; unstable: {escape(unstable)}" if unstable else "")
        + f" &#183; runs: {escape(statuses or 'none')}</p>"
        + (_why(row, why) if why else "")
        + (f"<p><strong>Witness:</strong> {escape(witness)}</p>" if witness else "")
        + error_line
        + f"<div class='body'><div>{figure}</div>{_numbers(row)}</div>{_advice(info)}"
        + (
            f"<details><summary>diff</summary>{_diff_html(diff)}</details>"
            if diff
            else "<p class='muted'>no diff recorded</p>"
        )
        + "</article>"
    )


def _why(row: dict[str, Any], why: str) -> str:
    if row.get("measured") == "unjudged":
        return f"<p><strong>Unjudged:</strong> {escape(why)}</p>"
    return f"<p><strong>Why not {escape(_text(row.get('expected')))}:</strong> {escape(why)}</p>"


def _advice(info: OperatorInfo | None) -> str:
    """The operator's documented check and fix, where it has them."""
    if info is None:
        return ""
    parts = [
        f"<b>{name}:</b> {_inline_code(sentence(info.sections[key]))}"
        for key, name in (("Check", "Check that exposes it"), ("Fix", "Fix"))
        if info.sections.get(key)
    ]
    return f"<p class='advice'>{' &#183; '.join(parts)}</p>" if parts else ""


def _inline_code(text: str) -> str:
    """Escaped text with `code` spans rendered as <code>."""
    pieces = escape(text).split("`")
    return "".join(f"<code>{piece}</code>" if i % 2 else piece for i, piece in enumerate(pieces))


def _numbers(row: dict[str, Any]) -> str:
    lines = []
    for feature in SUMMARY_FEATURES:
        mine, ref = row.get(f"mutant_{feature}"), row.get(f"ref_{feature}")
        if not (_present(mine) or _present(ref)):
            continue
        d = row.get(f"d_{feature}")
        lines.append(
            f"<tr><td>{escape(FEATURE_TITLES.get(feature, feature))}</td><td>{_num(mine)}</td>"
            f"<td>{_num(ref)}</td><td>{_num(d, '{:+.1f}')}</td></tr>"
        )
    if not lines:
        return ""
    return (
        "<table class='numbers'><thead><tr><th>median over seeds</th><th>mutant</th>"
        f"<th>reference</th><th>d</th></tr></thead><tbody>{''.join(lines)}</tbody></table>"
    )


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.rstrip("\n").splitlines():
        css = "add" if line.startswith("+") and not line.startswith("+++") else ""
        css = "del" if line.startswith("-") and not line.startswith("---") else css
        text = escape(line) or " "
        lines.append(f'<span class="{css}">{text}</span>' if css else text)
    return "<pre class='diff'>" + "\n".join(lines) + "</pre>"


def _loss_series(curves: pd.DataFrame) -> dict[str, Series]:
    """run id -> its loss curve, split out of the long table in one pass."""
    if curves.empty:
        return {}
    loss = curves[curves["metric"] == "loss"]
    codes = loss["run"].cat.codes.to_numpy()
    order = np.argsort(codes, kind="stable")
    codes = codes[order]
    steps = loss["step"].to_numpy()[order]
    values = loss["value"].to_numpy()[order]
    boundaries = np.flatnonzero(np.diff(codes)) + 1
    names = loss["run"].cat.categories
    out = {}
    for chunk_codes, chunk_steps, chunk_values in zip(
        np.split(codes, boundaries), np.split(steps, boundaries), np.split(values, boundaries)
    ):
        if chunk_codes.size:
            out[str(names[chunk_codes[0]])] = Series(chunk_steps.astype(float), chunk_values)
    return out


def _severity_badge(value: Any) -> str:
    text = _text(value) or "n/a"
    return f'<span class="sev sev-{escape(text)}">{escape(text)}</span>'


def _card_id(index: int) -> str:
    return f"mutant-{index}"


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(value)


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and pd.isna(value))


def _num(value: Any, fmt: str = "{:.3g}") -> str:
    return escape(fmt.format(value)) if _present(value) else "n/a"
