"""The multirun callback on composed configs (experiments.launch_callback): what it sets on
each launcher, the one-line refusal, the wait watch. SLURM is a fake ``sinfo``/``squeue``
on PATH; Ray runs in tests/test_launchers_ray.py."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict, read_write

from experiments import launch_watch
from experiments.launch_callback import LaunchFit, launcher_kind
from experiments.resources import usable_cores, workers_for
from experiments.schema import CONFIG_DIR

needs_submitit = pytest.mark.skipif(
    importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None,
    reason="needs the slurm extra: pip install 'trainwreck[slurm]'",
)
# The app silences this at import (see experiments.run); pytest resets filters per test.
pytestmark = pytest.mark.filterwarnings(r"ignore:\s*'hydra/launcher/\w+' is validated against")


def _config(*overrides: str, task: tuple[str, ...] = ()):
    """A multirun's master config: ``overrides`` composed, ``task`` as its task overrides
    (sweeps such as ``shard.index=range(4)`` only exist there)."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", ["launcher_wait_s=0", *overrides], return_hydra_config=True)
    with read_write(cfg), open_dict(cfg):
        cfg.hydra.overrides.task = [*cfg.hydra.overrides.task, *task]
    return cfg


def _fake_slurm(tmp_path: Path, monkeypatch, sinfo: str, squeue: str = "") -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sinfo", sinfo), ("squeue", squeue)):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{text}EOF\n")
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_launchers_are_told_apart_by_their_targets():
    assert launcher_kind("hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher") == "ray"
    assert launcher_kind("hydra._internal.core_plugins.basic_launcher.BasicLauncher") == "basic"
    assert launcher_kind("x.submitit_launcher.LocalLauncher") == "submitit_local"
    assert launcher_kind("some.other.Launcher") == "Launcher"


@needs_submitit
def test_slurm_default_is_fitted_to_the_partition_and_every_job_sees_it(
    tmp_path, monkeypatch, capsys
):
    _fake_slurm(tmp_path, monkeypatch, "small*|4|16384|(null)\n")
    cfg = _config("hydra/launcher=submitit_slurm")
    LaunchFit().on_multirun_start(cfg)
    assert cfg.hydra.launcher.cpus_per_task == 4 and cfg.hydra.launcher.mem_gb == 16
    assert "++hydra.launcher.cpus_per_task=4" in cfg.hydra.overrides.hydra
    err = capsys.readouterr().err
    assert "[trainwreck] submitit_slurm: hydra.launcher.cpus_per_task=4 (default 8;" in err


@needs_submitit
def test_slurm_typed_request_no_node_has_exits_2_in_one_line(tmp_path, monkeypatch, capsys):
    _fake_slurm(tmp_path, monkeypatch, "small*|4|16384|(null)\n")
    cfg = _config("hydra/launcher=submitit_slurm", "hydra.launcher.cpus_per_task=16")
    with pytest.raises(SystemExit) as stop:
        LaunchFit().on_multirun_start(cfg)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "[trainwreck] configuration error: hydra.launcher.cpus_per_task=16, but the largest "
        "node of partition small has 4 CPUs: set hydra.launcher.cpus_per_task=4 or less"
    )
    # launcher_fit=false leaves the request as typed (an autoscaling cluster may grow)
    kept = _config(
        "hydra/launcher=submitit_slurm", "hydra.launcher.cpus_per_task=16", "launcher_fit=false"
    )
    LaunchFit().on_multirun_start(kept)
    assert kept.hydra.launcher.cpus_per_task == 16


