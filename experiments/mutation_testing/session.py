"""One ``trainwreck test`` session: baseline, then every mutant not already known.

Order: the mutants are found first (a bad ``--mutate`` fails before anything runs); the
cache answers what it can; the baseline runs (or comes from the cache) only when some
mutant must run; mutants that no test executed are ``unreached`` without a run; the rest
run ``workers`` at a time, each result written to the cache as it arrives. A mutant's
deadline (``deadline``): ``timeout_factor`` times the baseline's time for the tests it
runs (collection and the first test's one-time costs included), plus ``TIMEOUT_SLACK_S``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments.harness import reaper, workdir
from experiments.mutation_testing import baseline as baseline_run
from experiments.mutation_testing import cache as caching
from experiments.mutation_testing import hotswap, runs, stability
from experiments.mutation_testing.command import Command
from experiments.mutation_testing.discovery import Job, Target
from experiments.mutation_testing.forkserver import Pool, fork_is_safe, loading, warm
from experiments.mutation_testing.outcome import (
    Row,
    classify,
    crash_kind,
    failure_kinds,
    row_for,
)
from experiments.mutation_testing.replay import for_tests
from experiments.mutation_testing.selection import EVERY_TEST, Selection, select
from experiments.mutation_testing.warm import WarmProject, ready_timeout, verify

TIMEOUT_SLACK_S = 5.0


@dataclass
class Options:
    root: Path
    out: Path
    command: Command
    workers: int = 1
    timeout_factor: float = 4.0
    fresh: bool = False  # a new interpreter per mutant (the benchmark's comparison)
    select_tests: bool = True  # False: every mutant runs every test
    warm_project: bool = True  # fork runs from a server that imported and collected once
    witness: bool = True  # record and compare each test's witness facts (off: a benchmark)


@dataclass
class Outcome:
    rows: list[Row]
    baseline: dict[str, Any] | None
    ran: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def run(
    options: Options,
    targets: list[Target],
    jobs: Sequence[Job],
    progress: Callable[[Row, int, int], None] | None = None,
) -> Outcome:
    started = time.monotonic()
    env = caching.environment(options.root, [options.out])
    settings = [options.command.argv, options.timeout_factor, options.select_tests]
    settings.append([caching.WITNESS_VERSION, options.witness])
    store = caching.Cache(options.out / "cache")
    keys = {
        job.identity: caching.key(job.sha256, job.identity, settings, env, caching.witnesses(job))
        for job in jobs
    }
    rows: dict[str, Row] = {}
    for job in jobs:
        known = store.get(keys[job.identity])
        # A result stored without a witness state (an older trainwreck) is run again.
        if known is not None and "witness_state" in known:
            rows[job.identity] = Row(**{**known, "cached": True})
    todo = [job for job in jobs if job.identity not in rows]
    outcome = Outcome([], None)
    if todo:
        fresh = options.fresh or not fork_is_safe()
        if options.command.is_pytest and not fresh:
            with loading():
                warm()
        scratch = Path(tempfile.mkdtemp(prefix="trainwreck-test-"))
        setting = runs.Setting(
            options.root, options.out, scratch, options.command, fresh, options.witness
        )
        pool = Pool(options.workers)
        try:
            with reaper.subreaper():
                # Lines are recorded for the mutated files only: a session mutating
                # another file needs its own baseline.
                names = sorted(target.name for target in targets)
                base_key = caching.key("baseline", options.command.argv, names, env, settings[-1])
                base = store.baseline(base_key)
                if base is None:
                    base = baseline_run.run(setting, pool, targets)
                    store.put_baseline(base_key, base)
                outcome.baseline = base
                outcome.notes += baseline_notes(base)
                if base.get("witness_off") or not options.command.is_pytest:
                    setting.witness = False  # nothing to compare a run's facts with
                else:
                    outcome.notes += _repeat(options, setting, pool, base, todo)
                    store.put_baseline(base_key, base)
                # closing: on Ctrl-C or SIGTERM the generator's own cleanup (the warm
                # project's server, the runs' private copies) runs now, not at collection
                running = _run_all(options, setting, pool, base, todo, outcome.notes)
                with contextlib.closing(running):
                    for row in running:
                        rows[row.identity] = row
                        store.put(keys[row.identity], {**row.as_dict(), "cached": False})
                        outcome.ran += row.wall_s > 0  # unreached by coverage: no run
                        if progress:
                            progress(row, len(rows), len(jobs))
        finally:
            pool.close()
            store.close()
            shutil.rmtree(scratch, ignore_errors=True)
    outcome.rows = [rows[job.identity] for job in jobs]
    outcome.wall_s = time.monotonic() - started
    return outcome


def _repeat(
    options: Options, setting: runs.Setting, pool: Pool, base: dict[str, Any], jobs: list[Job]
) -> list[str]:
    """The unmutated tests the mutants will run, once more, for the facts that change from
    run to run (``stability``); kept in ``base``."""
    every = [Selection(EVERY_TEST, "all")]
    chosen = [select(job, base) for job in jobs] if options.select_tests else every
    wanted = stability.needed(base, chosen)
    if not wanted:
        return stability.notes(base)
    timeout = deadline(base, wanted, options.timeout_factor)
    return stability.repeat(setting, pool, base, wanted, timeout)


def _run_all(
    options: Options,
    setting: runs.Setting,
    pool: Pool,
    base: dict[str, Any],
    jobs: list[Job],
    notes: list[str],
) -> Iterator[Row]:
    pending: list[tuple[Job, Selection, bool]] = []
    for job in jobs:
        chosen = select(job, base)
        if not options.select_tests:
            chosen = Selection(EVERY_TEST, "all", at_import=chosen.at_import)
        if chosen.tests == []:
            yield row_for(job, "unreached", tests_run=0, detail=chosen.why)
            continue
        swappable = not chosen.at_import and not hotswap.swappable(
            job.target.source, job.mutant.source, job.target.path
        )
        pending.append((job, chosen, swappable))
    started: dict[int, tuple[Job, Selection, runs.Prepared, bool]] = {}
    project = _warm_project(options, setting, pool, base, pending, notes)
    try:
        yield from _run_pending(options, setting, pool, base, pending, started, project)
    finally:  # interrupted: the private copies of runs that never ended go too
        if project is not None:
            project.close()
        for _job, _chosen, prepared, _warm in started.values():
            workdir.remove(prepared.workdir)


def _warm_project(
    options: Options,
    setting: runs.Setting,
    pool: Pool,
    base: dict[str, Any],
    pending: list[tuple[Job, Selection, bool]],
    notes: list[str],
) -> WarmProject | None:
    """The server for the mutants it can take, started and checked; None when it cannot
    serve (said in the notes when some mutant could have used it)."""
    warm = [(job, chosen) for job, chosen, swappable in pending if swappable]
    if not (warm and options.warm_project and setting.command.is_pytest and not setting.fresh):
        return None
    project = WarmProject(setting, base.get("plugins"))
    targets = sorted({job.target.path for job, _ in warm})
    why = project.start(targets, ready_timeout(base["wall_s"]))
    if not why:
        wanted = [test for _, chosen in warm for test in chosen.tests or []]
        every = any(chosen.tests is None for _, chosen in warm)
        tests = None if every else list(dict.fromkeys(wanted))
        why = verify(project, pool, setting, tests, deadline(base, tests, options.timeout_factor))
    if why:
        project.close()
        notes.append(
            f"the project could not be imported and collected once for every mutant: {why}; "
            "each mutant's child imported and collected afresh"
        )
        return None
    cold = len(pending) - len(warm)
    if cold:
        notes.append(
            f"{cold} of {len(pending)} mutants ran in a child that imported and collected "
            "afresh (a change at import, or code run while the tests were collected)"
        )
    return project


def _run_pending(
    options: Options,
    setting: runs.Setting,
    pool: Pool,
    base: dict[str, Any],
    pending: list[tuple[Job, Selection, bool]],
    started: dict[int, tuple[Job, Selection, runs.Prepared, bool]],
    project: WarmProject | None,
) -> Iterator[Row]:
    unprobed = base.get("unprobed") or {}
    number = 0
    while pending or started:
        while pending and not pool.full:
            job, chosen, swappable = pending.pop(0)
            number += 1
            prepared = runs.prepare(setting, number, job)
            timeout = deadline(base, chosen.tests, options.timeout_factor)
            plugins = base.get("plugins")
            spec = runs.pytest_spec(setting, prepared, job, chosen.tests, None, plugins)
            spec["witness_replay"] = for_tests(base, chosen.tests) if setting.witness else None
            warm = bool(swappable and project and project.start_run(pool, number, timeout, spec))
            if not warm:
                replay = spec["witness_replay"]  # a cold child puts them back too
                runs.start(
                    setting,
                    pool,
                    number,
                    timeout,
                    prepared,
                    job,
                    chosen.tests,
                    None,
                    plugins,
                    replay=replay,
                )
            started[number] = (job, chosen, prepared, warm)
        for finished in pool.wait():
            job, chosen, prepared, warm = started.pop(finished.key)
            result, tail = runs.collect(prepared, finished.exit_code, setting.command.is_pytest)
            trust_reach = not base.get("spawned") and job.target.name not in unprobed
            found = classify(job, finished.exit_code, result, tail, trust_reach, base)
            killed_by = found.killed_by
            ran = (result or {}).get("durations") or {}
            yield row_for(
                job,
                found.status,
                killed_by=killed_by,
                failed_with=failure_kinds(killed_by, result),
                crash=crash_kind(killed_by, result) if found.status == "killed" else "",
                covered_by=list(chosen.tests or []),
                tests_run=len(ran) if result and setting.command.is_pytest else None,
                wall_s=round(finished.wall_s, 3),
                tests_s=round(sum(ran.values()), 3),
                cpu_s=round(finished.cpu_s, 3),
                detail=found.detail,
                witness=found.witness,
                witness_state=found.witness_state,
                ran_bug=found.ran_bug,
                warm=warm,
            )
        reaper.end_adopted({run.pid for run in pool.running.values()})


def baseline_notes(base: dict[str, Any]) -> list[str]:
    """One line per thing the baseline could not record, or turned off, and what follows."""
    notes = list(base.get("turned_off") or [])
    if base.get("lines") is None:
        notes.append(
            "the command is not pytest: no witness is recorded (its facts are kept per "
            "pytest test), so every mutant is counted by the command's exit status"
        )
    if base.get("witness_off"):
        notes.append(base["witness_off"])
    if base.get("spawned"):
        notes.append(
            "the tests start processes (" + ", ".join(base["spawned"][:3]) + "): lines "
            "run there are not seen, so every mutant ran every test"
        )
    for name, why in (base.get("unprobed") or {}).items():
        notes.append(f"{name} was {why}, so each of its mutants ran every test")
    return notes


def deadline(base: dict[str, Any], tests: list[str] | None, factor: float) -> float:
    """A mutant's deadline in seconds: ``factor`` times the baseline's time for ``tests``
    (None: all), its collection and the one-time costs of its first test, plus the slack.

    The baseline's first test paid what the first test of any run pays (imports a fixture
    makes, a data set loaded and cached, lazy initialisation): a mutant that runs one cheap
    test pays it too, so it is added to every deadline. Without it a reference loop's
    checks had a 51 s first test and 0.3 s others, and a mutant that ran one of the others
    timed out at 8 s on a busy machine (issue 24's kill-rate run).
    """
    durations: dict[str, float] = base.get("durations") or {}
    overhead = max(0.0, base["wall_s"] - sum(durations.values()))
    first = next(iter(durations.values()), 0.0)  # in the order the tests ran
    own = sum(durations.get(test, 0.0) for test in tests or durations)
    return factor * (overhead + first + own) + TIMEOUT_SLACK_S


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
