"""What a launcher may ask for, fitted to what the machine or cluster has: pure rules, no
probing (``experiments.launch_probe`` asks Ray, SLURM and this machine).

A value that comes from trainwreck's launcher config is a default: it is capped to what
the largest node can give. A value the user typed (``hydra.launcher.X=...`` on the
command line) is a request: one that no node can ever satisfy is a ``LaunchError``, one
line naming the setting and what would fit, never a job that waits forever.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

RAY = "hydra.launcher.ray.remote."
LAUNCHER = "hydra.launcher."


class LaunchError(Exception):
    """A launcher request nothing here can satisfy; the message is one line."""


@dataclass
class Fit:
    settings: dict[str, Any] = field(default_factory=dict)  # full config key -> fitted value
    notes: list[str] = field(default_factory=list)  # what was changed and why, one line each


@dataclass(frozen=True)
class NodeKind:
    """One kind of node of a SLURM partition, as ``sinfo`` describes it."""

    cpus: int
    memory_mb: int
    gpus: int


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _cap(fit: Fit, key: str, value: float, limit: float, explicit: Collection[str], have: str):
    """``value`` if it fits under ``limit``; a default above it is capped (noted), a typed
    request above it is an error naming ``key``. ``have`` says what holds ``limit``."""
    if value <= limit:
        return _number(value)
    if key in explicit or limit <= 0:
        fix = f"set {key}={_number(limit)} or less" if limit > 0 else f"remove {key}"
        raise LaunchError(f"{key}={_number(value)}, but {have}: {fix}")
    fit.settings[key] = _number(limit)
    fit.notes.append(f"{key}={_number(limit)} (default {_number(value)}; {have})")
    return _number(limit)


def fit_ray(
    remote: Mapping[str, Any],
    explicit: Collection[str],
    nodes: Sequence[Mapping[str, float]],
    cuda: bool,
) -> Fit:
    """Each shard's Ray task options against the live nodes' resources (``ray.nodes()``):
    a task runs on one node, so the largest node bounds every request."""
    if not nodes:
        raise LaunchError("the Ray cluster has no live node: check hydra.launcher.ray.init.address")
    fit = Fit()
    gpus = remote.get("num_gpus")
    most_gpus = max(node.get("GPU", 0.0) for node in nodes)
    if cuda and most_gpus < 1:
        raise LaunchError(
            "device=cuda, but no Ray node has a GPU: use device=cpu, or a cluster with GPU nodes"
        )
    if gpus is None and cuda:
        gpus = fit.settings[f"{RAY}num_gpus"] = 1  # the harness spreads a shard's runs on it
        fit.notes.append(f"{RAY}num_gpus=1 (device=cuda; one GPU per shard)")
    if gpus:
        gpus = _cap(
            fit,
            f"{RAY}num_gpus",
            gpus,
            most_gpus,
            explicit,
            f"the largest Ray node has {_count(most_gpus, 'GPU')}",
        )
        nodes = [node for node in nodes if node.get("GPU", 0.0) >= gpus]
    memory = remote.get("memory")
    if memory:
        most = max(node.get("memory", 0.0) for node in nodes)
        _cap(
            fit,
            f"{RAY}memory",
            memory,
            most,
            {f"{RAY}memory"},
            f"the largest Ray node that fits has {most:.0f} bytes",
        )
    for name, amount in dict(remote.get("resources") or {}).items():
        most = max(node.get(name, 0.0) for node in nodes)
        key = f"{RAY}resources.{name}"
        _cap(fit, key, amount, most, {key}, f"the largest Ray node has {_count(most, name)}")
    cpus = remote.get("num_cpus")
    most_cpus = max(node.get("CPU", 0.0) for node in nodes)
    _cap(
        fit,
        f"{RAY}num_cpus",
        1 if cpus is None else cpus,
        most_cpus,
        explicit,
        f"the largest Ray node has {_count(most_cpus, 'CPU')}",
    )
    return fit


def _count(amount: float, unit: str) -> str:
    return f"{_number(amount)} {unit}{'' if amount == 1 else 's'}"


def parse_sinfo(text: str) -> tuple[dict[str, list[NodeKind]], str | None]:
    """``sinfo --noheader --format=%P|%c|%m|%G`` as {partition: node kinds} and the default
    partition (marked ``*``). ``64+`` (nodes of that many or more) counts as 64."""
    partitions: dict[str, list[NodeKind]] = {}
    default = None
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            continue
        name, cpus, memory, gres = parts
        if name.endswith("*"):
            name = name[:-1]
            default = name
        try:
            kind = NodeKind(int(cpus.rstrip("+")), int(memory.rstrip("+")), gres_gpus(gres))
        except ValueError:
            continue
        partitions.setdefault(name, []).append(kind)
    return partitions, default


def gres_gpus(gres: str) -> int:
    """GPUs per node in a SLURM GRES string: ``gpu:4``, ``gpu:a100:8(S:0-1)``, ``(null)``."""
    total = 0
    for entry in gres.split(","):
        fields = entry.split("(")[0].split(":")
        if fields[0] == "gpu" and len(fields) >= 2 and fields[-1].isdigit():
            total += int(fields[-1])
    return total


def fit_slurm(
    params: Mapping[str, Any],
    explicit: Collection[str],
    partitions: Mapping[str, list[NodeKind]],
    default: str | None,
    cuda: bool,
) -> Fit:
    """``cpus_per_task``, ``gpus_per_node`` and ``mem_gb`` against the partition's nodes."""
    name = params.get("partition") or default
    listed = ", ".join(sorted(partitions)) or "none"
    if name is None:
        raise LaunchError(
            f"SLURM has no default partition: set {LAUNCHER}partition (sinfo lists: {listed})"
        )
    if name not in partitions:
        raise LaunchError(
            f"{LAUNCHER}partition={name}: no such SLURM partition (sinfo lists: {listed})"
        )
    nodes = partitions[name]
    where = f"the largest node of partition {name}"
    fit = Fit()
    gpus = params.get("gpus_per_node")
    most_gpus = max(node.gpus for node in nodes)
    if cuda and most_gpus < 1:
        raise LaunchError(
            f"device=cuda, but partition {name} has no GPU node: set {LAUNCHER}partition "
            f"to a GPU partition (sinfo lists: {listed})"
        )
    if gpus is None and cuda and not params.get("gres") and not params.get("gpus_per_task"):
        gpus = fit.settings[f"{LAUNCHER}gpus_per_node"] = 1
        fit.notes.append(f"{LAUNCHER}gpus_per_node=1 (device=cuda; one GPU per job)")
    if gpus:
        gpus = _cap(
            fit,
            f"{LAUNCHER}gpus_per_node",
            gpus,
            most_gpus,
            explicit,
            f"{where} has {_count(most_gpus, 'GPU')}",
        )
        nodes = [node for node in nodes if node.gpus >= gpus]
    tasks = int(params.get("tasks_per_node") or 1)
    cpus = params.get("cpus_per_task")
    if cpus:
        most = max(node.cpus for node in nodes) // tasks
        _cap(
            fit,
            f"{LAUNCHER}cpus_per_task",
            cpus,
            most,
            explicit,
            f"{where} has {_count(most, 'CPU')}"
            + (f" for each of {tasks} tasks" if tasks > 1 else ""),
        )
    memory = params.get("mem_gb")
    if memory:
        most = max(node.memory_mb for node in nodes) // 1024
        _cap(fit, f"{LAUNCHER}mem_gb", memory, most, explicit, f"{where} has {most} GB")
    return fit