@needs_submitit
def test_slurm_without_sinfo_is_left_to_submitit(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo anywhere
    cfg = _config("hydra/launcher=submitit_slurm")
    LaunchFit().on_multirun_start(cfg)
    assert cfg.hydra.launcher.cpus_per_task == 8


@needs_submitit
def test_submitit_local_jobs_share_the_cores_and_run_that_many_at_once(capsys):
    task = ("shard.count=4", "shard.index=range(4)")
    cfg = _config("hydra/launcher=submitit_local", task=task)
    LaunchFit().on_multirun_start(cfg)
    share = max(1, usable_cores() // 4)
    assert cfg.hydra.launcher.cpus_per_task == share
    # a job of this sweep runs its share of runs at a time (workers_for reads its launcher)
    job = _config("hydra/launcher=submitit_local", f"hydra.launcher.cpus_per_task={share}")
    HydraConfig.instance().set_config(job)
    try:
        assert workers_for(job) == share
    finally:
        HydraConfig.instance().cfg = None
    assert f"cpus_per_task={share} (4 jobs at once" in capsys.readouterr().err


def test_joblib_n_jobs_is_the_usable_cores():
    cfg = _config("hydra/launcher=joblib")
    LaunchFit().on_multirun_start(cfg)
    assert cfg.hydra.launcher.n_jobs == usable_cores()


def test_basic_launcher_is_left_alone(capsys):
    cfg = _config()
    before = list(cfg.hydra.overrides.hydra)
    LaunchFit().on_multirun_start(cfg)
    assert list(cfg.hydra.overrides.hydra) == before
    assert capsys.readouterr().err == ""


def _eventually(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_watch_says_once_why_nothing_started_then_when_the_first_job_did():
    said: list[str] = []
    started = [False]
    watch = launch_watch.Watch(0.2, lambda: started[0], lambda: "queue full", said.append, 0.02)
    watch.start()
    try:
        assert _eventually(lambda: len(said) == 1)
        assert said[0] == "no job has started after 0 s (launcher_wait_s): queue full"
        time.sleep(0.3)  # many polls later: still said once
        assert len(said) == 1
        started[0] = True
        assert _eventually(lambda: len(said) == 2)
        assert said[1].startswith("the first job started after")
    finally:
        watch.stop()


def test_watch_is_quiet_when_a_job_starts_in_time_and_survives_a_failing_probe():
    said: list[str] = []

    def broken() -> str:
        raise RuntimeError("probe down")

    watch = launch_watch.Watch(0.1, lambda: True, broken, said.append, 0.02).start()
    time.sleep(0.3)
    watch.stop()
    assert said == []
    failing = launch_watch.Watch(0.05, lambda: False, broken, said.append, 0.02).start()
    assert _eventually(lambda: len(said) == 1)
    failing.stop()
    assert said[0].endswith("the launcher gave no reason")


def test_a_job_has_started_when_hydra_wrote_its_config_after_the_sweep_began(tmp_path):
    old = tmp_path / "0" / ".hydra"
    old.mkdir(parents=True)
    (old / "config.yaml").write_text("{}")
    os.utime(old / "config.yaml", (1, 1))  # a job of an earlier sweep into the same folder
    started = launch_watch.job_folders_started(tmp_path, since=time.time() - 1)
    assert not started()
    new = tmp_path / "1" / ".hydra"
    new.mkdir(parents=True)
    (new / "config.yaml").write_text("{}")
    assert started()


def test_slurm_wait_reason_comes_from_squeue(tmp_path, monkeypatch):
    _fake_slurm(tmp_path, monkeypatch, "", "PENDING|Priority\nPENDING|Priority\nRUNNING|None\n")
    folder = tmp_path / "submitit" / "123_0"
    folder.mkdir(parents=True)
    (folder / "123_0_submitted.pkl").write_bytes(b"")
    why = launch_watch.slurm_why(tmp_path / "submitit")()
    assert why == "SLURM jobs: 2 PENDING (Priority), 1 RUNNING (squeue shows the queue)"


def test_a_launcher_whose_extra_is_missing_is_one_line_naming_it(monkeypatch, capsys):
    cfg = _config()  # composed first: the check is of what the launcher would need
    with read_write(cfg), open_dict(cfg):
        cfg.hydra.launcher = {
            "_target_": "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
        }
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if "ray" in name else real(name, *a)
    )
    with pytest.raises(SystemExit) as stop:
        LaunchFit().on_multirun_start(cfg)
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "[trainwreck] configuration error: hydra/launcher=ray needs ray, "
        "hydra_plugins.hydra_ray_launcher: pip install 'trainwreck[ray]' (docs/scale.md)"
    )


def test_ray_wait_reason_tells_a_too_small_cluster_from_a_busy_one(monkeypatch):
    from experiments import launch_probe

    monkeypatch.setattr(launch_probe, "ray_nodes", lambda: [{"CPU": 2.0}, {"CPU": 8.0}])
    monkeypatch.setattr(launch_probe, "ray_resources", lambda: ({"CPU": 1.0}, {"CPU": 10.0}))
    too_big = launch_watch.ray_why({"CPU": 16.0})()
    assert "no live node has that much (largest: CPU 8)" in too_big
    assert "Lower hydra.launcher.ray.remote.num_cpus" in too_big
    busy = launch_watch.ray_why({"CPU": 4.0})()
    assert busy == (
        "each shard asks Ray for CPU 4; free now: CPU 1 of 10. The shards wait until other "
        "tasks free that much on one node (`ray status` shows what runs)"
    )
