"""What a sweep's launcher has to work with, asked before any job starts: the overrides the
user typed, how many jobs and which devices the sweep holds, the live Ray nodes, a SLURM
partition's nodes (``sinfo``) and why SLURM jobs wait (``squeue``). The rules that use
these answers are in ``experiments.launch_fit``."""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from experiments.launch_fit import LaunchError, NodeKind, parse_sinfo

# A new local Ray instance only carries the shards' small summaries back: Ray's default
# object store takes 30% of memory (in /dev/shm) on a machine the runs need.
LOCAL_OBJECT_STORE_BYTES = 75 * 1024 * 1024
PROBE_TIMEOUT_S = 20.0


def _parsed(overrides: Iterable[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides([str(text) for text in overrides])


EXTRAS = {  # launcher kind -> (modules it needs, the extra that installs them)
    "ray": (("ray", "hydra_plugins.hydra_ray_launcher"), "ray"),
    "submitit_slurm": (("hydra_plugins.hydra_submitit_launcher",), "slurm"),
    "submitit_local": (("hydra_plugins.hydra_submitit_launcher",), "slurm"),
}


def check_extra(kind: str) -> None:
    """A launcher whose plugin is not installed: one line naming the extra."""
    modules, extra = EXTRAS.get(kind, ((), ""))
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise LaunchError(
            f"hydra/launcher={kind} needs {', '.join(missing)}: pip install 'trainwreck[{extra}]'"
            " (docs/scale.md)"
        )


def explicit_keys(hydra_overrides: Iterable[str]) -> set[str]:
    """The config keys the user set on the command line (``+``/``++`` prefixes dropped)."""
    return {override.key_or_group for override in _parsed(hydra_overrides)}


def _values(override: Any) -> list[str]:
    if override.is_sweep_override():
        return [str(value) for value in override.sweep_string_iterator()]
    return [str(override.value())]


def sweep_jobs(task_overrides: Iterable[str]) -> int:
    """How many jobs the basic sweeper makes of the task overrides (the product of the
    lengths of every swept value)."""
    counts = [len(_values(o)) for o in _parsed(task_overrides) if o.is_sweep_override()]
    return max(1, math.prod(counts))


def sweep_devices(task_overrides: Iterable[str], default: str) -> list[str]:
    """Every ``device`` a job of the sweep runs on (``device=cpu,cuda`` sweeps both)."""
    devices: list[str] = []
    for override in _parsed(task_overrides):
        if override.key_or_group in ("device", "device.name"):
            devices += _values(override)
    return devices or [default]


def start_ray(init: Mapping[str, Any]) -> None:
    """``ray.init`` with the launcher's ``ray.init`` settings, before the plugin would (it
    then finds Ray running). Ray's autoscaler repeats "cannot be scheduled" every 30 s; the
    sweep's own wait message replaces those lines (``RAY_SCHEDULER_EVENTS``, read when ray
    is imported, unless set)."""
    os.environ.setdefault("RAY_SCHEDULER_EVENTS", "0")
    settings = dict(init)
    local = settings.get("address") in (None, "local")
    if local:
        # A new instance on this machine alone: Ray 2.x swaps 127.0.0.1 for the machine's
        # outward address unless told that no other node will join (this variable).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        # Ray refuses an object store size when it joins a running cluster.
        settings.setdefault("object_store_memory", LOCAL_OBJECT_STORE_BYTES)
    import ray

    if ray.is_initialized():
        return
    try:
        ray.init(**settings)
    except (ConnectionError, ValueError, RuntimeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise LaunchError(
            f"ray.init failed ({first}): check hydra.launcher.ray.init.address "
            "(local starts an instance here, auto joins the cluster this machine belongs to)"
        ) from None


def ray_nodes() -> list[dict[str, float]]:
    """Each live Ray node's resources (``CPU``, ``GPU``, ``memory``, custom ones)."""
    import ray

    return [dict(node["Resources"]) for node in ray.nodes() if node.get("Alive")]


def ray_resources() -> tuple[dict[str, float], dict[str, float]]:
    """(free now, total) over the cluster."""
    import ray

    return dict(ray.available_resources()), dict(ray.cluster_resources())


def _run(command: list[str]) -> str | None:
    """The output of a SLURM command, or None where it is missing or fails."""
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def slurm_partitions() -> tuple[dict[str, list[NodeKind]], str | None] | None:
    """Every partition's node kinds and the default partition, or None without ``sinfo``."""
    text = _run(["sinfo", "--noheader", "--format=%P|%c|%m|%G"])
    return None if text is None else parse_sinfo(text)


def squeue_states(job_ids: Iterable[str]) -> Counter[str] | None:
    """How many of the jobs are in each state, with SLURM's reason for the pending ones
    (``PENDING (Priority)``), or None without ``squeue``."""
    arrays = sorted({job.split("_")[0] for job in job_ids})
    if not arrays:
        return None
    text = _run(["squeue", "--noheader", "--array", f"--jobs={','.join(arrays)}", "--format=%T|%r"])
    if text is None:
        return None
    states: Counter[str] = Counter()
    for line in text.splitlines():
        state, _, reason = line.strip().partition("|")
        if state:
            states[f"{state} ({reason})" if state == "PENDING" and reason else state] += 1
    return states
