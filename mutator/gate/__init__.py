"""The static gate: before a site is listed, its mutant must be the bug its operator names.

Every site of every operator passes the same checks (no per-operator special cases); an
operator opts into the checks of what it claims (``Operator.claims``):

- ``unbound_name``: the mutant reads no name that is unbound where it reads it (a name of
  another function's scope copied into an evaluation function: ``NameError``), and removes
  no binding a remaining line still reads (LibCST scope analysis, ``names``);
- ``call_keyword``: no keyword is added to the call of a module instance whose ``forward``
  cannot take it (``criterion(out, y, reduction="sum")``: ``TypeError``; ``calls``);
- ``slice_direction`` (claim ``shrinks_slice``): every slice bound the mutant edits makes
  the sliced part smaller (``idx[:-n_test]`` keeps more rows as ``n_test`` shrinks);
- ``training_loader`` (claim ``training_loader``): the DataLoader the mutant edits feeds the
  loss that is backwarded (a loader built inside an evaluation function does not).

An operator declares the places it knows are not its bug (equivalent mutants, effects
other than its name) by returning ``NonSite(reason)``: check ``non_site``. A place in code
of a context the operator leaves out (``Operator.contexts``: plotting, export, evaluation
for bugs of the training step) is rejected by check ``context``.

A rejected site keeps its identity and reason (``Rejected``; ``trainwreck mutate --list
--rejected``). ``STILLBORN_ERRORS`` names, per check, the Python errors a mutant the check
missed would raise: a runtime check that sees one of them at a changed line can report the
mutant with the same check name and kind of reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mutator.gate.calls import unknown_keyword
from mutator.gate.claims import loader_off_path, slice_moves_wrong_way
from mutator.gate.names import unbound_name
from mutator.operator import Operator
from mutator.semantics.roles import CONTEXTS
from mutator.site import Site

if TYPE_CHECKING:
    from mutator.context import Context

NON_SITE = "non_site"
OFF_CONTEXT = "context"
# check -> the Python-level errors its failure shows as at run time (none: a wrong effect).
STILLBORN_ERRORS: dict[str, tuple[str, ...]] = {
    NON_SITE: (),
    OFF_CONTEXT: (),
    "unbound_name": ("NameError", "UnboundLocalError"),
    "call_keyword": ("TypeError",),
    "slice_direction": (),
    "training_loader": (),
}


@dataclass(frozen=True)
class Rejected:
    """A place that is no site, with the check that said so and why (one line)."""

    site: Site
    check: str
    reason: str

    def line(self, path: str) -> str:
        """flake8-style: ``path:line:col operator identity REJECTED: reason``."""
        site = self.site
        return (
            f"{path}:{site.line}:{site.column + 1} {site.operator.label} {site.identity} "
            f"REJECTED: {self.reason}"
        )


def off_context(operator: Operator, context: str) -> str:
    """Why a place in ``context`` code is no site of ``operator`` (``Operator.contexts``)."""
    where = ", ".join(c for c in CONTEXTS if c in operator.contexts)
    return f"in {context} code: this bug belongs to {where} code"


def screen(site: Site, ctx: Context) -> tuple[str, str] | None:
    """(check, reason) for the first check ``site`` fails, None when it passes them all."""
    edits = list(site.edits.values())
    reason = unbound_name(edits, ctx)
    if reason is not None:
        return "unbound_name", reason
    reason = unknown_keyword(edits, ctx)
    if reason is not None:
        return "call_keyword", reason
    claims = site.operator.claims
    if "shrinks_slice" in claims:
        reason = slice_moves_wrong_way(edits, ctx)
        if reason is not None:
            return "slice_direction", reason
    if "training_loader" in claims:
        reason = loader_off_path(edits, ctx)
        if reason is not None:
            return "training_loader", reason
    return None
