"""Tables of the real-fault coupling (issue 32): per fault, per class, per operator.

Rates are over the faults that were read; a fault whose mirror is missing or whose file
does not parse is ``unread``, counted apart and never as uncoupled.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from experiments.bench.real.coupling import EQUIVALENT, EXACT, NONE, PARTIAL, UNREAD, Coupling
from experiments.bench.real.replay import CLASSES
from mutations.registry import operator_classes


def _ratio(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "n/a"


def coupled(c: Coupling) -> bool:
    return c.verdict in (EXACT, EQUIVALENT)


def fault_table(results: list[Coupling]) -> list[str]:
    rows = [
        "| fault | class | verdict | by | operator that stands for it | note |",
        "|---|---|---|---|---|---|",
    ]
    for c in results:
        by = ", ".join(c.operators) + (f" (order {c.order})" if c.order > 1 else "")
        wanted = c.fault.operator + ("" if c.registered else " (proposed)")
        note = c.reason if c.verdict in (NONE, PARTIAL, UNREAD) else c.identity
        rows.append(
            f"| {c.fault.id} | {c.fault.fault_class} | {c.verdict} | {by} | {wanted} | {note} |"
        )
    return rows


def summary(results: list[Coupling]) -> list[str]:
    counts = Counter(c.verdict for c in results)
    read = [c for c in results if c.verdict != UNREAD]
    repos = len({c.fault.repository for c in results})
    lines = [
        f"{len(results)} faults from {repos} repositories; {len(read)} read, "
        f"{counts[UNREAD]} unread.",
        f"exact {counts[EXACT]}, equivalent {counts[EQUIVALENT]}, partial {counts[PARTIAL]}, "
        f"none {counts[NONE]}.",
        f"Coupled (exact or equivalent): {_ratio(sum(coupled(c) for c in read), len(read))}; "
        f"with partial: {_ratio(sum(c.verdict != NONE for c in read), len(read))}.",
    ]
    return lines


def class_table(results: list[Coupling]) -> list[str]:
    rows = [
        "| class | faults | exact | equivalent | partial | none | coupled | coupling operators |",
        "|---|---|---|---|---|---|---|---|",
    ]
    by_class: dict[str, list[Coupling]] = defaultdict(list)
    for c in results:
        if c.verdict != UNREAD:
            by_class[c.fault.fault_class].append(c)
    for name in CLASSES:
        group = by_class.get(name, [])
        if not group:
            continue
        counts = Counter(c.verdict for c in group)
        ops = sorted({op for c in group if coupled(c) for op in c.operators})
        rows.append(
            f"| {name} | {len(group)} | {counts[EXACT]} | {counts[EQUIVALENT]} | "
            f"{counts[PARTIAL]} | {counts[NONE]} | {_ratio(sum(map(coupled, group)), len(group))} "
            f"| {', '.join(ops) or '-'} |"
        )
    return rows


def operator_table(results: list[Coupling]) -> list[str]:
    """Registered operators: the faults each couples or nearly couples; proposed operators:
    the faults that need them."""
    exact: dict[str, list[str]] = defaultdict(list)
    near: dict[str, list[str]] = defaultdict(list)
    needed: dict[str, list[str]] = defaultdict(list)
    for c in results:
        if coupled(c):
            for op in c.operators:
                exact[op].append(c.fault.id)
        elif c.verdict in (PARTIAL, NONE):
            for op in c.operators:
                near[op].append(c.fault.id)
            needed[c.fault.operator].append(c.fault.id)
    registered = operator_classes()
    rows = [
        "| operator | registered | couples | partial for | needed by (uncoupled) |",
        "|---|---|---|---|---|",
    ]
    for op in sorted(set(exact) | set(near) | set(needed)):
        rows.append(
            f"| {op} | {'yes' if op in registered else 'proposed'} | "
            f"{', '.join(exact.get(op, [])) or '-'} | {', '.join(near.get(op, [])) or '-'} | "
            f"{', '.join(needed.get(op, [])) or '-'} |"
        )
    return rows


def registry_table(results: list[Coupling]) -> list[str]:
    """Every registered operator, with the real faults it couples with (exact or
    equivalent) or "none found yet", and those it has a partial site for."""
    exact: dict[str, list[str]] = defaultdict(list)
    near: dict[str, list[str]] = defaultdict(list)
    for c in results:
        for op in c.operators:
            (exact if coupled(c) else near)[op].append(c.fault.id)
    rows = [
        "| operator | category | couples with (real faults) | partial for |",
        "|---|---|---|---|",
    ]
    for name, cls in sorted(operator_classes().items()):
        rows.append(
            f"| {name} | {cls.category} | {', '.join(exact.get(name, [])) or 'none found yet'} "
            f"| {', '.join(near.get(name, [])) or '-'} |"
        )
    return rows


def render(results: list[Coupling]) -> str:
    parts = [
        "## Summary",
        "",
        *summary(results),
        "",
        "## Per class",
        "",
        *class_table(results),
        "",
        "## Per operator",
        "",
        *operator_table(results),
        "",
        "## Per fault",
        "",
        *fault_table(results),
    ]
    return "\n".join(parts) + "\n"


def as_json(results: list[Coupling]) -> list[dict]:
    return [
        {
            "id": c.fault.id,
            "repository": c.fault.repository,
            "fix": c.fault.fix,
            "path": c.fault.path,
            "class": c.fault.fault_class,
            "verdict": c.verdict,
            "operators": list(c.operators),
            "order": c.order,
            "identity": c.identity,
            "needed_operator": c.fault.operator,
            "registered": c.registered,
            "reason": c.reason,
            "mutants": c.mutants,
            "fault_edits": c.fault_edits,
        }
        for c in results
    ]
