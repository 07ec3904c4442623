"""Does a mutant of the fixed file make the real fault? Static coupling (issue 32).

The *fault* is the part of the fix's diff that the pinned lines touch: the statement-level
edits (``experiments.bench.real.diff``) that turn the fixed file back into the faulty one, restricted
to those whose faulty-side lines meet the fault's lines (a fix commit that also reformats or
renames elsewhere keeps only its fault). Every operator, with each declared variant, mutates
the fixed file (``SourceFile.find_sites(all_variants())``). Verdicts:

- ``exact``: one mutant's edits against the fixed file are exactly the fault's edits (same
  statements, same normalised code). A fault made of several edits (a statement moved, four
  copies of one line) is also ``exact`` when non-overlapping first-order sites whose edits
  are each part of the fault together make it: their higher-order mutant is built and its
  edits checked again (``order`` > 1).
- ``partial``: no exact mutant, but the operator that stands for the fault has a site in
  the fixed file (another place or another strength), or a mutant of the fault class's
  operator category changes one of the fault's statements.
- ``none``: neither. The fault's ``operator`` names what would make it: a registered
  operator whose matcher finds no site here, or a proposed one.

``equivalent`` is decided at run time (``experiments.bench.real.runs``), never here.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

from experiments.bench.real.diff import Edit, diff, flatten, identities
from experiments.bench.real.replay import CATEGORY_OF_CLASS, Fault, Pair
from mutations.registry import all_variants, operator_classes
from mutator import MutationError, SourceFile

EXACT, EQUIVALENT, PARTIAL, NONE, UNREAD = "exact", "equivalent", "partial", "none", "unread"
VERDICTS = (EXACT, EQUIVALENT, PARTIAL, NONE)
MAX_ORDER = 4  # a fault of more edits than this is not searched as a higher-order mutant


@dataclass
class Coupling:
    fault: Fault
    verdict: str
    operators: tuple[str, ...] = ()  # what made the verdict (exact or partial)
    identity: str = ""  # the exact mutant's identity
    source: str = ""  # the exact mutant's text (the fixed file rewritten)
    entry: dict = field(default_factory=dict)  # the exact mutant's manifest entry
    order: int = 0
    reason: str = ""
    mutants: int = 0
    fault_edits: int = 0
    candidates: list[str] = field(default_factory=list)  # identities worth running

    @property
    def registered(self) -> bool:
        return self.fault.operator in operator_classes()


def fault_edits(fault: Fault, pair: Pair) -> tuple[list[Edit], list]:
    """The fault's edits (fixed -> faulty) and the fixed file's entries."""
    fixed = flatten(pair.fixed)
    edits = diff(fixed, flatten(pair.faulty))
    lines = set(fault.lines)
    return [edit for edit in edits if edit.touches_b(lines)], fixed


def _fixed_lines(edits: list[Edit]) -> set[int]:
    lines: set[int] = set()
    for edit in edits:
        lines.update(range(edit.a_lines[0], min(edit.a_lines[1], edit.a_lines[0] + 200) + 1))
    return lines


def couple(fault: Fault, pair: Pair, operators=None) -> Coupling:
    """The static verdict for one fault (module docstring)."""
    try:
        wanted, fixed_entries = fault_edits(fault, pair)
    except SyntaxError as error:
        return Coupling(fault, UNREAD, reason=f"does not parse: {error.msg} (line {error.lineno})")
    if not wanted:
        return Coupling(fault, UNREAD, reason="the pinned lines touch no statement the fix changed")
    target = identities(wanted)
    try:
        source = SourceFile(pair.fixed, fault.path.rsplit("/", 1)[-1])
        survey = source.survey(all_variants() if operators is None else operators)
    except MutationError as error:
        return Coupling(fault, UNREAD, reason=f"the engine cannot read the fixed file: {error}")
    sites = survey.sites
    result = Coupling(fault, NONE, mutants=len(sites), fault_edits=len(wanted))
    region = _fixed_lines(wanted)
    parts: dict[str, list] = defaultdict(
        list
    )  # operator label -> sites whose edits are in the fault
    same_kind: set[str] = set()
    category = CATEGORY_OF_CLASS.get(fault.fault_class)
    for site in sites:
        try:
            mutant = source.apply([site])
            edits = identities(diff(fixed_entries, flatten(mutant.source)))
        except (MutationError, SyntaxError):
            continue
        if edits == target:
            return _exact(result, [site], mutant)
        if edits and _inside(edits, target):
            parts[site.operator.label].append(site)
        at_fault = bool(category) and site.operator.category == category
        if site.operator.name == fault.operator or (at_fault and set(mutant.lines) & region):
            same_kind.add(site.operator.name)
            result.candidates.append(mutant.identity)
    combined = _higher_order(source, fixed_entries, parts, target)
    if combined is not None:
        chosen, mutant = combined
        return _exact(result, chosen, mutant)
    if same_kind:
        result.verdict = PARTIAL
        result.operators = tuple(sorted(same_kind))
        result.reason = (
            f"{fault.operator} has a site here, but not the fault's code"
            if fault.operator in same_kind
            else f"a {category} mutant changes the fault's statements, not into the fault"
        )
        return result
    gated = _gated_exact(source, fixed_entries, survey.rejected, target)
    if gated is not None:
        result.reason = (
            f"the gate rejects the exact mutant ({gated.site.operator.label}): {gated.reason}"
        )
    elif result.registered:
        turned_down = [
            place
            for place in survey.rejected
            if place.site.operator.name == fault.operator and place.site.line in region
        ]
        result.reason = (
            f"{fault.operator} is registered; its place here is rejected: {turned_down[0].reason}"
            if turned_down
            else f"{fault.operator} is registered but finds no site here"
        )
    else:
        result.reason = f"needs the proposed operator {fault.operator}"
    return result


def _inside(edits: frozenset, target: frozenset) -> bool:
    """Is every edit part of one of the fault's: its statements inside that edit's span,
    its new code among that edit's (two neighbouring lines a fault changes together are
    one edit of the fault, but two sites)?"""
    return all(
        any(
            t_start <= start and end <= t_end and set(new) <= set(t_new)
            for t_start, t_end, t_new in target
        )
        for start, end, new in edits
    )


def _gated_exact(source: SourceFile, fixed_entries, rejected: list, target: frozenset):
    """A place the static gate turned down whose mutant would have been the fault."""
    for place in rejected:
        if not place.site.edits:  # a declared non-site has no rewrite to build
            continue
        try:
            mutant = source.apply([place.site])
            edits = identities(diff(fixed_entries, flatten(mutant.source)))
        except (MutationError, SyntaxError):
            continue
        if edits == target:
            return place
    return None


def _exact(result: Coupling, sites: list, mutant) -> Coupling:
    result.verdict = EXACT
    result.operators = tuple(sorted({site.operator.name for site in sites}))
    result.identity = mutant.identity
    result.source = mutant.source
    result.entry = mutant.manifest_entry()
    result.order = len(sites)
    result.candidates = [mutant.identity]
    return result


def _higher_order(source: SourceFile, fixed_entries, parts: dict[str, list], target: frozenset):
    """Non-overlapping sites of one operator whose higher-order mutant is the fault."""
    for sites in parts.values():
        for size in range(2, min(len(sites), MAX_ORDER) + 1):
            for chosen in itertools.combinations(sites, size):
                try:
                    mutant = source.apply(list(chosen))
                    edits = identities(diff(fixed_entries, flatten(mutant.source)))
                except (MutationError, SyntaxError):
                    continue
                if edits == target:
                    return list(chosen), mutant
    return None
