"""Setting up one run (its folder, its private copy of the project, the mutant in place),
starting it in the pool, and reading back what it left.

A run's folder (in the session's temporary folder) holds its ``spec.json``, its output
and its ``result.json``; the private copy is the harness's mirror of the project
(``experiments.harness.workdir``) with the mutated file written in as a real file. Both
are removed when the run has been read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from experiments.harness import reach, workdir
from experiments.mutation_testing import boot, child
from experiments.mutation_testing.command import Command
from experiments.mutation_testing.discovery import Job, Target
from experiments.mutation_testing.forkserver import Pool

REPO = Path(__file__).resolve().parents[2]  # where ``experiments`` is importable from
TAIL_CHARS = 4000


@dataclass
class Setting:
    """What every run of a session shares."""

    root: Path
    out: Path
    scratch: Path  # the session's temporary folder
    command: Command
    fresh: bool  # a new interpreter per run instead of a fork
    witness: bool = True  # record each test's witness facts (``facts``); off: the benchmark


@dataclass
class Prepared:
    run_dir: Path
    workdir: Path


def prepare(setting: Setting, number: int, job: Job | None) -> Prepared:
    run_dir = setting.scratch / "runs" / f"{number:05d}"
    run_dir.mkdir(parents=True)
    private = workdir.create(setting.root, exclude=[setting.out])
    if job is not None:
        workdir.place(private, job.target.name, job.mutant.source)
    return Prepared(run_dir, private)


def pytest_spec(
    setting: Setting,
    prepared: Prepared,
    job: Job | None,
    selection: list[str] | None,
    record: list[Target] | None = None,
    plugins: list[str] | None = None,
    witness_tests: list[str] | None = None,
) -> dict[str, Any]:
    """What a pytest run needs (``child``, ``server``). ``witness_tests``: the tests whose
    witness facts the run keeps (None: every test's)."""
    # No cache folder in the project, and no five gc.collect() per run (0.1 s) to report
    # unraisable exceptions as warnings, which by default never fail a test.
    args = ["-p", "no:cacheprovider", "-p", "no:unraisableexception"]
    autoload = True
    if plugins is not None and _pytest_at_least(8, 4):
        # The baseline's entry-point plugins by name: pytest then skips scanning every
        # installed distribution for them (~0.1 s per run).
        args.append("--disable-plugin-autoload")
        for plugin in plugins:
            args += ["-p", plugin]
        autoload = False
    args += setting.command.pytest_args or ()
    if not any(arg.startswith("--basetemp") for arg in args):
        args.append(f"--basetemp={prepared.run_dir / 'tmp'}")
    if job is not None:
        # Nobody reads a mutant's output (the plugin records each failure): no traceback
        # rendered, no colour (a killed run spent ~0.8 s on them on a public project).
        args += ["--tb=no", "--color=no"]
    spec: dict[str, Any] = {
        "run_dir": str(prepared.run_dir),
        "workdir": str(prepared.workdir),
        "root": str(setting.root),
        "cwd_on_path": setting.command.cwd_on_path,
        "pytest_args": args,
        "pycache": str(setting.scratch / "pycache"),
        "selection": selection,
        "record": [{"name": t.name, "real": os.path.realpath(t.path)} for t in record]
        if record
        else None,
        "parent_pid": os.getpid(),
        "mutant": None,
        "autoload": autoload,
        "witness": setting.witness,
        "witness_tests": witness_tests,
        "witness_replay": None,  # test -> random states to restore (``replay``)
    }
    if job is not None:
        spec["mutant"] = {
            "name": job.target.name,
            "paths": [str(prepared.workdir / job.target.name), job.target.path],
            "source": job.mutant.source,
            "original": job.target.source,
            "regions": reach.regions(job.target.source, job.mutant.source),
        }
    return spec


def _pytest_at_least(*version: int) -> bool:
    try:
        found = tuple(int(part) for part in metadata.version("pytest").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return found >= version


def start_pytest(pool: Pool, key: Any, timeout_s: float, spec: dict[str, Any], fresh: bool) -> None:
    if not fresh:
        pool.fork(key, timeout_s, lambda: child.run_forked(spec))
        return
    run_dir = Path(spec["run_dir"])
    (run_dir / child.SPEC_FILE).write_text(json.dumps(spec), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-m", "experiments.mutation_testing.child", str(run_dir)]
    pool.spawn(key, timeout_s, argv, env=env, stdin=subprocess.DEVNULL)


def start(
    setting: Setting,
    pool: Pool,
    key: Any,
    timeout_s: float,
    prepared: Prepared,
    job: Job | None,
    selection: list[str] | None = None,
    record: list[Target] | None = None,
    plugins: list[str] | None = None,
    witness_tests: list[str] | None = None,
    replay: dict[str, Any] | None = None,
) -> None:
    """Start the run: pytest in a fork (or a new interpreter), any other command as it is."""
    spec = pytest_spec(setting, prepared, job, selection, record, plugins, witness_tests)
    spec["witness_replay"] = replay
    if setting.command.is_pytest:
        start_pytest(pool, key, timeout_s, spec, setting.fresh)
        return
    (prepared.run_dir / child.SPEC_FILE).write_text(json.dumps(spec), encoding="utf-8")
    boot_dir = boot.write_folder(setting.scratch / "boot")
    env = {**os.environ, boot.ENV: str(prepared.run_dir / child.SPEC_FILE)}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(boot_dir), env.get("PYTHONPATH"), str(REPO)])
    )
    with (
        open(prepared.run_dir / "stdout.txt", "wb") as out,
        open(prepared.run_dir / "stderr.txt", "wb") as err,
    ):
        pool.spawn(
            key,
            timeout_s,
            list(setting.command.argv),
            cwd=prepared.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )


def collect(
    prepared: Prepared, exit_code: int | None, is_pytest: bool = True
) -> tuple[dict[str, Any] | None, str]:
    """The run's result (None when it left none) and the tail of its output; then the
    run's folder and private copy are removed."""
    result = None
    if is_pytest:
        with contextlib.suppress(OSError, ValueError):
            text = (prepared.run_dir / child.RESULT_FILE).read_text(encoding="utf-8")
            result = json.loads(text)
    elif exit_code is not None:
        result = {"exit": exit_code, **boot.collect(prepared.run_dir)}
    tail = ""
    for name in ("stdout.txt", "stderr.txt"):
        with contextlib.suppress(OSError):
            text = (prepared.run_dir / name).read_text(encoding="utf-8", errors="replace")
            tail += text[-TAIL_CHARS:]
    workdir.remove(prepared.workdir)
    shutil.rmtree(prepared.run_dir, ignore_errors=True)
    return result, tail[-TAIL_CHARS:]
