"""From a sweep description (loops, operators, sites, seeds, device, budget) to RunSpecs.

The Hydra app (``experiments.run``) and anything else that sweeps build their runs here,
then hand them to ``experiments.harness.run_sweep``. A mutant the engine cannot build
becomes an ``invalid`` run (a sweep always finishes); an unknown operator or a missing
script is the caller's mistake and raises ``SweepError`` before anything runs.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from experiments import interrupt
from experiments.harness import reach
from experiments.harness.spec import RunSpec, Splice, source_sha
from experiments.project_files import mutated_files
from mutations.registry import all_operators, all_variants, operator_classes, resolve
from mutator import MutationError, Operator, SourceFile
from mutator.project import Project

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ALL = "all"  # every operator, default parameters
VARIANTS = "variants"  # every operator plus each declared variant
FLAG_STYLES = ("space", "equals")  # --seed 0, --seed=0


class SweepError(ValueError):
    """The sweep description is wrong (unknown operator, missing script, bad selector)."""


@dataclass(frozen=True)
class Loop:
    """A training script, the folder it runs from and how to pass it epochs, seed, device.

    ``argv`` is one string of script arguments split like a shell would
    (``"config/x.py --device=cpu --max_iters=50"``), after ``args``. With
    ``flag_style="equals"`` (or a flag that ends with ``=``) the flags the harness adds are
    one token each, ``--seed=0``. ``cwd`` is the
    folder the script runs from (None: the current one). ``mutate`` names the files
    whose mutants run (relative to ``cwd``; ``auto`` adds the script's local imports);
    empty: the script alone.
    """

    script: str
    name: str | None = None
    args: tuple[str, ...] = ()
    epochs: int | None = None
    epochs_arg: str | None = "--epochs"
    seed_arg: str | None = "--seed"
    device_arg: str | None = "--device"
    argv_text: str | None = None
    cwd: str | None = None
    mutate: tuple[str, ...] = ()
    flag_style: str = "space"  # "equals": --seed=0 for every flag the harness adds
    holdout: str | None = None  # "module:function": held-out evaluation of the trained model
    metrics: str | None = None  # regex with groups val_loss / val_metric for printed lines

    @property
    def folder(self) -> Path:
        return Path(self.cwd or os.getcwd()).resolve()

    @property
    def label(self) -> str:
        """``name``, else the stem of a reference loop, else the script's path relative to
        the folder it runs from (plus a digest of its arguments): two ``main.py`` of two
        projects, or one script with two argument sets, never pool into one reference."""
        if self.name:
            return self.name
        path = _resolve(self.script, self.folder)
        if path is None or path.parent == PROJECT_ROOT / "reference_loops":
            return Path(self.script).stem
        try:
            shown = path.relative_to(self.folder).as_posix()
        except ValueError:
            shown = path.as_posix()
        shown = shown.removesuffix(".py")
        extra = [*self.args, *self.split_argv()]
        if extra:
            shown += "@" + hashlib.sha256("\0".join(extra).encode()).hexdigest()[:6]
        return shown

    def split_argv(self) -> list[str]:
        try:
            return shlex.split(self.argv_text or "")
        except ValueError as error:
            raise SweepError(f"loop.argv: {error} in {self.argv_text!r}") from None

    def argv(self, seed: int, device: str) -> tuple[str, ...]:
        argv = [*self.args, *self.split_argv()]
        for flag, value in (
            (self.epochs_arg if self.epochs is not None else None, self.epochs),
            (self.seed_arg, seed),
            (self.device_arg, device),
        ):
            if not flag:
                continue
            if flag.endswith("="):
                argv.append(f"{flag}{value}")
            elif self.flag_style == "equals":
                argv.append(f"{flag}={value}")
            else:
                argv += [flag, str(value)]
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


def find_script(script: str, folder: Path | None = None) -> Path:
    """A script path as given (relative to the folder the loop runs from, by default the
    working directory), else relative to the project (so
    ``reference_loops/mlp_digits.py`` works from anywhere)."""
    found = _resolve(script, folder or Path.cwd())
    if found is None:
        raise SweepError(
            f"training script not found: {script!r} (looked in {folder or Path.cwd()} and {PROJECT_ROOT})"
        )
    return found


def _resolve(script: str, folder: Path) -> Path | None:
    for candidate in (folder / script, PROJECT_ROOT / script):
        if candidate.is_file():
            return candidate.resolve()
    return None


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


def check_metrics(pattern: str | None) -> None:
    """``loop.metrics`` must compile and name ``val_loss`` or ``val_metric``."""
    from experiments.capture.lines import compile_pattern

    try:
        compile_pattern(pattern)
    except ValueError as error:
        raise SweepError(str(error)) from None


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
        folder = loop.folder
        if loop.flag_style not in FLAG_STYLES:
            raise SweepError(
                f"loop.flag_style must be one of {', '.join(FLAG_STYLES)}, not {loop.flag_style!r}"
            )
        if not folder.is_dir():
            raise SweepError(f"loop.cwd: {folder} is not a folder")
        path = find_script(loop.script, folder)
        check_holdout(loop.holdout)
        check_metrics(loop.metrics)
        source = read_source(path)
        try:
            files = mutated_files(path, folder, loop.mutate)
        except FileNotFoundError as error:
            raise SweepError(str(error)) from None
        context = _context(path, folder, files)
        variants: list[tuple[dict | None, str | Splice, str | None, Path]] = []
        if sweep.reference or not operators:
            variants.append((None, source, None, path))
        if operators:
            for file in files:
                text = source if file == path else read_source(file)
                for mutant, mutated, reason in _mutants(
                    file, _target_name(file, path), text, operators, sweep.sites
                ):
                    variants.append((mutant, mutated, reason, file))
        label, argv_of = loop.label, loop.argv
        for mutant, mutated, invalid_reason, file in variants:
            for seed in sweep.seeds:
                specs.append(
                    RunSpec(
                        script=str(path),
                        source=mutated,
                        argv=argv_of(seed, sweep.device),
                        seed=seed,
                        device=sweep.device,
                        loop=label,
                        mutant=mutant,
                        timeout_s=sweep.limits.timeout_s,
                        mem_cap_mb=sweep.limits.mem_cap_mb,
                        threads=sweep.limits.threads,
                        sample_every=sweep.limits.sample_every,
                        telemetry=sweep.limits.telemetry,
                        invalid_reason=invalid_reason,
                        cwd=str(folder),
                        target=None if file == path else str(file),
                        context=context,
                        holdout=loop.holdout,
                        metrics=loop.metrics,
                    )
                )
    return _shard(specs, *sweep.shard)


def read_source(path: Path) -> str:
    """A script's text; one that is not UTF-8 is the caller's mistake, said in one line."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise SweepError(
            f"{path} is not UTF-8 text (byte {error.start}: {error.object[error.start : error.start + 1]!r}); "
            "save it as UTF-8"
        ) from None


