"""Mutants measured to be equivalent to their reference loop, declared with the measurement.

An equivalent mutant changes the code but not what the loop computes (beyond float
rounding), so its "silent" says nothing about how visible the bug is. Where the reference
setting could honestly change so the bug bites, it was changed instead (resume_digits'
StepLR now decays after the resume point, see docs/benchmarks.md "Equivalent mutants
(#14)"). The rest are listed here; the catalog's ``why`` column shows
``equivalent (reason)`` for them instead of an unexplained "silent".

Keyed by (loop, mutant identity): identities name the script's file, not its folder, so a
user's script of the same name must not inherit a reference loop's measurement.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Equivalent:
    reason: str  # why the mutant computes the same thing, in the loop's terms
    measured: str  # what was run and what it showed


# Features standardized by their training std: the smallest std is far above 1e-8, so
# dropping the epsilon moves no printed number (losses differ by float rounding only).
_STD_FAR_ABOVE_EPS = (
    "every feature's training std is far above the 1e-8 epsilon (smallest {std}), "
    "so dividing by std alone gives the same features up to float rounding"
)
EQUIVALENTS: dict[tuple[str, str], Equivalent] = {
    ("binary_cancer", "binary_cancer.py::make_loaders::missing_epsilon#0"): Equivalent(
        _STD_FAR_ABOVE_EPS.format(std="2.6e-3"),
        "seeds 0-2, 30 epochs: printed curves identical, traced losses within 1.2e-7",
    ),
    ("regression_diabetes", "regression_diabetes.py::main::missing_epsilon#0"): Equivalent(
        _STD_FAR_ABOVE_EPS.format(std="4.8e-2"),
        "seeds 0-2, 30 epochs: printed curves identical, traced losses within 4.8e-7",
    ),
}


def equivalent(loop: str, identity: str) -> Equivalent | None:
    """The declared measurement when this mutant of this loop is equivalent, else None."""
    return EQUIVALENTS.get((loop, identity))


def declared_equivalent(loop: str, identity: str) -> str:
    """The declared measurement of an equivalent mutant in one line, else empty."""
    found = equivalent(loop, identity)
    return found.measured if found else ""


def why_equivalent(loop: str, identity: str) -> str:
    """``equivalent (reason)`` for a declared equivalent mutant, else an empty string."""
    found = equivalent(loop, identity)
    return f"equivalent ({found.reason})" if found else ""
