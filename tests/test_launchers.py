"""The same sharded sweep through Hydra launchers: basic, submitit_local and a local Ray.

Each launcher must give the same result rows (keys, runs, statuses) as the basic one, and
across its jobs every run must happen exactly once (the shared results_dir, its cache keys
and locks). A launcher whose extra is not installed is skipped, saying which extra.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.harness import load_results
from experiments.schema import CONFIG_DIR

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARDS = 2
SWEEP = [
    "loop=mlp_digits",
    "mutation.operators=[drop_zero_grad,zero_grad_after_backward]",
    "budget.epochs=2",
    "seeds=[0,1]",
    f"shard.count={SHARDS}",
    f"shard.index=range({SHARDS})",
    "results_dir=results",  # relative: must land under the launch directory for every launcher
    "quiet=false",
]
# What a run's outcome is, as the catalog reads it; times and paths differ between runs.
COMPARED = ("key", "run_id", "identity", "seed", "status", "exc_type", "steps", "backward_calls")
SUMMARY_PREFIX = "[trainwreck] {"


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


needs_submitit = pytest.mark.skipif(
    not _has("hydra_plugins.hydra_submitit_launcher"),
    reason="needs the slurm extra: pip install 'trainwreck[slurm]'",
)
needs_ray = pytest.mark.skipif(
    not (_has("hydra_plugins.hydra_ray_launcher") and _has("ray")),
    reason="needs the ray extra: pip install 'trainwreck[ray]'",
)


def _sweep(workdir: Path, *overrides: str, timeout_s: float = 300) -> str:
    """Run the sweep from ``workdir`` in a fresh interpreter, as a user would; its output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["RAY_DEDUP_LOGS"] = "0"  # each Ray job's summary line must reach the output
    command = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        *SWEEP,
        f"hydra.sweep.dir={workdir / 'multirun'}",
        *overrides,
    ]
    done = subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    return output


def _rows(results_dir: Path) -> list[tuple]:
    return sorted(tuple(row[name] for name in COMPARED) for row in load_results(results_dir))


def _summaries(text: str) -> list[dict]:
    """Each job's closing summary line (``[trainwreck] {...}``) found in ``text``."""
    found = []
    for line in text.splitlines():
        start = line.find(SUMMARY_PREFIX)
        if start >= 0:
            found.append(ast.literal_eval(line[start + len("[trainwreck] ") :]))
    return found


def _assert_each_run_happened_once(summaries: list[dict], rows: list[tuple]) -> None:
    assert len(summaries) == SHARDS
    # Every shard holds the reference runs; a run one job ran is a cached row for the rest.
    ran = sum(summary["runs"] - summary["cached"] for summary in summaries)
    assert ran == len(rows)


@pytest.fixture(scope="module")
def basic(tmp_path_factory) -> list[tuple]:
    workdir = tmp_path_factory.mktemp("basic")
    output = _sweep(workdir)
    rows = _rows(workdir / "results")
    _assert_each_run_happened_once(_summaries(output), rows)
    return rows


def test_basic_launcher_runs_the_whole_sweep_once_across_shards(basic):
    # reference + one site of each operator, two seeds
    assert len(basic) == 6
    assert {row[COMPARED.index("status")] for row in basic} == {"ok"}


def test_launcher_configs_keep_the_plugin_names_and_trainwreck_defaults():
    launchers = PROJECT_ROOT / "configs" / "hydra" / "launcher"
    configs = {path.stem: OmegaConf.load(path) for path in launchers.glob("*.yaml")}
    assert sorted(configs) == ["ray", "submitit_local", "submitit_slurm"]
    for name, config in configs.items():
        assert config._target_.startswith(f"hydra_plugins.hydra_{name.split('_')[0]}_launcher.")
    assert configs["ray"].ray.remote.num_cpus >= 1
    joblib = _compose_launcher("joblib")  # the plugin's own defaults fit (1 run per job)
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


@pytest.mark.slow
@needs_submitit
def test_submitit_local_gives_the_basic_launchers_rows_each_run_once(basic, tmp_path):
    output = _sweep(tmp_path, "hydra/launcher=submitit_local", "budget.workers=1")
    rows = _rows(tmp_path / "results")
    assert rows == basic
    # submitit keeps each job's stderr in its own folder, not in the launcher's output.
    logs = "\n".join(
        path.read_text() for path in (tmp_path / "multirun" / ".submitit").rglob("*_log.err")
    )
    _assert_each_run_happened_once(_summaries(logs), rows)
    assert "validated against ConfigStore schema" not in output


@pytest.mark.slow
@needs_ray
def test_ray_on_a_local_instance_gives_the_basic_launchers_rows_each_run_once(basic, tmp_path):
    output = _sweep(
        tmp_path,
        "hydra/launcher=ray",
        "hydra.launcher.ray.remote.num_cpus=1",
        # A fresh local instance on loopback only, whatever RAY_ADDRESS says.
        "hydra.launcher.ray.init.address=local",
        "++hydra.launcher.ray.init._node_ip_address=127.0.0.1",
        "++hydra.launcher.ray.init.num_cpus=2",
    )
    rows = _rows(tmp_path / "results")
    assert rows == basic
    _assert_each_run_happened_once(_summaries(output), rows)
