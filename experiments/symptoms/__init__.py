"""Symptoms: each mutant judged against the unmutated loop over the same seeds.

Two axes, never mixed. The *outcome* (``outcome.py``) is what the bug did to the trained
model: the run's status, the model's quality on the loop's held-out evaluation (or the
script's own val metric when the loop has none), a reported number that lies, extra time
or memory. Only the outcome sets the severity. The *symptoms* (``curve.py``) are how
someone watching would notice: curve shape, initial loss, the telemetry mechanisms (eval-
mode training, gradients in evaluation). Every label is one declared ``Label``
(``vocabulary.py``): name, axis, severity, whether it needs a finished run, which labels
suppress it, its check, and its description in plain words; ``docs/symptoms.md`` lists them.

Runs are grouped by (loop, device). Inside a group the *reference* is the unmutated loop
(identity ``none``) on the seeds the mutant ran with; if fewer than two of those finished,
all reference seeds of the group are used (``roles``: reference, noop control, mutants).
No verdict without a measure: a finished run that nothing measured (no held-out evaluation,
no reported validation number) is ``unjudged`` unless its curve proves a broken training;
labels judged against the reference's spread need ``MIN_SPREAD_SEEDS`` reference runs
(``too_few_seeds`` below that); labels the loop's noop control also shows are not evidence
(``unjudged`` says why a row has no verdict and how to get one).
Each seed of a mutant is judged on its own (``verdict``); over seeds a label's *fraction*
is the share of seeds in which it fired (below 80%: unstable), and the mutant's *measured
severity* is the worst level reached or exceeded in at least half of its seeds
(``seeds``); ``summary`` makes the mutant's row, ``judge`` runs it all per (loop,
device). A run that did not finish (crash, oom, timeout, killed, non-finite loss) has its
status as outcome; only labels that do not need a finished
run are read from its trace, marked ``@partial``; effect sizes (Cohen's d, Cliff's delta,
Mann-Whitney p) use finished runs only. Where the measured severity differs from the one
the operator declares, ``explain.disagreement`` says why, from the numbers. The control
(``control.py``) judges the unmutated loop on spare seeds like a mutant. Whether a mutant's
seeds were enough is the sequential rule of ``sequential.py`` (adaptive seeds,
docs/adaptive.md).
"""

from experiments.symptoms.control import control_warnings, noop_false_positives, seed_sets
from experiments.symptoms.curve import SYMPTOMS
from experiments.symptoms.explain import disagreement
from experiments.symptoms.judge import Judgement, judge
from experiments.symptoms.outcome import OUTCOMES, STATUS_LABELS
from experiments.symptoms.reference import (
    EFFECT_Z,
    JUDGED_FEATURES,
    MIN_SPREAD_SEEDS,
    SPREAD_FLOORS,
    Reference,
    cliffs_delta,
    cohens_d,
    rank_test,
    rank_tests,
    spread_floor,
    wilson_interval,
)
from experiments.symptoms.roles import NOOP, REFERENCE, assign_roles
from experiments.symptoms.runtable import SUMMARY_FEATURES
from experiments.symptoms.seeds import (
    STABLE_FRACTION,
    format_labels,
    label_fractions,
    measured_severity,
    severity_median,
)
from experiments.symptoms.summary import symptom_columns
from experiments.symptoms.unjudged import HOW_TO_MEASURE, unjudged_reason
from experiments.symptoms.verdict import (
    RunVerdict,
    crash_before_training,
    judge_run,
    scale_changes,
    verdict,
)
from experiments.symptoms.vocabulary import (
    LABELS,
    MARKERS,
    PARTIAL,
    SEVERITY_ORDER,
    TOO_FEW_SEEDS,
    UNJUDGED,
    Label,
    axis_of,
    label_of,
    severity_of,
)

__all__ = [
    "EFFECT_Z",
    "HOW_TO_MEASURE",
    "JUDGED_FEATURES",
    "LABELS",
    "MARKERS",
    "MIN_SPREAD_SEEDS",
    "NOOP",
    "OUTCOMES",
    "PARTIAL",
    "REFERENCE",
    "SEVERITY_ORDER",
    "SPREAD_FLOORS",
    "STABLE_FRACTION",
    "STATUS_LABELS",
    "SUMMARY_FEATURES",
    "SYMPTOMS",
    "TOO_FEW_SEEDS",
    "UNJUDGED",
    "Judgement",
    "Label",
    "Reference",
    "RunVerdict",
    "assign_roles",
    "axis_of",
    "cliffs_delta",
    "cohens_d",
    "control_warnings",
    "crash_before_training",
    "disagreement",
    "format_labels",
    "judge",
    "judge_run",
    "label_fractions",
    "label_of",
    "measured_severity",
    "noop_false_positives",
    "rank_test",
    "rank_tests",
    "scale_changes",
    "seed_sets",
    "severity_median",
    "severity_of",
    "spread_floor",
    "symptom_columns",
    "unjudged_reason",
    "verdict",
    "wilson_interval",
]
