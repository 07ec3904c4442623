"""``trainwreck strength --loop L --operator OP [--direction up|down]``.

Searches the weakest setting of a parametric operator at which the bug shows in the
outcome, and separately in any symptom (``search.py``), prints the table and writes a CSV
and a plot (``RESULTS/strength/LOOP-OPERATOR-DIRECTION.{csv,png}``). A mistake in the
command (an unknown operator, one without a strength, a direction it does not have) is one
line and exit 2, before anything runs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import pandas as pd

from experiments.cli_support import Parser, UserError
from experiments.report.strength import STRENGTH_DIR
from experiments.strength.axes import Axis, axes_of, declared_parameters, parametric
from experiments.symptoms.sequential import MAX_SEEDS, MIN_SEEDS


def _parser() -> Parser:
    parser = Parser(
        prog="trainwreck strength",
        description="Find the weakest setting of a parametric operator at which its bug shows.",
    )
    parser.add_argument("--loop", required=True, help="a reference loop, e.g. mlp_digits")
    parser.add_argument("--operator", required=True, help=f"one of: {', '.join(parametric())}")
    parser.add_argument("--direction", choices=("up", "down"), help="for two-sided operators")
    parser.add_argument("--steps", type=int, default=4, help="bisection steps (default 4)")
    parser.add_argument(
        "--max-seeds", type=int, default=MAX_SEEDS, help=f"seed cap per setting ({MAX_SEEDS})"
    )
    parser.add_argument("--workers", type=int, help="runs at once (default: all cores)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. results_dir=DIR")
    return parser


def choose_axis(operator: str, direction: str | None) -> Axis:
    """The axis to search, or a UserError saying what would be right."""
    valid = ", ".join(parametric())
    try:
        declared = declared_parameters(operator)
    except KeyError:
        raise UserError(f"unknown operator {operator!r}; parametric operators: {valid}") from None
    axes = axes_of(operator)
    if not axes:
        what = "no parameters" if not declared else f"no strength axis ({', '.join(declared)})"
        raise UserError(f"operator {operator!r} has {what}; parametric operators: {valid}")
    if direction is None:
        return axes[0]
    for axis in axes:
        if axis.direction == direction:
            return axis
    have = ", ".join(axis.direction for axis in axes)
    raise UserError(f"operator {operator!r} has no direction {direction!r}; it has: {have}")


def strength_main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    axis = choose_axis(args.operator, args.direction)
    if not 1 <= args.steps <= 8:
        raise UserError(f"--steps must be between 1 and 8, got {args.steps}")
    if not MIN_SEEDS <= args.max_seeds <= 100:
        raise UserError(f"--max-seeds must be between {MIN_SEEDS} and 100, got {args.max_seeds}")
    for override in args.overrides:
        if "=" not in override:
            raise UserError(f"bad override {override!r}: expected key=value, e.g. results_dir=out/")
    from experiments.strength.runner import prepare

    session = prepare(args.loop, axis, args.overrides, args.workers, args.max_seeds)
    table, result, out = search_and_store(session, args.loop, args.steps)
    print(table.drop(columns=["loop", "operator", "direction"]).to_string(index=False))
    print(summary_line(result))
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.png')}", file=sys.stderr)
    return 0


def search_and_store(session, loop: str, steps: int):
    """Run the search; write its CSV and plot under ``RESULTS/strength/``."""
    from experiments.strength.plot import write_plot

    axis = session.axis
    result = session.search(steps)
    out = session.results_dir / STRENGTH_DIR / f"{loop}-{axis.operator}-{axis.direction}"
    table = result_table(result, loop)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out.with_suffix(".csv"), index=False)
    write_plot(result, out.with_suffix(".png"))
    return table, result, out


def result_table(result, loop: str) -> pd.DataFrame:
    axis = result.axis
    rows = [
        {
            "loop": loop,
            "operator": axis.operator,
            "direction": axis.direction,
            axis.param: point.value,
            "spec": point.spec,
            "seeds": point.n_seeds,
            "stopped": point.stopped,
            "measured": point.measured,
            "outcome": point.outcome,
            "symptoms": point.symptoms,
            "metric": point.metric,
            "shows_outcome": point.shows_outcome,
            "shows_symptom": point.shows_symptom,
            "outcome_threshold": point.value == result.outcome.threshold,
            "symptom_threshold": point.value == result.symptom.threshold,
        }
        for point in result.points
    ]
    frame = pd.DataFrame(rows)
    if axis.numeric and len(frame):
        frame = frame.sort_values(axis.param, ascending=axis.direction == "up")
    return frame.reset_index(drop=True)


def summary_line(result) -> str:
    axis = result.axis
    parts = []
    for name, found in (("the outcome", result.outcome), ("a symptom", result.symptom)):
        if found.threshold is None:
            parts.append(f"not in {name} up to {axis.param}={axis.strong}")
        else:
            low = found.bracket[0] if found.bracket else None
            between = f" (not at {low:.3g})" if isinstance(low, float) else ""
            parts.append(f"in {name} from {axis.param}={found.threshold}{between}")
    return f"{axis.operator} ({axis.direction}) shows " + "; ".join(parts)
