"""Ray, as docs/scale.md prints it, on the machine the tests run on (2 cores in CI): the
local command ends with every run stored; a request no node has ends in seconds with one
line; a sweep that cannot start says once why (no autoscaler line every 30 s); joining a
running instance (the cluster path) works; and the rows equal the basic launcher's.

.ci/run runs this file in a Ray environment of its own (``pip install -e '.[ray]'``) with
TRAINWRECK_REQUIRE_RAY=1, so there a missing Ray fails instead of skipping.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launcher_runs import (
    assert_each_run_happened_once,
    basic,
    documented_command,
    environment,
    expected_keys,
    rows,
    run,
    summaries,
    sweep,
)

from experiments.harness import load_results

__all__ = ["basic"]  # the module fixture the Ray rows are compared with

HAS_RAY = all(
    importlib.util.find_spec(name) is not None
    for name in ("ray", "hydra_plugins.hydra_ray_launcher")
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not HAS_RAY and not os.environ.get("TRAINWRECK_REQUIRE_RAY"),
        reason="needs the ray extra: pip install 'trainwreck[ray]'",
    ),
]
LOCAL = ("hydra/launcher=ray", "init.address=local")  # the documented local command
RAY_CPUS = "hydra.launcher.ray.remote.num_cpus"
AUTOSCALER_LINE = "No available node types can fulfill"


def _ray_cpus() -> int:
    """The CPUs a local Ray instance finds here (the node the documented command gets)."""
    from ray._private.utils import get_num_cpus

    return int(get_num_cpus())


def test_documented_local_ray_command_stores_every_run(tmp_path):
    command = documented_command(*LOCAL)
    code, output = run(command, tmp_path, timeout_s=600)
    assert code == 0, output[-4000:]
    keys = {row["key"] for row in load_results(tmp_path / "results")}
    assert keys == expected_keys(*command[4:])
    assert AUTOSCALER_LINE not in output
    if _ray_cpus() < 4:  # the default 4 CPUs per shard, capped to what the node has
        assert f"{RAY_CPUS}={_ray_cpus()} (default 4; the largest Ray node has" in output


def test_ray_request_no_node_can_hold_ends_in_seconds_in_one_line(tmp_path):
    command = documented_command(*LOCAL)
    code, output = run([*command, f"{RAY_CPUS}=512"], tmp_path, timeout_s=120)
    assert code == 2, output[-4000:]
    cpus = _ray_cpus()
    last = output.strip().splitlines()[-1]
    assert last == (
        f"[trainwreck] configuration error: {RAY_CPUS}=512, but the largest Ray node has "
        f"{cpus} CPU{'' if cpus == 1 else 's'}: set {RAY_CPUS}={cpus} or less"
    )
    assert not (tmp_path / "results").exists()


def test_ray_cuda_without_a_gpu_node_ends_in_one_line(tmp_path):
    code, output = run([*documented_command(*LOCAL), "device=cuda"], tmp_path, timeout_s=120)
    assert code == 2, output[-4000:]
    assert output.strip().splitlines()[-1] == (
        "[trainwreck] configuration error: device=cuda, but no Ray node has a GPU: use "
        "device=cpu, or a cluster with GPU nodes"
    )


def _stop(process: subprocess.Popen) -> None:
    """Ctrl-C for the sweep (Ray shuts its instance down), harder signals if it lingers,
    then SIGKILL for whatever of its process group is left (Ray's own processes)."""
    for sig, grace_s in ((signal.SIGINT, 30), (signal.SIGTERM, 15)):
        if process.poll() is not None:
            break
        os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def test_a_sweep_that_cannot_start_says_once_why(tmp_path):
    wait_s = 5
    command = [
        *documented_command(*LOCAL),
        f"{RAY_CPUS}=512",
        "launcher_fit=false",  # keep the impossible request: the sweep must wait
        f"launcher_wait_s={wait_s}",
    ]
    log = tmp_path / "output.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while "no job has started" not in log.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()[-4000:]
            time.sleep(0.5)
        time.sleep(4 * wait_s)  # many watch polls and Ray's first autoscaler report later
    finally:
        _stop(process)
    output = log.read_text()
    said = [line for line in output.splitlines() if "no job has started" in line]
    assert said == [
        f"[trainwreck] no job has started after {wait_s} s (launcher_wait_s): each shard asks "
        f"Ray for CPU 512, and no live node has that much (largest: CPU {_ray_cpus()}); it "
        f"waits for a node that does, which only an autoscaler adds. Lower {RAY_CPUS}, or "
        "leave launcher_fit on"
    ], output[-4000:]
    assert AUTOSCALER_LINE not in output
    assert not (tmp_path / "results").exists()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_joining_a_running_ray_instance_like_a_cluster(tmp_path):
    """The cluster path (``init.address`` of a running instance): Ray must get no object
    store size there, and the shard fits that instance's CPUs."""
    port = _free_port()
    ray_cli = Path(sys.executable).with_name("ray")
    # one node on loopback only (no other node may join: see experiments.launch_probe)
    env = environment(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="token")
    head = subprocess.Popen(
        [
            str(ray_cli) if ray_cli.exists() else "ray",
            "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
            "--node-ip-address=127.0.0.1", "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        command = [
            sys.executable, "-m", "experiments.run", "-m", "hydra/launcher=ray",
            "loop=mlp_digits", "mutation=drop_zero_grad", "budget.epochs=1",
            f"hydra.launcher.ray.init.address=127.0.0.1:{port}",
        ]  # fmt: skip
        code, output = run(
            command, tmp_path, 300, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="token"
        )
        assert code == 0, output[-4000:]
        assert f"{RAY_CPUS}=1 (default 4; the largest Ray node has 1 CPU)" in output
        assert len(load_results(tmp_path / "results")) == 2  # reference + the one mutant
    finally:
        _stop(head)


def test_ray_gives_the_basic_launchers_rows_each_run_once(basic, tmp_path):
    output = sweep(
        tmp_path,
        "hydra/launcher=ray",
        f"{RAY_CPUS}=1",
        # A fresh local instance on loopback only, whatever RAY_ADDRESS says.
        "hydra.launcher.ray.init.address=local",
        "++hydra.launcher.ray.init._node_ip_address=127.0.0.1",
        "++hydra.launcher.ray.init.num_cpus=2",
        RAY_DEDUP_LOGS="0",  # each Ray job's summary line must reach the output
    )
    found = rows(tmp_path / "results")
    assert found == basic
    assert_each_run_happened_once(summaries(output), found)
