"""The rules that fit a launcher's request to the nodes it has (experiments.launch_fit), and
what a sweep's command line says about its jobs (experiments.launch_probe): no Ray, SLURM
or GPU needed, the nodes are given."""

from __future__ import annotations

import pytest

from experiments.launch_fit import (
    LaunchError,
    NodeKind,
    fit_joblib,
    fit_local,
    fit_ray,
    fit_slurm,
    gres_gpus,
    parse_sinfo,
)
from experiments.launch_probe import explicit_keys, sweep_devices, sweep_jobs
from experiments.resources import usable_cores

RAY_CPUS = "hydra.launcher.ray.remote.num_cpus"
RAY_GPUS = "hydra.launcher.ray.remote.num_gpus"
TWO_CORES = [{"CPU": 2.0, "memory": 8e9}]


def test_ray_default_cpus_are_capped_to_the_largest_node():
    fit = fit_ray({"num_cpus": 4}, set(), TWO_CORES, cuda=False)
    assert fit.settings == {RAY_CPUS: 2}
    assert fit.notes == [f"{RAY_CPUS}=2 (default 4; the largest Ray node has 2 CPUs)"]
    # a cluster with a big enough node keeps the default
    assert fit_ray({"num_cpus": 4}, set(), [*TWO_CORES, {"CPU": 64.0}], cuda=False).settings == {}


def test_ray_typed_request_no_node_can_hold_is_one_line_naming_the_setting():
    with pytest.raises(LaunchError) as error:
        fit_ray({"num_cpus": 8}, {RAY_CPUS}, TWO_CORES, cuda=False)
    message = str(error.value)
    assert message == (
        f"{RAY_CPUS}=8, but the largest Ray node has 2 CPUs: set {RAY_CPUS}=2 or less"
    )
    assert fit_ray({"num_cpus": 1}, {RAY_CPUS}, TWO_CORES, cuda=False).settings == {}


def test_ray_cuda_gets_one_gpu_per_shard_on_a_node_that_has_gpus():
    nodes = [{"CPU": 32.0}, {"CPU": 8.0, "GPU": 2.0}]
    fit = fit_ray({"num_cpus": 16}, set(), nodes, cuda=True)
    # CPUs are sized among the nodes that have the GPU, not the CPU-only giant
    assert fit.settings == {RAY_GPUS: 1, RAY_CPUS: 8}
    with pytest.raises(LaunchError, match="device=cuda, but no Ray node has a GPU"):
        fit_ray({"num_cpus": 1}, set(), [{"CPU": 32.0}], cuda=True)
    with pytest.raises(LaunchError, match=f"{RAY_GPUS}=4, but the largest Ray node has 2 GPUs"):
        fit_ray({"num_cpus": 1, "num_gpus": 4}, {RAY_GPUS}, nodes, cuda=True)


def test_ray_custom_resources_and_no_live_node():
    with pytest.raises(LaunchError, match=r"resources\.tpu=1, but the largest Ray node has 0 tpus"):
        fit_ray({"num_cpus": 1, "resources": {"tpu": 1}}, set(), TWO_CORES, cuda=False)
    with pytest.raises(LaunchError, match="no live node"):
        fit_ray({"num_cpus": 1}, set(), [], cuda=False)


SINFO = "cpu*|64|256000|(null)\ncpu*|16+|64000|(null)\ngpu|32|512000|gpu:a100:4(S:0-1)\n"


def test_sinfo_lines_become_partitions_with_their_node_kinds():
    partitions, default = parse_sinfo(SINFO + "garbage line\n")
    assert default == "cpu"
    assert partitions["cpu"] == [NodeKind(64, 256000, 0), NodeKind(16, 64000, 0)]
    assert partitions["gpu"] == [NodeKind(32, 512000, 4)]
    assert gres_gpus("gpu:2,gpu:v100:1") == 3 and gres_gpus("(null)") == 0


def test_slurm_defaults_fit_the_partition_and_typed_requests_fail_fast():
    partitions, default = parse_sinfo("small*|4|16384|(null)\n")
    params = {"cpus_per_task": 8, "mem_gb": 24, "gpus_per_node": None, "tasks_per_node": 1}
    fit = fit_slurm(params, set(), partitions, default, cuda=False)
    assert fit.settings == {"hydra.launcher.cpus_per_task": 4, "hydra.launcher.mem_gb": 16}
    with pytest.raises(LaunchError) as error:
        fit_slurm(params, {"hydra.launcher.cpus_per_task"}, partitions, default, cuda=False)
    assert str(error.value) == (
        "hydra.launcher.cpus_per_task=8, but the largest node of partition small has 4 CPUs: "
        "set hydra.launcher.cpus_per_task=4 or less"
    )