def check_results_dir(path: str | Path) -> None:
    """``results_dir`` must be a folder, or not exist yet under a folder."""
    path = Path(path)
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                raise SweepError(
                    f"results_dir={path}: {part} is a file; expected a folder (new, or one "
                    "trainwreck wrote)"
                )
            return


def _target_name(file: Path, script: Path) -> str:
    """The file's name in mutant identities: the script's file name (as it always was), a
    module's path relative to the script's folder (``model.py``, ``pkg/layers.py``)."""
    if file == script:
        return script.name
    try:
        return file.relative_to(script.parent).as_posix()
    except ValueError:
        return file.as_posix()


def _context(script: Path, folder: Path, files: list[Path]) -> tuple[str, ...]:
    """What else decides a user's run beside the mutated source: the folder it runs from
    and the digests of the project's files (a mutant of ``model.py`` runs ``train.py``
    as it is). Reference loops read no files of their own: nothing to add."""
    if script.parent == PROJECT_ROOT / "reference_loops" and files == [script]:
        return ()
    digests = [
        f"{_target_name(file, script)}:{source_sha(read_source(file))}"
        for file in dict.fromkeys([script, *files])
    ]
    return (f"cwd:{folder}", *digests)


@functools.lru_cache(maxsize=4)
def _parsed(source: str, target: str, where: str | None = None) -> SourceFile:
    """The parsed file, reused when the same text is planned again: a strength search
    plans each setting it tries separately (one parse, 0.35 s for a reference loop, not
    one per setting). Finding sites and applying them only read it."""
    # ``where``: the file on disk, so that its operators read the project's other files
    # (a model class the script imports: issue 29), as ``trainwreck mutate`` does.
    return SourceFile(source, target, Project.on_disk() if where else None, where)


def _mutants(
    path: Path, target: str, source: str, operators: list[Operator], sites: str
) -> list[tuple[dict | None, str | Splice, str | None]]:
    """Each selected mutant of ``source``: its manifest entry, its source as a ``Splice``
    (the file's text once, each mutant's edits; see ``Splice``) and an invalid reason."""
    try:
        parsed = _parsed(source, target, Path(path).resolve().as_posix())
        found = parsed.find_sites(operators)
    except MutationError as error:
        raise SweepError(f"cannot mutate {path}: {error}") from None
    if sites == "first":
        seen: set[str] = set()
        found = [s for s in found if not (s.operator.label in seen or seen.add(s.operator.label))]
    elif sites != ALL:
        found = [s for s in found if fnmatch.fnmatchcase(s.identity, sites)]
    result: list[tuple[dict | None, str | Splice, str | None]] = []
    for site in found:
        try:
            mutant = parsed.apply([site])
        except Exception as error:  # an engine bug: a row that says so, not a dead sweep
            interrupt.check()  # a Ctrl-C that LibCST turned into a KeyError is no engine bug
            identity = {
                "identity": site.identity,
                "operators": [site.operator.name],
                "categories": [site.operator.category],
                "contexts": [site.context],
                "params": [dict(site.operator.params)],
                "lines": [site.line],
                "target": target,
            }
            reason = f"{type(error).__name__}: {error}"
            # Distinct source text so the invalid run gets its own cache key.
            marker = f"# invalid mutant {site.identity}: {reason}\n"
            result.append((identity, marker, reason))
            continue
        entry = {
            **mutant.manifest_entry(),
            "diff": mutant.diff,
            "target": target,
            "reach_regions": reach.regions_of_lines(
                parsed.lines.bare, *parsed.lines.of_mutant(mutant.source, mutant.edits, False)
            ),
        }
        result.append((entry, Splice(source, mutant.edits, mutant.sha256), None))
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
