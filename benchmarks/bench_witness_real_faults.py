"""Do the witnesses of the operators that stand for real faults (issue 32) fire on their
mutants, and stay silent on the unmutated scripts? (issue 28's rule, for those operators)

    python benchmarks/bench_witness_real_faults.py [--seeds 0,1] [--out DIR]

Every mutant of the 21 operators in the scripts below (the style scripts that have their
sites, the reference loops that have some) runs through the harness beside the unmutated
script on each seed, and ``experiments.witness.decide_runs`` judges each run against the
unmutated run of its seed. Then each script's unmutated run is run again (a second
results folder) and judged as each operator's mutant against the first: a witness that
fires there is one that fires on no bug. Prints a markdown table per operator for
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.harness import run_sweep  # noqa: E402
from experiments.sweep import Loop, Sweep, build  # noqa: E402
from experiments.witness import CONFIRMED, decide, decide_runs, operator_parts  # noqa: E402
from mutations.registry import operator_classes  # noqa: E402

OPERATORS = [
    "train_mode_outside_loop",
    "stale_fake_in_generator_loss",
    "wrong_network_in_loss",
    "drop_detach_in_loss",
    "hoist_loop_reset",
    "to_device_not_assigned",
    "softmax_overwrites_logits",
    "drop_loss_reduction",
    "clamp_bound_flipped",
    "normalize_by_wrong_stat",
    "optimizer_misses_params",
    "swap_loss_targets",
    "metric_into_train_accumulator",
    "clip_per_micro_step",
    "drop_class_weight_term",
    "interpolation_weight_per_element",
    "last_item_instead_of_list",
    "dropout_on_logits",
    "loss_weight_applied_twice",
    "flatten_all_dims_before_loss",
    "linspace_includes_endpoint",
]
STYLES, LOOPS = "tests/styles/", "reference_loops/"
NO_DEVICE = dict(device_arg=None)
SCRIPTS = {
    "actor_critic_chain": dict(epochs=20, epochs_arg="--episodes", **NO_DEVICE),
    "two_head_focal": dict(epochs=2, **NO_DEVICE),
    "wgan_gp_toy": dict(epochs=20, epochs_arg="--iterations", **NO_DEVICE),
    "sine_tokens_lm": dict(epochs=40, epochs_arg="--steps", **NO_DEVICE),
    "siamese": dict(epochs=1, args=("--pairs", "512")),
    "mnist_nll": dict(epochs=1, **NO_DEVICE),
    "rnn_digits": dict(epochs=1, **NO_DEVICE),
    "flat_script": dict(epochs_arg=None, seed_arg=None, **NO_DEVICE),
    "fit_library": dict(epochs=2, **NO_DEVICE),
    "segmentation_callbacks": dict(epochs=2, args=("--n-images", "128")),
    "channels_last_cifar": dict(epochs=1, **NO_DEVICE),
    "imagenet_trainer": dict(epochs=1, **NO_DEVICE),
    "manual_sgd_regression": dict(epochs=5, **NO_DEVICE),
    "dcgan": dict(epochs=1, epochs_arg="--niter", **NO_DEVICE),
    "functional_losses": dict(epochs_arg=None, seed_arg=None, **NO_DEVICE),
    "vae": dict(epochs=1),
    "char_lm": dict(epochs=1),
    "regression_diabetes": dict(epochs=3),
    "cnn_digits": dict(epochs=1),
    "binary_cancer": dict(epochs=3),
    "functional_digits": dict(epochs=2),
}
REFERENCE_LOOPS = {"char_lm", "regression_diabetes", "cnn_digits", "binary_cancer"}
REFERENCE_LOOPS |= {"functional_digits"}


def loop_of(name: str) -> Loop:
    folder = LOOPS if name in REFERENCE_LOOPS else STYLES
    return Loop(script=f"{folder}{name}.py", **SCRIPTS[name])


def measure(seeds: list[int], out: Path) -> tuple[dict, dict, list[bool]]:
    """Per operator its (script, identity, verdict) runs; per (script, operator, seed) the
    verdict of a second unmutated run judged as that operator's mutant against the first;
    per unmutated run, whether the second repeats every one of its witness facts."""
    runs: dict[str, list] = defaultdict(list)
    silent: dict[tuple[str, str, int], object] = {}
    same: list[bool] = []
    for name in SCRIPTS:
        loop = loop_of(name)
        rows = run_sweep(build(Sweep(loops=[loop], operators=OPERATORS, seeds=seeds)), out / "a")
        again = run_sweep(build(Sweep(loops=[loop], seeds=seeds)), out / "b")
        first = {row["seed"]: row for row in rows if not row["operators"]}
        present = set()
        for row, verdict in zip(rows, decide_runs(rows)):
            if verdict is not None:
                runs[row["operators"][0]].append((name, row["identity"], verdict))
                present.add(row["operators"][0])
        for operator in present:
            parts = operator_parts([operator], [{}])
            for second in again:
                silent[(name, operator, second["seed"])] = decide(
                    parts, second, first[second["seed"]]
                )
        same += [second["witness"] == first[second["seed"]]["witness"] for second in again]
    return runs, silent, same


def table(runs: dict, silent: dict) -> list[str]:
    classes = operator_classes()
    lines = [
        "| operator | witness | mutants (scripts) | runs confirmed | unconfirmed: why "
        "| fires on the unmutated script | what a confirmed run showed |",
        "|---|---|---|---|---|---|---|",
    ]
    for operator in OPERATORS:
        found = runs.get(operator, [])
        mutants = {(script, identity) for script, identity, _ in found}
        scripts = sorted({script for script, _ in mutants})
        confirmed = [v for _, _, v in found if v.state == CONFIRMED]
        why = sorted({v.text.split(":")[0] for _, _, v in found if v.state != CONFIRMED})
        fired = sum(
            1 for (_, op, _), v in silent.items() if op == operator and v.state == CONFIRMED
        )
        checked = sum(1 for (_, op, _) in silent if op == operator)
        shown = confirmed[0].text if confirmed else ""
        spec = classes[operator].witness.spec.replace("|", "\\|")  # inside a table cell
        lines.append(
            f"| {operator} | `{spec}` | {len(mutants)} "
            f"({', '.join(scripts)}) | {len(confirmed)}/{len(found)} | {'; '.join(why)} "
            f"| {fired}/{checked} | {shown[:110]} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--out", default=None, help="results folder (default: a fresh one)")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        runs, silent, same = measure(seeds, Path(args.out or scratch))
    lines = table(runs, silent)
    made = sum(len(found) for found in runs.values()) + 2 * len(same)
    lines.append(
        f"\n{made} runs, seeds {seeds}, {time.perf_counter() - started:.0f} s; "
        f"{platform.processor() or platform.machine()}. Unmutated runs whose every witness "
        f"fact a second run repeats: {sum(same)}/{len(same)}."
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
