"""The same sharded sweep through Hydra launchers: basic and submitit_local (Ray:
tests/test_launchers_ray.py, in .ci/run's Ray stage), and docs/scale.md's submitit_local
command exactly as printed there.

Each launcher must give the same result rows (keys, runs, statuses) as the basic one, and
across its jobs every run must happen exactly once (the shared results_dir, its cache keys
and locks). A launcher whose extra is not installed is skipped, saying which extra.
"""

from __future__ import annotations

import importlib.util

import pytest
from launcher_runs import (
    PROJECT_ROOT,
    assert_each_run_happened_once,
    basic,
    documented_command,
    expected_keys,
    rows,
    run,
    summaries,
    sweep,
)
from omegaconf import OmegaConf

from experiments.harness import load_results
from experiments.resources import usable_cores
from experiments.schema import CONFIG_DIR

__all__ = ["basic"]  # the module fixture every launcher's rows are compared with

needs_submitit = pytest.mark.skipif(
    importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None,
    reason="needs the slurm extra: pip install 'trainwreck[slurm]'",
)


def test_basic_launcher_runs_the_whole_sweep_once_across_shards(basic):
    # reference + one site of each operator, two seeds
    assert len(basic) == 6
    assert {row[4] for row in basic} == {"ok"}


def test_launcher_configs_keep_the_plugin_names_and_trainwreck_defaults():
    launchers = PROJECT_ROOT / "configs" / "hydra" / "launcher"
    configs = {path.stem: OmegaConf.load(path) for path in launchers.glob("*.yaml")}
    assert sorted(configs) == ["ray", "submitit_local", "submitit_slurm"]
    for name, config in configs.items():
        assert config._target_.startswith(f"hydra_plugins.hydra_{name.split('_')[0]}_launcher.")
    assert configs["ray"].ray.remote.num_cpus >= 1
    joblib = _compose_launcher("joblib")  # the plugin's own defaults (n_jobs fitted at launch)
    assert joblib._target_.endswith("JoblibLauncher")


def _compose_launcher(name: str):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = hydra_compose("config", [f"hydra/launcher={name}"], return_hydra_config=True)
    return cfg.hydra.launcher


# The app silences this at import (see experiments.run); pytest resets filters per test.
@pytest.mark.filterwarnings(r"ignore:\s*'hydra/launcher/\w+' is validated against")
@needs_submitit
def test_submitit_slurm_defaults_ask_for_a_shard_sized_allocation():
    slurm = _compose_launcher("submitit_slurm")
    assert slurm._target_.endswith("SlurmLauncher")
    assert slurm.cpus_per_task == 8 and slurm.mem_gb >= 8 * 2 and slurm.timeout_min >= 120
    assert slurm.max_num_timeout == 0  # a shard restarts from its cache, not a checkpoint


@needs_submitit
def test_submitit_local_request_this_machine_cannot_give_fails_in_one_line(tmp_path):
    command = documented_command("hydra/launcher=submitit_local")
    too_many = usable_cores() + 1
    code, output = run(
        [*command, f"hydra.launcher.cpus_per_task={too_many}"], tmp_path, timeout_s=120
    )
    assert code == 2, output
    assert output.strip() == (
        f"[trainwreck] configuration error: hydra.launcher.cpus_per_task={too_many}, but this "
        f"process may use {usable_cores()} cores: set hydra.launcher.cpus_per_task="
        f"{usable_cores()} or less"
    )
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
@needs_submitit
def test_submitit_local_gives_the_basic_launchers_rows_each_run_once(basic, tmp_path):
    output = sweep(tmp_path, "hydra/launcher=submitit_local", "budget.workers=1")
    found = rows(tmp_path / "results")
    assert found == basic
    # submitit keeps each job's stderr in its own folder, not in the launcher's output.
    logs = "\n".join(
        path.read_text() for path in (tmp_path / "multirun" / ".submitit").rglob("*_log.err")
    )
    assert_each_run_happened_once(summaries(logs), found)
    assert "validated against ConfigStore schema" not in output


@pytest.mark.slow
@needs_submitit
def test_documented_submitit_local_command_runs_every_run_with_a_core_share_each(tmp_path):
    command = documented_command("hydra/launcher=submitit_local")
    code, output = run(command, tmp_path, timeout_s=600)
    assert code == 0, output[-4000:]
    keys = {row["key"] for row in load_results(tmp_path / "results")}
    assert keys == expected_keys(*command[4:])
    jobs = next(arg for arg in command if arg.startswith("shard.count=")).split("=")[1]
    share = max(1, usable_cores() // int(jobs))
    assert f"hydra.launcher.cpus_per_task={share} ({jobs} jobs at once" in output
    # each job ran with that share (its config shows the fitted value)
    configs = list((tmp_path / "multirun").glob("*/*/*/.hydra/hydra.yaml"))
    assert len(configs) == int(jobs)
    for config in configs:
        assert OmegaConf.load(config).hydra.launcher.cpus_per_task == share
