"""What one job may use: how many runs at once (its cores, its launcher, its GPUs), which
job of a multirun it is, and whether ``device=cuda`` has a GPU at all (asked in a forked
child, so this process never initialises CUDA)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from experiments import sweep as sweeps


def workers_for(cfg: DictConfig, gpus: Sequence[str] | None = None) -> int:
    if cfg.budget.workers is not None:
        return int(cfg.budget.workers)
    launcher = _launcher_target()
    # joblib already runs one job per core: more runs per job would oversubscribe.
    if "joblib" in launcher:
        return 1
    if "ray_launcher" in launcher:
        cores = _ray_task_cpus() or 1  # the CPUs Ray reserved for this task, not the node's
    else:
        # The cores this job may use (a SLURM allocation, a taskset), not all the machine's.
        cores = usable_cores()
        if "submitit_launcher" in launcher:
            # submitit_local binds no cores: each job keeps to the share it was sized to.
            share = _launcher_setting("cpus_per_task")
            cores = min(cores, int(share)) if share else cores
    if gpus:  # every GPU run needs a core too: more at once than cores only queue up
        return min(cores, len(gpus) * int(cfg.budget.runs_per_gpu))
    return cores


def usable_cores(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """The cores this process may use: its CPU affinity (a taskset, a SLURM allocation),
    further capped by a container's CPU quota (cgroup v2 ``cpu.max`` or v1 CFS quota)."""
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cores = len(affinity) if affinity else (os.cpu_count() or 1)
    quota = _cgroup_cpu_quota(cgroup_root)
    return max(1, min(cores, quota)) if quota else cores


def _cgroup_cpu_quota(root: Path) -> int | None:
    """Whole CPUs a cgroup CPU quota allows (rounded up), or None without a quota."""
    v2 = _read(root / "cpu.max").split()  # "max 100000" or "200000 100000"
    quota, period = v2[:2] if len(v2) >= 2 else ("", "")
    if not quota:  # cgroup v1: two files; a quota of -1 means none
        quota = _read(root / "cpu" / "cpu.cfs_quota_us").strip()
        period = _read(root / "cpu" / "cpu.cfs_period_us").strip()
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max", or no such files
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return -(-quota_us // period_us)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _launcher_target() -> str:
    return str(_launcher_setting("_target_") or "").lower()


def _launcher_setting(name: str) -> object:
    try:
        return HydraConfig.get().launcher.get(name)
    except ValueError:  # not inside a Hydra job
        return None


def job_number() -> int:
    try:
        return int(HydraConfig.get().job.get("num") or 0)
    except ValueError:  # not inside a Hydra job
        return 0


def _ray_task_cpus() -> int:
    try:
        import ray

        return int(ray.get_runtime_context().get_assigned_resources().get("CPU", 0))
    except Exception:  # not inside a Ray task (e.g. a job rerun by hand)
        return 0


def check_device(device: str) -> None:
    """Fail early on ``device=cuda`` without a GPU, asking a forked child (so this
    process never initialises CUDA and its later forks stay safe)."""
    if not device.startswith("cuda"):
        return
    import torch  # imported here (not initialising CUDA), so the child only asks

    del torch
    pid = os.fork()
    if pid == 0:
        try:
            import torch

            os._exit(0 if torch.cuda.is_available() else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise sweeps.SweepError(f"device={device} but torch sees no CUDA device here")