def test_slurm_partition_and_gpu_checks():
    partitions, default = parse_sinfo(SINFO)
    params = {"cpus_per_task": 8, "mem_gb": 24, "gpus_per_node": None}
    fit = fit_slurm({**params, "partition": "gpu"}, set(), partitions, default, cuda=True)
    assert fit.settings == {"hydra.launcher.gpus_per_node": 1}
    with pytest.raises(LaunchError, match="device=cuda, but partition cpu has no GPU node"):
        fit_slurm(params, set(), partitions, default, cuda=True)
    with pytest.raises(
        LaunchError, match=r"partition=gpux: no such SLURM partition \(sinfo lists: cpu, gpu\)"
    ):
        fit_slurm({**params, "partition": "gpux"}, set(), partitions, default, cuda=False)
    with pytest.raises(LaunchError, match="no default partition"):
        fit_slurm(params, set(), partitions, None, cuda=False)


def test_submitit_local_shares_the_cores_between_the_jobs_that_start_together():
    fit = fit_local({"cpus_per_task": None}, set(), cores=8, visible_gpus=None, cuda=False, jobs=3)
    assert fit.settings == {"hydra.launcher.cpus_per_task": 2}
    one = fit_local({"cpus_per_task": None}, set(), 2, None, cuda=False, jobs=16)
    assert one.settings == {"hydra.launcher.cpus_per_task": 1}
    with pytest.raises(LaunchError, match="cpus_per_task=9, but this process may use 8 cores"):
        fit_local({"cpus_per_task": 9}, {"hydra.launcher.cpus_per_task"}, 8, None, False, 1)


def test_submitit_local_gpus():
    params = {"cpus_per_task": 1, "gpus_per_node": None}
    fit = fit_local(params, set(), 8, ["0", "1"], cuda=True, jobs=2)
    assert fit.settings == {"hydra.launcher.gpus_per_node": 2}
    with pytest.raises(LaunchError, match="device=cuda, but this machine shows no GPU"):
        fit_local(params, set(), 8, [], cuda=True, jobs=2)
    typed = {"hydra.launcher.gpus_per_node"}
    with pytest.raises(LaunchError, match="gpus_per_node=3, but this machine has 2 GPUs"):
        fit_local({**params, "gpus_per_node": 3}, typed, 8, ["0", "1"], cuda=True, jobs=1)
    # submitit would hand the job GPU 0, not the GPU 2 this process was given
    with pytest.raises(LaunchError, match="CUDA_VISIBLE_DEVICES here is 2,3"):
        fit_local(params, set(), 8, ["2", "3"], cuda=True, jobs=1)


def test_joblib_counts_the_usable_cores():
    assert fit_joblib({"n_jobs": -1}, 6).settings == {"hydra.launcher.n_jobs": 6}
    assert fit_joblib({"n_jobs": -2}, 6).settings == {"hydra.launcher.n_jobs": 5}
    assert fit_joblib({"n_jobs": 4}, 6).settings == {}
    oversubscribed = fit_joblib({"n_jobs": 8}, 2)
    assert oversubscribed.settings == {} and "share cores" in oversubscribed.notes[0]


def test_usable_cores_honours_a_cgroup_quota(tmp_path):
    uncapped = usable_cores(tmp_path)  # no quota files: the affinity alone
    assert uncapped >= 1
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert usable_cores(tmp_path) == uncapped
    (tmp_path / "cpu.max").write_text("50000 100000\n")  # half a CPU: still one
    assert usable_cores(tmp_path) == 1
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert usable_cores(tmp_path) == uncapped


def test_what_the_command_line_says_about_the_sweep():
    hydra = ["hydra/launcher=ray", "++hydra.launcher.ray.remote.num_cpus=1"]
    assert explicit_keys(hydra) == {"hydra/launcher", RAY_CPUS}
    task = ["loop=mlp_digits", "shard.count=4", "shard.index=range(4)", "seed=0,1"]
    assert sweep_jobs(task) == 8
    assert sweep_jobs(["loop=mlp_digits"]) == 1
    assert sweep_devices(task, "cpu") == ["cpu"]
    assert sweep_devices([*task, "device=cpu,cuda"], "cpu") == ["cpu", "cuda"]