def fit_local(
    params: Mapping[str, Any],
    explicit: Collection[str],
    cores: int,
    visible_gpus: Sequence[str] | None,
    cuda: bool,
    jobs: int,
) -> Fit:
    """submitit_local: every job of the sweep starts at once on this machine, so a job's
    ``cpus_per_task`` defaults to its share of the cores this process may use (the job
    runs that many runs at a time), and GPUs must be ones this machine has."""
    fit = Fit()
    cpus = params.get("cpus_per_task")
    if cpus is None:
        share = max(1, cores // max(1, jobs))
        fit.settings[f"{LAUNCHER}cpus_per_task"] = share
        fit.notes.append(f"{LAUNCHER}cpus_per_task={share} ({jobs} jobs at once on {cores} cores)")
    else:
        _cap(
            fit,
            f"{LAUNCHER}cpus_per_task",
            cpus,
            cores,
            explicit,
            f"this process may use {_count(cores, 'core')}",
        )
    gpus = params.get("gpus_per_node")
    if visible_gpus is None or not (gpus or cuda):
        return fit
    if cuda and not visible_gpus:
        raise LaunchError("device=cuda, but this machine shows no GPU: use device=cpu")
    if gpus is None:
        gpus = fit.settings[f"{LAUNCHER}gpus_per_node"] = len(visible_gpus)
        fit.notes.append(f"{LAUNCHER}gpus_per_node={gpus} (device=cuda; every job sees all GPUs)")
    _cap(
        fit,
        f"{LAUNCHER}gpus_per_node",
        gpus,
        len(visible_gpus),
        explicit,
        f"this machine has {_count(len(visible_gpus), 'GPU')}",
    )
    # submitit hands a local job the GPUs 0..n-1, whatever CUDA_VISIBLE_DEVICES says here.
    if list(visible_gpus[:gpus]) != [str(index) for index in range(gpus)]:
        raise LaunchError(
            f"submitit_local gives each job GPUs 0..{gpus - 1}, but CUDA_VISIBLE_DEVICES here "
            f"is {','.join(visible_gpus)}: unset it, or use the basic launcher (no hydra/launcher)"
        )
    return fit


def fit_joblib(params: Mapping[str, Any], cores: int) -> Fit:
    """joblib runs one job per worker, each one run at a time: ``n_jobs`` -1 (all) or -k
    (all but k-1) counts the cores this process may use; a larger positive ``n_jobs``
    only shares cores, so it is said, not refused."""
    fit = Fit()
    n_jobs = params.get("n_jobs")
    if n_jobs is None or n_jobs < 0:
        count = max(1, cores + 1 + (n_jobs if n_jobs is not None else -1))
        fit.settings[f"{LAUNCHER}n_jobs"] = count
        fit.notes.append(f"{LAUNCHER}n_jobs={count} (the cores this process may use: {cores})")
    elif n_jobs > cores:
        fit.notes.append(f"{LAUNCHER}n_jobs={n_jobs} on {cores} usable cores: jobs share cores")
    return fit
