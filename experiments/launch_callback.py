"""The Hydra callback (``hydra.callbacks.launch`` in ``configs/config.yaml``) that makes a
multirun fit the machine or cluster it is launched on, before its launcher starts:

- Ray: starts (or joins) Ray, sizes each shard's ``num_cpus``/``num_gpus`` to the live
  nodes (``experiments.launch_fit.fit_ray``);
- submitit_slurm: checks ``cpus_per_task``, ``gpus_per_node``, ``mem_gb`` against the
  partition (``sinfo``, where it exists);
- submitit_local: gives each job its share of the cores (and the GPUs for device=cuda);
- joblib: ``n_jobs`` = the cores this process may use.

A request nothing can satisfy ends the command within seconds: one line naming the
setting, exit 2. A fitted value is set on the launcher and added to the hydra overrides
(so every job's config shows it), and said in one line. Then a ``Watch`` says once why, if
no job has started after ``launcher_wait_s``. ``launcher_fit=false`` keeps the launcher's
settings as they are (an autoscaling Ray cluster whose nodes grow with demand).
"""

from __future__ import annotations

import contextlib
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from experiments import launch_fit, launch_probe, launch_watch
from experiments.launch_fit import Fit, LaunchError

# Module state, not the callback's: launchers pickle the callback with each job.
_WATCHES: dict[int, launch_watch.Watch] = {}


def launcher_kind(target: str) -> str:
    for marker, kind in (
        ("hydra_ray_launcher.ray_launcher", "ray"),
        ("submitit_launcher.SlurmLauncher", "submitit_slurm"),
        ("submitit_launcher.LocalLauncher", "submitit_local"),
        ("joblib_launcher", "joblib"),
        ("BasicLauncher", "basic"),
    ):
        if marker in target:
            return kind
    return target.rsplit(".", 1)[-1] or "unknown"


class LaunchFit(Callback):
    def __init__(self) -> None:
        self.board: str | None = None  # the Ray actor that shards tell when they start

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        kind = launcher_kind(str(config.hydra.launcher.get("_target_", "")))
        quiet = bool(config.get("quiet", False))
        since = time.time()
        try:
            launch_probe.check_extra(kind)
            if kind == "ray":  # before the plugin would, with our settings (launch_probe)
                launch_probe.start_ray(_container(config.hydra.launcher.ray.init))
            fit = self._fit(kind, config) if config.get("launcher_fit", True) else Fit()
        except LaunchError as error:
            _stop_ray(kind)
            print(f"[trainwreck] configuration error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
        apply(config, fit)
        if not quiet:
            for note in fit.notes:
                _say(f"{kind}: {note}")
        wait_s = float(config.get("launcher_wait_s", 0) or 0)
        if wait_s <= 0:
            return
        sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
        if kind == "ray":
            self.board = f"trainwreck-launch-{uuid.uuid4().hex[:12]}"
            started = launch_watch.board_started(launch_watch.create_board(self.board))
            why = launch_watch.ray_why(_ray_asks(config))
        else:
            started = launch_watch.job_folders_started(sweep_dir, since - 1)
            why = launch_watch.generic_why(kind, sweep_dir)
            if kind == "submitit_slurm":
                folder = str(config.hydra.launcher.submitit_folder).split("%j")[0]
                why = launch_watch.slurm_why(Path(folder).absolute())
        _WATCHES[id(self)] = launch_watch.Watch(wait_s, started, why, _say).start()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        watch = _WATCHES.pop(id(self), None)
        if watch is not None:
            watch.stop()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.board is None:
            return
        # The watch is a courtesy: a job must run even where telling it fails.
        with contextlib.suppress(Exception):
            launch_watch.mark_started(self.board, int(config.hydra.job.num))

    def _fit(self, kind: str, config: DictConfig) -> Fit:
        launcher = config.hydra.launcher
        explicit = launch_probe.explicit_keys(config.hydra.overrides.hydra)
        task = list(config.hydra.overrides.task)
        cuda = any(
            device.startswith("cuda")
            for device in launch_probe.sweep_devices(task, str(config.device.name))
        )
        if kind == "ray":
            remote = _container(launcher.ray.remote)
            return launch_fit.fit_ray(remote, explicit, launch_probe.ray_nodes(), cuda)
        if kind == "submitit_slurm":
            found = launch_probe.slurm_partitions()
            if found is None:  # no sinfo here: submitit's sbatch will say what is missing
                return Fit()
            return launch_fit.fit_slurm(_params(launcher), explicit, *found, cuda)
        if kind == "submitit_local":
            from experiments.resources import usable_cores

            params = _params(launcher)
            gpus = _visible_gpus() if cuda or params.get("gpus_per_node") else None
            jobs = launch_probe.sweep_jobs(task)
            return launch_fit.fit_local(params, explicit, usable_cores(), gpus, cuda, jobs)
        if kind == "joblib":
            from experiments.resources import usable_cores

            return launch_fit.fit_joblib(_params(launcher), usable_cores())
        return Fit()


def apply(config: DictConfig, fit: Fit) -> None:
    """Set each fitted value on the launcher, and as a hydra override: every job's config is
    composed again from the overrides, so it sees the value its job was launched with."""
    if not fit.settings:
        return
    with read_write(config), open_dict(config):
        for key, value in fit.settings.items():
            OmegaConf.update(config, key, value, merge=False, force_add=True)
            config.hydra.overrides.hydra.append(f"++{key}={value}")


def _ray_asks(config: DictConfig) -> dict[str, float]:
    remote = _container(config.hydra.launcher.ray.remote)
    asks = {"CPU": float(remote.get("num_cpus") or 1)}
    if remote.get("num_gpus"):
        asks["GPU"] = float(remote["num_gpus"])
    return asks


def _params(launcher: DictConfig) -> dict[str, Any]:
    """The launcher's plain settings (the numbers and names fitting reads)."""
    keys = ("partition", "cpus_per_task", "gpus_per_node", "gpus_per_task", "gres")
    keys += ("tasks_per_node", "mem_gb", "n_jobs")
    return {key: launcher.get(key) for key in keys if key in launcher}


def _container(node: Any) -> dict[str, Any]:
    if node is None:
        return {}
    value = OmegaConf.to_container(node, resolve=True)
    return dict(value) if isinstance(value, dict) else {}


def _visible_gpus() -> list[str]:
    from experiments.harness.gpu import visible_gpus

    return visible_gpus()


def _stop_ray(kind: str) -> None:
    if kind != "ray" or "ray" not in sys.modules:
        return
    import ray

    if ray.is_initialized():
        ray.shutdown()


def _say(note: str) -> None:
    print(f"[trainwreck] {note}", file=sys.stderr, flush=True)
