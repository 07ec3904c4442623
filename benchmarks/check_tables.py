"""What a ``trainwreck test`` results table says about each check (benchmarks/bench_checks.py):
the mutants read from ``mutants.csv``, which check killed which, and the markdown tables of
docs/benchmarks.md's kill-rate sections."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from experiments.mutation_testing.report import markdown_table

CHECK_FAILED = "CheckFailed"
JUDGED = ("killed", "survived")
OTHER_STATUSES = ("unconfirmed", "timeout", "stillborn", "unreached")
NOT_JUDGED = ("unconfirmed", "timeout", "stillborn")  # ran, but no verdict to count
SUMMARY_OPERATORS = 6  # operators named per check in the short table


@dataclass(frozen=True)
class Mutant:
    """One row of a loop's ``mutants.csv``, as the tables need it."""

    loop: str
    identity: str
    operator: str
    category: str
    status: str
    caught_by: tuple[str, ...]  # the checks whose own test failed with CheckFailed
    other: tuple[tuple[str, str], ...]  # (test, what it failed with) of every other failure
    detail: str = ""  # trainwreck test's word on the mutant (why unconfirmed, what failed)

    @property
    def judged(self) -> bool:
        return self.status in JUDGED


def check_of(test_id: str) -> str:
    """The check a test id stands for: ``.../test_<loop>.py::test_overfit_batch[x]`` ->
    ``overfit_batch``; an id that is no test (``<exit status 1>``) stays as it is."""
    if "::" not in test_id:
        return test_id
    name = test_id.rpartition("::")[2].partition("[")[0]
    return name.removeprefix("test_")


def read_mutants(rows: Iterable[dict[str, str]], loop: str) -> list[Mutant]:
    """``mutants.csv`` rows (``csv.DictReader``) of one loop."""
    found = []
    for row in rows:
        if "failed_with" not in row:
            raise SystemExit(
                f"{loop}: mutants.csv has no failed_with column (an older trainwreck test "
                "wrote it); rerun without --aggregate-only"
            )
        tests = [test for test in row["killed_by"].split(";") if test]
        kinds = row["failed_with"].split(";") if row["failed_with"] else []
        kinds += [""] * (len(tests) - len(kinds))
        caught, other = [], []
        for test, kind in zip(tests, kinds):
            if kind.rpartition(":")[2] == CHECK_FAILED:
                caught.append(check_of(test))
            else:
                other.append((test, kind or "no record"))
        found.append(
            Mutant(
                loop=loop,
                identity=row["identity"],
                operator=row["operator"],
                category=row["category"],
                status=row["status"],
                caught_by=tuple(dict.fromkeys(caught)),
                other=tuple(other),
                detail=_reason(row) if row["status"] in NOT_JUDGED else "",
            )
        )
    return found


def _reason(row: dict[str, str]) -> str:
    """Why a mutant that ran has no verdict: the witness's word, then what failed."""
    return "; ".join(part for part in (row.get("witness", ""), row.get("detail", "")) if part)


