"""Starting a run's process: what it is given (the mutant written to its folder, a private
mirror of the invocation folder to run in, the job the child reads, ``child.SPEC_FILE``),
then a fork of this warm process (``fork``) or, where forking is unsafe, a fresh
interpreter (``spawn``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from experiments.harness import pool, workdir
from experiments.harness.child import SPEC_FILE, STDERR_FILE, STDOUT_FILE, run_forked
from experiments.harness.gpu import child_environment
from experiments.harness.spec import RunSpec

MUTANT_FILE = "mutant.py"


def prepare(
    spec: RunSpec,
    key: str,
    folder: Path,
    *,
    results_dir: Path,
    method: str,
    trace_cap_mb: float,
) -> tuple[dict[str, Any], str]:
    """Write the run's files and return (its job, the source the child runs as
    ``__main__``). The caller owns the job's ``workdir`` (``workdir.remove`` it)."""
    invocation = spec.cwd or os.getcwd()
    script = os.path.abspath(spec.script)
    module_target = spec.target if spec.target and not _same_file(spec.target, script) else None
    main_source, source_path = spec.text(), script
    if spec.mutant is not None:
        mutant_path = str(folder / MUTANT_FILE)
        Path(mutant_path).write_text(main_source, encoding="utf-8")
        if module_target:  # the script runs as it is; the import hook serves the mutant
            main_source = Path(script).read_text(encoding="utf-8")
        else:
            source_path = mutant_path
    run_workdir = str(workdir.create(invocation, exclude=[results_dir]))
    config = {
        "run_dir": str(folder),
        # Seen from inside the mirror: ``__file__``-relative paths stay private too.
        "script": workdir.mirrored_path(run_workdir, invocation, script),
        "source_path": source_path,
        "argv": list(spec.argv),
        "seed": spec.seed,
        "device": spec.device,
        "threads": spec.threads,
        "mem_cap_mb": spec.mem_cap_mb,
        "sample_every": spec.sample_every,
        "telemetry": spec.telemetry,
        "workdir": run_workdir,
        "guard": True,
        "protected": [str(Path(invocation).resolve()), os.path.dirname(script)],
        "reach_regions": (spec.mutant or {}).get("reach_regions") or [],
        "module_target": module_target,
        "module_source_path": str(folder / MUTANT_FILE) if module_target else None,
        "holdout": spec.holdout,
        "metrics": spec.metrics,
        "parent_pid": os.getpid(),
        "start_method": method,
        "key": key,
        "trace_cap_bytes": int(trace_cap_mb * 2**20),
    }
    # The nonce never lies in the run folder: the forked child gets it in memory, a
    # fresh interpreter in its environment (which it clears before the script runs).
    (folder / SPEC_FILE).write_text(json.dumps(config, indent=1), encoding="utf-8")
    return config, main_source


def spawn(folder: Path, extra_env: dict[str, str]) -> subprocess.Popen[bytes]:
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, **extra_env}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    with open(folder / STDOUT_FILE, "ab") as out, open(folder / STDERR_FILE, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "experiments.harness.child", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            env=env,
        )


def _same_file(first: str, second: str) -> bool:
    return os.path.realpath(first) == os.path.realpath(second)


def fork(
    job: dict[str, Any], source: str, held: list[int], gpu: str | None, reusable: bool
) -> tuple[int, pool.Worker | None]:
    """Fork the run's process (closing ``held`` descriptors there); with ``reusable``, a
    channel makes it a ``pool.Worker`` that may serve the next runs."""
    ours, theirs = pool.channel() if reusable else ((), None)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError:
        pool.close((*ours, *(theirs or ())))
        raise
    if pid == 0:
        os.environ.update(child_environment(gpu))  # before CUDA starts there
        run_forked(job, source, close_fds=(*held, *ours), channel=theirs)
    if theirs is None:
        return pid, None
    pool.close(theirs)
    return pid, pool.Worker(pid, *ours)
