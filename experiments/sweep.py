"""From a sweep description (loops, operators, sites, seeds, device, budget) to RunSpecs.

The Hydra app (``experiments.run``) and anything else that sweeps build their runs here,
then hand them to ``experiments.harness.run_sweep``. A mutant the engine cannot build
becomes an ``invalid`` run (a sweep always finishes); an unknown operator or a missing
script is the caller's mistake and raises ``SweepError`` before anything runs.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from experiments.harness.spec import RunSpec
from mutations.registry import all_operators, all_variants, operator_classes, resolve
from mutator import MutationError, Operator, SourceFile

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ALL = "all"  # every operator, default parameters
VARIANTS = "variants"  # every operator plus each declared variant


class SweepError(ValueError):
    """The sweep description is wrong (unknown operator, missing script, bad selector)."""


@dataclass(frozen=True)
class Loop:
    """A training script and how to pass it epochs, seed and device."""

    script: str
    name: str | None = None
    args: tuple[str, ...] = ()
    epochs: int | None = None
    epochs_arg: str | None = "--epochs"
    seed_arg: str | None = "--seed"
    device_arg: str | None = "--device"
    holdout: str | None = None  # "module:function": held-out evaluation of the trained model

    @property
    def label(self) -> str:
        return self.name or Path(self.script).stem

    def argv(self, seed: int, device: str) -> tuple[str, ...]:
        argv = list(self.args)
        if self.epochs is not None and self.epochs_arg:
            argv += [self.epochs_arg, str(self.epochs)]
        if self.seed_arg:
            argv += [self.seed_arg, str(seed)]
        if self.device_arg:
            argv += [self.device_arg, device]
        return tuple(argv)


@dataclass(frozen=True)
class Limits:
    """Per-run resources (deadlines are the runner's ``Budget``)."""

    mem_cap_mb: int = 2048
    threads: int = 1
    sample_every: int = 20
    telemetry: bool = True
    timeout_s: float | None = None  # None: derived from the reference run


@dataclass(frozen=True)
class Sweep:
    loops: Sequence[Loop]
    operators: Sequence[str] = ()  # operator specs, "all" or "variants"; () = unmutated only
    sites: str = ALL  # "all", "first" (per operator) or a glob over mutant identities
    seeds: Sequence[int] = (0,)
    device: str = "cpu"
    reference: bool = True  # run the unmutated loop too (deadline and baseline)
    limits: Limits = field(default_factory=Limits)
    shard: tuple[int, int] = (0, 1)  # (index, count): this job's share of the runs


def find_script(script: str) -> Path:
    """A script path as given (relative to the working directory), else relative to the
    project (so ``reference_loops/mlp_digits.py`` works from anywhere)."""
    for candidate in (Path(script), PROJECT_ROOT / script):
        if candidate.is_file():
            return candidate.resolve()
    raise SweepError(
        f"training script not found: {script!r} (looked in {Path.cwd()} and {PROJECT_ROOT})"
    )


def check_holdout(spec: str | None) -> None:
    """A loop's held-out evaluation must name an importable ``module:function``."""
    if not spec:
        return
    from experiments.harness.holdout import resolve

    try:
        resolve(spec)
    except (ValueError, ImportError, AttributeError) as error:
        raise SweepError(
            f"loop.holdout={spec}: {error}; expected package.module:function, "
            "e.g. reference_loops.holdout.digits:scaled_pixels"
        ) from None


def operators_for(specs: Sequence[str]) -> list[Operator]:
    """Operator instances for specs like ``drop_zero_grad``, ``scale_lr(factor=0.01)``,
    ``all`` or ``variants``; an unknown name lists the valid ones."""
    chosen: list[Operator] = []
    for spec in specs:
        if spec == ALL:
            chosen.extend(all_operators())
        elif spec == VARIANTS:
            chosen.extend(all_variants())
        else:
            try:
                chosen.append(resolve(spec))
            except (KeyError, ValueError, TypeError) as error:
                valid = ", ".join([ALL, VARIANTS, *operator_classes()])
                message = error.args[0] if error.args else error
                raise SweepError(f"{message}\nvalid operators: {valid}") from None
    unique: dict[str, Operator] = {}
    for operator in chosen:
        unique.setdefault(operator.label, operator)
    return list(unique.values())


def build(sweep: Sweep) -> list[RunSpec]:
    """Every run of the sweep: per loop, the unmutated script (when ``reference``) and
    each selected mutant, for every seed. Shards split runs by key, so every job of a
    sharded sweep gets a stable, disjoint share (and every shard keeps the references,
    which set deadlines; the cache runs each once)."""
    if not sweep.seeds:
        raise SweepError("no seeds given")
    operators = operators_for(sweep.operators)
    specs: list[RunSpec] = []
    for loop in sweep.loops:
        path = find_script(loop.script)
        check_holdout(loop.holdout)
        source = path.read_text(encoding="utf-8")
        variants: list[tuple[dict | None, str, str | None]] = []
        if sweep.reference or not operators:
            variants.append((None, source, None))
        if operators:
            variants.extend(_mutants(path, source, operators, sweep.sites))
        for mutant, mutated, invalid_reason in variants:
            for seed in sweep.seeds:
                specs.append(
                    RunSpec(
                        script=str(path),
                        source=mutated,
                        argv=loop.argv(seed, sweep.device),
                        seed=seed,
                        device=sweep.device,
                        loop=loop.label,
                        mutant=mutant,
                        timeout_s=sweep.limits.timeout_s,
                        mem_cap_mb=sweep.limits.mem_cap_mb,
                        threads=sweep.limits.threads,
                        sample_every=sweep.limits.sample_every,
                        telemetry=sweep.limits.telemetry,
                        invalid_reason=invalid_reason,
                        holdout=loop.holdout,
                    )
                )
    return _shard(specs, *sweep.shard)


def _mutants(
    path: Path, source: str, operators: list[Operator], sites: str
) -> list[tuple[dict | None, str, str | None]]:
    try:
        parsed = SourceFile(source, path.name)
        found = parsed.find_sites(operators)
    except MutationError as error:
        raise SweepError(f"cannot mutate {path}: {error}") from None
    if sites == "first":
        seen: set[str] = set()
        found = [s for s in found if not (s.operator.label in seen or seen.add(s.operator.label))]
    elif sites != ALL:
        found = [s for s in found if fnmatch.fnmatchcase(s.identity, sites)]
    result: list[tuple[dict | None, str, str | None]] = []
    for site in found:
        try:
            mutant = parsed.apply([site])
        except Exception as error:  # an engine bug: a row that says so, not a dead sweep
            identity = {
                "identity": site.identity,
                "operators": [site.operator.name],
                "categories": [site.operator.category],
                "params": [dict(site.operator.params)],
                "lines": [site.line],
            }
            reason = f"{type(error).__name__}: {error}"
            # Distinct source text so the invalid run gets its own cache key.
            marker = f"# invalid mutant {site.identity}: {reason}\n"
            result.append((identity, marker, reason))
            continue
        result.append(({**mutant.manifest_entry(), "diff": mutant.diff}, mutant.source, None))
    return result


def _shard(specs: list[RunSpec], index: int, count: int) -> list[RunSpec]:
    if count < 1 or not 0 <= index < count:
        raise SweepError(f"shard index must be in [0, {count}), got {index}")
    if count == 1:
        return specs
    return [
        spec
        for spec in specs
        if spec.mutant is None
        or int(hashlib.sha256(spec.key.encode()).hexdigest(), 16) % count == index
    ]