def _rate(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "n/a"


def checks_in(mutants: Sequence[Mutant]) -> list[str]:
    """Every check that killed or failed otherwise at least once, by name."""
    names = {check for m in mutants for check in m.caught_by}
    names |= {check_of(test) for m in mutants for test, _ in m.other if "::" in test}
    return sorted(names)


def loop_table(mutants: Sequence[Mutant], wall_s: dict[str, float] | None = None) -> list[list]:
    """Per loop: how its mutants ended, and how many a check (not just the suite) killed."""
    head = ["loop", "mutants", "killed by a check", "killed otherwise only", "survived"]
    head += [*OTHER_STATUSES, "checks' score", "suite's score"]
    if wall_s is not None:
        head.append("wall s")
    lines = [head]
    groups: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        groups[mutant.loop].append(mutant)
    for loop in [*sorted(groups), "all"]:
        group = list(mutants) if loop == "all" else groups[loop]
        counts = Counter(m.status for m in group)
        by_check = sum(1 for m in group if m.status == "killed" and m.caught_by)
        judged = counts["killed"] + counts["survived"]
        line = [f"**{loop}**" if loop == "all" else loop, str(len(group)), str(by_check)]
        line += [str(counts["killed"] - by_check), str(counts["survived"])]
        line += [str(counts[status]) for status in OTHER_STATUSES]
        line += [_rate(by_check, judged), _rate(counts["killed"], judged)]
        if wall_s is not None:
            total = sum(wall_s.values()) if loop == "all" else wall_s.get(loop)
            line.append("" if total is None else f"{total:.0f}")
        lines.append(line)
    return lines


def check_table(mutants: Sequence[Mutant]) -> list[list[str]]:
    """Per check: the judged mutants it caught, those it alone caught, the loops and
    operators, and how often its test failed with something other than its verdict."""
    judged = [m for m in mutants if m.judged]
    lines = [["check", "caught (of judged)", "caught alone", "failed otherwise", "caught most"]]
    for check in checks_in(mutants):
        caught = [m for m in judged if check in m.caught_by]
        alone = sum(1 for m in caught if m.caught_by == (check,))
        otherwise = sum(1 for m in judged if any(check_of(t) == check for t, _ in m.other))
        top = Counter(m.operator for m in caught).most_common(4)
        most = ", ".join(f"{name} {count}" for name, count in top)
        lines.append([check, _rate(len(caught), len(judged)), str(alone), str(otherwise), most])
    return lines


def matrix(mutants: Sequence[Mutant], by: str = "category") -> list[list[str]]:
    """Checks x categories (or operators): caught / judged mutants of that column."""
    judged = [m for m in mutants if m.judged]
    columns = sorted({getattr(m, by) for m in judged})
    totals = Counter(getattr(m, by) for m in judged)
    lines = [["check", *(f"{c} (n={totals[c]})" for c in columns)]]

    def row(name: str, keep) -> list[str]:
        kept = Counter(getattr(m, by) for m in judged if keep(m))
        return [name, *(f"{kept[c]}" for c in columns)]

    for check in checks_in(mutants):
        lines.append(row(check, lambda m, check=check: check in m.caught_by))
    lines.append(row("**any check**", lambda m: bool(m.caught_by)))
    lines.append(row("killed otherwise only", lambda m: m.status == "killed" and not m.caught_by))
    lines.append(row("**survived**", lambda m: m.status == "survived"))
    return lines


def operator_table(mutants: Sequence[Mutant]) -> list[list[str]]:
    """Per operator: which checks caught its mutants, and how the others ended."""
    head = ["operator", "category", "mutants", "caught by a check", "by which checks"]
    lines = [[*head, "killed otherwise only", "survived", *OTHER_STATUSES]]
    groups: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        groups[mutant.operator].append(mutant)
    for operator in sorted(groups):
        group = groups[operator]
        counts = Counter(m.status for m in group)
        caught = [m for m in group if m.status == "killed" and m.caught_by]
        which = Counter(check for m in caught for check in m.caught_by).most_common()
        line = [operator, group[0].category, str(len(group)), str(len(caught))]
        line.append(", ".join(f"{name} {count}" for name, count in which))
        line += [str(counts["killed"] - len(caught)), str(counts["survived"])]
        lines.append(line + [str(counts[status]) for status in OTHER_STATUSES])
    return lines


def uncaught(mutants: Sequence[Mutant]) -> list[list[str]]:
    """The judged mutants no check caught (survived, or killed otherwise only), per
    operator, with the loops they are in."""
    lines = [["operator", "category", "no check caught", "of judged", "in loops"]]
    groups: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        if mutant.judged:
            groups[mutant.operator].append(mutant)
    for operator in sorted(groups):
        missed = [m for m in groups[operator] if not m.caught_by]
        if not missed:
            continue
        loops = Counter(m.loop for m in missed)
        where = ", ".join(f"{loop} {count}" for loop, count in sorted(loops.items()))
        judged = str(len(groups[operator]))
        lines.append([operator, missed[0].category, str(len(missed)), judged, where])
    return lines


def other_kills(mutants: Sequence[Mutant]) -> list[list[str]]:
    """Mutants the suite killed with no check's verdict: what each failing test raised."""
    lines = [["mutant", "loop", "what its failing tests failed with"]]
    for m in mutants:
        if m.status == "killed" and not m.caught_by:
            kinds = Counter(kind for _test, kind in m.other)
            what = ", ".join(
                f"{kind} ({count} {'tests' if count > 1 else 'test'})"
                for kind, count in kinds.items()
            )
            lines.append([f"`{m.identity.rpartition('/')[2]}`", m.loop, what])
    return lines


def summary(mutants: Sequence[Mutant]) -> list[list[str]]:
    """The short table for docs/checks.md: per check, what it caught; then what none did."""
    judged = [m for m in mutants if m.judged]
    lines = [["check", "caught (of judged mutants)", "the bugs it catches most (operator mutants)"]]
    for check in checks_in(mutants):
        caught = [m for m in judged if check in m.caught_by]
        if not caught:
            continue
        top = Counter(m.operator for m in caught).most_common()
        most = ", ".join(f"{n} {c}" for n, c in top[:SUMMARY_OPERATORS])
        if len(top) > SUMMARY_OPERATORS:
            most += f", {len(top) - SUMMARY_OPERATORS} more operators"
        lines.append([check, _rate(len(caught), len(judged)), most])
    missed = Counter(m.operator for m in judged if not m.caught_by)
    never = sorted(op for op in missed if not any(op == m.operator and m.caught_by for m in judged))
    lines.append(
        [
            "**no check**",
            _rate(sum(missed.values()), len(judged)),
            "never caught: "
            + (", ".join(never) or "none")
            + f"; sometimes missed: {', '.join(sorted(set(missed) - set(never))) or 'none'}",
        ]
    )
    return lines


def grouped(mutants: Sequence[Mutant], groups: dict[str, str]) -> list[list[str]]:
    """Per group of tests (``label`` -> a test-name prefix, e.g. every ``fit_step_*`` test
    driving a ``fit()`` API through ``make_fit_step``): the judged mutants any of them
    caught, and by which operators."""
    judged = [m for m in mutants if m.judged]
    lines = [["group", "its tests", "caught (of judged)", "operators caught"]]
    for label, prefix in groups.items():
        members = [c for c in checks_in(mutants) if c.startswith(prefix)]
        caught = [m for m in judged if any(c.startswith(prefix) for c in m.caught_by)]
        top = Counter(m.operator for m in caught).most_common()
        operators = ", ".join(f"{name} {count}" for name, count in top)
        lines.append([label, ", ".join(members), _rate(len(caught), len(judged)), operators])
    return lines


def unjudged(mutants: Sequence[Mutant]) -> list[list[str]]:
    """Mutants that ran but have no verdict to count (unconfirmed, timeout, stillborn), with
    trainwreck test's reason: a check's failure on an unconfirmed mutant is not counted."""
    lines = [["mutant", "status", "trainwreck test's reason"]]
    for m in mutants:
        if m.status in NOT_JUDGED:
            reason = m.detail.replace("|", "/").replace("\n", " ")
            lines.append([f"`{m.identity.rpartition('/')[2]}`", m.status, reason])
    return lines


def render(
    mutants: Sequence[Mutant],
    header: Sequence[str],
    wall_s: dict[str, float] | None,
    groups: dict[str, str] | None = None,
    with_unjudged: bool = False,
) -> str:
    sections = [
        ("Per loop", loop_table(mutants, wall_s)),
        ("Summary: which check catches which bugs", summary(mutants)),
        ("Per check", check_table(mutants)),
        ("Checks by category (judged mutants caught)", matrix(mutants)),
        ("Per operator", operator_table(mutants)),
        ("Bugs no check catches (judged, not caught by any check)", uncaught(mutants)),
        (
            "Killed, but by no check (a crash under a test, or the test's plumbing)",
            other_kills(mutants),
        ),
    ]
    if groups:
        sections.insert(2, ("Groups of tests", grouped(mutants, groups)))
    if with_unjudged:
        sections.append(("Ran, but not judged (no verdict counted)", unjudged(mutants)))
    parts = [*header, ""]
    for title, cells in sections:
        body = markdown_table(cells) if len(cells) > 1 else "None."
        parts += [f"### {title}", "", body, ""]
    return "\n".join(parts)


# -- running ----------------------------------------------------------------------------------
