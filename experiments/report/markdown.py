"""``symptoms.md`` (the table) and ``study.md`` (per operator, for people learning)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import pandas as pd

from experiments.report.validity import validity_markdown
from experiments.symptoms import (
    HOW_TO_MEASURE,
    MIN_SPREAD_SEEDS,
    NOOP,
    SEVERITY_ORDER,
    UNJUDGED,
    control_warnings,
)
from experiments.validity import is_valid

if TYPE_CHECKING:
    from experiments.report.tables import CatalogTables

SYMPTOM_COLUMNS = (
    ("variant", "mutant"),
    ("site", "site"),
    ("category", "category"),
    ("expected", "expected"),
    ("measured", "measured"),
    ("outcome", "outcome (seeds)"),
    ("symptoms", "how you would notice (seeds)"),
    ("unstable", "unstable (< 80% of seeds)"),
    (
        "top_effects",
        "strongest effects (Cohen's d, Mann-Whitney p; exact differences when the reference ignores the seed)",
    ),
    ("why", "why measured differs from expected"),
)

MEASURED = [column for column, _ in SYMPTOM_COLUMNS].index("measured")


def render_symptoms_md(tables: CatalogTables) -> str:
    symptoms = tables.symptoms
    lines = ["# Symptom catalog", "", overview_line(tables), "", control_line(tables.control), ""]
    lines += [
        "Measured severity comes from the outcome only: the run's status, the trained model's",
        "quality against the reference's (measured by the loop's held-out evaluation, or by the",
        "script's own val metric where a loop has none: see each loop's line), a reported number",
        "that lies (`misleads`), extra time or memory; it is the worst level reached in at least",
        "half the seeds. The symptoms column says how you would notice. Expected is what the",
        "operator declares; where they differ, both stand and the last column says why.",
        "`unjudged` is no verdict: nothing measured the model (no held-out evaluation, no",
        "reported validation number: the curve cannot tell silent from degrades), the only",
        "measure is a number the mutated code computed (its changed lines ran while the script",
        f"evaluated), the reference had fewer than {MIN_SPREAD_SEEDS} seeds (`too few seeds`), or",
        "the evidence also shows on the unmutated control (`also in control`); the last column",
        "says which and how to measure it. Unjudged rows are left out of the declared/measured",
        "agreement.",
        "`@partial` marks a label read from the trace of a run that did not finish.",
        "Measured `stillborn`, `unconfirmed`, `equivalent` or `unreached`: the mutant is not",
        "the bug it claims (an `unconfirmed` one never showed its operator's witness: the last",
        "column says why) and is left out of every statistic (Mutant validity, at the end).",
        "Stopped: why no more seeds were needed (or, at the seed cap or with fixed seeds,",
        "which indicators the sequential rule of docs/adaptive.md left open).",
        "",
    ]
    if symptoms.empty:
        return "\n".join([*lines, "No mutants were judged.", ""])
    warnings = control_warnings(symptoms)
    for (loop, device), group in symptoms.groupby(["loop", "device"], sort=True):
        lines += [f"## `{loop}` ({device})", ""]
        if (loop, device) in warnings:
            lines += [f"**{warnings[(loop, device)]}**", ""]
        lines += [_source_line(group), ""]
        lines.append(
            "| " + " | ".join(title for _, title in SYMPTOM_COLUMNS) + " | seeds | stopped |"
        )
        lines.append("|" + "---|" * (len(SYMPTOM_COLUMNS) + 2))
        for row in group.to_dict("records"):
            cells = [_cell(row.get(column)) for column, _ in SYMPTOM_COLUMNS]
            if row.get("agrees") is False:
                cells[MEASURED] = f"**{cells[MEASURED]}**"
            cells.append(str(row.get("n_seeds", "")))
            cells.append(_cell(row.get("stopped")))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join([*lines, validity_markdown(symptoms)])


def render_study_md(tables: CatalogTables) -> str:
    """Per operator: the bug, a minimal diff, the curve in numbers, the check, the fix."""
    symptoms = tables.symptoms
    lines = [
        "# Study guide: what each training bug does",
        "",
        "Ordered by measured severity, worst first. Numbers are medians over seeds; the",
        "unmutated reference over the same seeds is in brackets.",
        "",
        control_line(tables.control),
        "",
    ]
    if symptoms.empty:
        return "\n".join([*lines, "No mutants were judged.", ""])
    for (loop, device), warning in sorted(control_warnings(symptoms).items()):
        lines += [f"**`{loop}` ({device}).** {warning}", ""]
    mutants = symptoms[symptoms["role"] == "mutant"]
    ordered = sorted(
        mutants.groupby("operator", sort=False),
        key=lambda item: (
            SEVERITY_ORDER.index(operator_severity(item[1]))
            if operator_severity(item[1]) in SEVERITY_ORDER
            else len(SEVERITY_ORDER),
            item[0],
        ),
    )
    diffs = _diffs_by_identity(tables.runs)
    lines += _textbook_section(mutants)
    for number, (operator, group) in enumerate(ordered, start=1):
        lines += _operator_section(number, operator, group, tables, diffs)
    return "\n".join(lines)


def loop_notes(symptoms: pd.DataFrame) -> list[str]:
    """Per (loop, device): its control's warning, if any, then what measured its outcome
    (what starts the loop's section; report.html, one table, lists them up front)."""
    if symptoms.empty:
        return []
    warnings = control_warnings(symptoms)
    return [
        f"{loop} ({device}): "
        + " ".join([warnings.get((loop, device), ""), _source_line(group)]).strip()
        for (loop, device), group in symptoms.groupby(["loop", "device"], sort=True)
    ]


def _source_line(group: pd.DataFrame) -> str:
    sources = Counter(group.get("outcome_source", pd.Series(dtype=object)).dropna())
    if not sources:
        return "Outcome measured by: nothing (no run finished)."
    source = sources.most_common(1)[0][0]
    if source.startswith("held-out"):
        caveat = ""
    elif source.startswith("nothing"):
        caveat = (
            " Rows the curve cannot settle are `unjudged`; to measure them, " + HOW_TO_MEASURE + "."
        )
    else:
        caveat = (
            " This loop names no held-out evaluation (`loop.holdout`), so a bug in the "
            "script's own evaluation can make a broken model look fine."
        )
    return f"Outcome measured by: {source}.{caveat}"


def _textbook_section(mutants: pd.DataFrame) -> list[str]:
    """Where a mutant's declared (textbook) severity does not hold on a loop, and why."""
    if "why" not in mutants:
        return []
    # Mutants that are not their bug have their own section (symptoms.md, Mutant validity);
    # an unjudged row's "why" says what would measure it: no claim was tested there.
    valid = mutants["measured"].map(is_valid)
    differs = mutants[
        (mutants["why"].fillna("").astype(str) != "") & valid & (mutants["measured"] != UNJUDGED)
    ]
    if differs.empty:
        return []
    lines = [
        "## Where the textbook claim does not hold on these loops",
        "",
        "Each operator declares the severity its bug has in general. These mutants measured",
        "differently here; the reason comes from the numbers.",
        "",
    ]
    for row in differs.to_dict("records"):
        where = f" at `{row['site']}`" if row.get("site") else ""
        lines.append(
            f"- `{row['loop']}` {row['variant']}{where}: declared {row['expected']}, "
            f"measured {row['measured']}. {sentence(str(row['why']))}."
        )
    return [*lines, ""]


def operator_severity(group: pd.DataFrame) -> str:
    """The most common measured severity of an operator's mutants that are its bug (of all
    of them when none is); ties go to the worse."""
    valid = group[group["measured"].map(is_valid)]
    counts = Counter((valid if len(valid) else group)["measured"])
    rank = {severity: index for index, severity in enumerate(SEVERITY_ORDER)}
    return min(counts, key=lambda severity: (-counts[severity], rank.get(severity, len(rank))))


def _operator_section(
    number: int,
    operator: str,
    group: pd.DataFrame,
    tables: CatalogTables,
    diffs: dict[str, tuple[str, str]],
) -> list[str]:
    info = tables.operators.get(operator)
    measured = operator_severity(group)
    expected = info.expected if info and info.expected else "not declared"
    category = info.category if info and info.category else (group["category"].iloc[0] or "unknown")
    lines = [
        f"## {number}. `{operator}` ({category}): measured {measured}, expected {expected}",
        "",
    ]
    if info and info.summary:
        lines += [info.summary, ""]
    sections = info.sections if info else {}
    bug = (
        sections.get("Bug")
        or (info.title if info else "")
        or "Not documented (operator not registered)."
    )
    lines += [f"**The bug.** {sentence(bug)}", ""]
    if sections.get("Impact"):
        lines += [f"**Documented impact.** {sentence(sections['Impact'])}", ""]
    diff, where = _minimal_diff(group, diffs)
    lines += [f"**Minimal diff** ({where}):" if where else "**Minimal diff:**", ""]
    lines += (["```diff", diff.rstrip("\n"), "```"] if diff else ["(no diff recorded)"]) + [""]
    lines += ["**What it does to the model, and how you would notice.**", ""]
    lines += [f"- {curve_sentence(row)}" for row in group.to_dict("records")]
    lines.append("")
    lines += [
        f"**Check that exposes it.** {sentence(sections.get('Check', 'Not documented.'))}",
        "",
    ]
    lines += [f"**Fix.** {sentence(sections.get('Fix', 'Not documented.'))}", ""]
    return lines


def sentence(text: str) -> str:
    """A docstring section as a paragraph: capitalised, reST ````code```` as Markdown `code`."""
    text = text.strip().replace("``", "`")
    return text[:1].upper() + text[1:]


def curve_sentence(row: dict[str, Any]) -> str:
    """One loop's numbers for one mutant, e.g. 'final/initial loss 1.00 [0.11], ...'."""
    facts = [
        ("held-out metric", "holdout_metric", "{:.3f}"),
        ("final/initial loss", "final_over_initial", "{:.2f}"),
        ("peak/initial", "max_over_initial", "{:.2f}"),
        ("log-loss slope over the last half per 100 steps", "log_slope_last_half", "{:+.3f}"),
        ("initial loss", "initial_loss", "{:.3g}"),
        ("final val metric", "val_metric_final", "{:.3f}"),
        ("training time (s)", "train_time_s", "{:.3g}"),
    ]
    parts = []
    for label, feature, fmt in facts:
        mine, ref = row.get(f"mutant_{feature}"), row.get(f"ref_{feature}")
        if _present(mine) or _present(ref):
            parts.append(f"{label} {_fmt(mine, fmt)} [{_fmt(ref, fmt)}]")
    labels = row.get("symptoms") or "none stable"
    outcome = row.get("outcome") or "as reference"
    unstable = f"; unstable: {row['unstable']}" if _present(row.get("unstable")) else ""
    where = f" at `{row['site']}`" if row.get("site") else ""
    head = f"`{row['loop']}` ({row['variant']}{where}, {row['n_seeds']} seeds): "
    if not parts and not is_valid(row["measured"]) and _present(row.get("why")):
        said = str(row["why"])  # set aside, not judged: why, in its own words
        return head + (
            said if said.startswith(str(row["measured"])) else f"{row['measured']}: {said}"
        )
    why = (
        f" {'Unjudged' if row['measured'] == UNJUDGED else 'Why not ' + str(row['expected'])}: "
        f"{row['why']}."
        if _present(row.get("why")) and row.get("why")
        else ""
    )
    return (
        head
        + ", ".join(parts)
        + f". Outcome: {outcome}; how you would notice: {labels}{unstable};"
        + f" measured {row['measured']}.{why}"
    )


def overview_line(tables: CatalogTables) -> str:
    runs, symptoms = tables.runs, tables.symptoms
    n_mutants = int((symptoms["role"] == "mutant").sum()) if len(symptoms) else 0
    n_loops = runs["loop"].nunique() if len(runs) else 0
    statuses = Counter(runs["status"]) if len(runs) else Counter()
    status_text = ", ".join(f"{count} {status}" for status, count in statuses.most_common())
    loops = "loop" if n_loops == 1 else "loops"
    return (
        f"{len(runs)} runs ({status_text or 'none'}), {n_mutants} mutants over {n_loops} {loops}."
    )


def control_line(control: dict[str, Any]) -> str:
    too_few = (control or {}).get("too_few_seeds") or []
    if too_few and not control.get("noop_groups"):
        return (
            f"Control (`noop`): no false-positive rate: {', '.join(too_few)} had fewer than "
            f"{MIN_SPREAD_SEEDS} reference seeds, so nothing was judged against a spread."
        )
    if not control or not control.get("noop_groups"):
        return "Control (`noop`): no unmutated runs on spare seeds, so no false-positive rate."
    fired = ", ".join(f"{label} x{count}" for label, count in control["labels_fired"].items())
    sets = ""
    if control.get("noop_sets"):
        sets = (
            f"{control['noop_sets_not_silent']} of {control['noop_sets']} seed-sets drawn from "
            f"the control pool non-silent (false-positive rate {_percent(control['set_fpr'])}, "
            f"95% CI {_interval(control.get('set_fpr_ci'))}; sets share runs, so this interval "
            "is optimistic); "
        )
    return (
        f"Control (`{NOOP}`: the unmutated loop on spare seeds, judged like a mutant): "
        f"{control['noop_groups_not_silent']} of {control['noop_groups']} loop groups non-silent "
        f"(false-positive rate {_percent(control['group_fpr'])}); {sets}"
        f"{control['noop_runs_labelled']} of {control['noop_runs']} runs carried a label "
        f"({_percent(control['run_fpr'])}, 95% CI {_interval(control.get('run_fpr_ci'))})"
        f"{': ' + fired if fired else ''}. Goal: <= 5%."
        + (
            f" Left out, with fewer than {MIN_SPREAD_SEEDS} reference seeds: {', '.join(too_few)}."
            if too_few
            else ""
        )
    )


def _interval(bounds: Any) -> str:
    if not bounds:
        return "n/a"
    low, high = bounds
    return f"{100 * low:.1f}-{100 * high:.1f}%"


def _diffs_by_identity(runs: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """identity -> (loop, diff) of the first run that recorded a diff."""
    diffs: dict[str, tuple[str, str]] = {}
    for identity, loop, diff in zip(runs["identity"], runs["loop"], runs["diff"]):
        if isinstance(diff, str) and diff and identity not in diffs:
            diffs[identity] = (loop, diff)
    return diffs


def _minimal_diff(group: pd.DataFrame, diffs: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """The shortest recorded diff among the operator's mutants, and where it comes from."""
    found = [(diffs[i][1], diffs[i][0], i) for i in group["identity"] if i in diffs]
    if not found:
        return "", ""
    diff, loop, identity = min(found, key=lambda item: len(item[0]))
    return diff, f"`{loop}`, `{identity}`"


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and pd.isna(value))


def _fmt(value: Any, fmt: str) -> str:
    return fmt.format(value) if _present(value) else "n/a"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"
