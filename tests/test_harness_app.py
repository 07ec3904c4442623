"""The sweep builder and the Hydra app: composition, clear errors, a real in-process job."""

from __future__ import annotations

import os
from pathlib import Path

import libcst as cst
import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException

from experiments import sweep as sweeps
from experiments.compose import compose, to_sweep
from experiments.harness import load_results
from experiments.resources import check_device
from experiments.run import main
from mutations.registry import operator_classes
from mutator import SourceFile, Swap

ROOT = Path(__file__).resolve().parent.parent
TINY = str(Path(__file__).parent / "scripts" / "train_tiny.py")
REFERENCE_LOOPS = sorted(
    p.stem for p in (ROOT / "reference_loops").glob("*.py") if p.stem != "__init__"
)


def test_default_config_composes_with_the_documented_keys():
    cfg = compose()
    assert cfg.results_dir == "results/" and cfg.seed == 0 and cfg.seeds is None
    assert cfg.loop.script == "reference_loops/mlp_digits.py" and cfg.loop.n_classes == 10
    assert list(cfg.mutation.operators) == [] and cfg.device.name == "cpu"
    assert cfg.budget.timeout_factor == 5.0 and cfg.budget.mem_cap_mb == 2048


@pytest.mark.parametrize("loop", REFERENCE_LOOPS)
def test_every_reference_loop_has_a_loop_option(loop):
    cfg = compose([f"loop={loop}"])
    assert sweeps.find_script(cfg.loop.script).name == f"{loop}.py"


def test_every_registered_operator_is_a_mutation_option():
    from hydra.core.config_store import ConfigStore

    options = {name.removesuffix(".yaml") for name in ConfigStore.instance().list("mutation")}
    assert options == {"none", "all", "variants", *operator_classes()}
    for name in ("drop_zero_grad", "scale_lr", "all"):  # composing all 60+ takes too long
        assert list(compose([f"mutation={name}"]).mutation.operators) == [name]


def test_unknown_loop_or_operator_lists_the_valid_choices():
    with pytest.raises(MissingConfigException) as error:
        compose(["loop=no_such_loop"])
    assert "mlp_digits" in str(error.value) and "custom" in str(error.value)
    with pytest.raises(MissingConfigException) as error:
        compose(["mutation=drop_zero_gradd"])
    assert "drop_zero_grad" in str(error.value)


def test_typos_and_wrong_types_fail_at_compose_time():
    with pytest.raises(ConfigCompositionException, match="epoch"):
        compose(["loop.epoch=3"])
    with pytest.raises(ConfigCompositionException, match=r"budget\.epochs"):
        compose(["budget.epochs=many"])


def test_unknown_operator_spec_and_missing_script_are_sweep_errors():
    with pytest.raises(
        sweeps.SweepError, match=r"valid operators: all, variants, .*drop_zero_grad"
    ):
        sweeps.build(sweeps.Sweep([sweeps.Loop(TINY)], operators=["drop_zero_gradd"]))
    with pytest.raises(sweeps.SweepError, match=r"training script not found: 'nope\.py'"):
        sweeps.build(sweeps.Sweep([sweeps.Loop("nope.py")]))


def test_experiment_preset_overrides_groups():
    cfg = compose(["experiment=smoke"])
    assert list(cfg.mutation.operators) == ["drop_zero_grad", "zero_grad_after_backward"]
    assert cfg.budget.epochs == 2 and list(cfg.seeds) == [0]


def test_joblib_launcher_is_available():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from experiments.schema import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = hydra_compose("config", ["hydra/launcher=joblib"], return_hydra_config=True)
    assert "joblib" in cfg.hydra.launcher._target_.lower()


def test_config_becomes_runs_with_argv_seeds_and_limits():
    cfg = compose(
        [
            "loop=custom",
            f"loop.script={TINY}",
            "loop.args=[--epochs,1]",
            "loop.seed_arg=--seed",
            "mutation=drop_zero_grad",
            "seeds=[0,1]",
            "budget.mem_cap_mb=512",
        ]
    )
    specs = sweeps.build(to_sweep(cfg))
    assert [(s.identity, s.seed) for s in specs] == [
        ("none", 0),
        ("none", 1),
        ("train_tiny.py::main::drop_zero_grad#0", 0),
        ("train_tiny.py::main::drop_zero_grad#0", 1),
    ]
    assert specs[3].argv == ("--epochs", "1", "--seed", "1")
    # A custom loop is named by its path relative to where it runs, plus its arguments.
    assert all(
        s.mem_cap_mb == 512 and s.loop.startswith("tests/scripts/train_tiny@") for s in specs
    )
    assert specs[2].mutant["diff"] and "zero_grad" not in specs[2].text()


def test_all_operators_with_all_sites_and_shards_partition_the_mutants():
    sweep = sweeps.Sweep(
        [sweeps.Loop(TINY, args=("--epochs", "1"))], operators=["all"], seeds=[0, 1]
    )
    specs = sweeps.build(sweep)
    operators = {spec.mutant["operators"][0] for spec in specs if spec.mutant}
    assert {"drop_zero_grad", "zero_grad_after_backward", "scale_lr"} <= operators
    source = SourceFile.from_path(TINY)
    sites = source.find_sites(sweeps.operators_for(["all"]))
    assert len(specs) == 2 * (1 + len(sites))
    shards = [sweeps.build(sweeps.Sweep(**{**sweep.__dict__, "shard": (i, 3)})) for i in range(3)]
    mutant_keys = [s.key for shard in shards for s in shard if s.mutant]
    assert sorted(mutant_keys) == sorted(s.key for s in specs if s.mutant)
    assert all(sum(s.mutant is None for s in shard) == 2 for shard in shards)


class _DoesNotCompile(Swap):
    """Deliberately broken (no ``name``, so the registry never lists it): its rewrite
    yields code that does not compile, which the engine reports as an engine bug."""

    category = "gradient"
    expected = "crash"
    summary = "test only"
    node_types = (cst.SimpleStatementLine,)

    def swap(self, node, ctx):
        if "zero_grad" not in cst.Module([node]).code:
            return None
        return node.with_changes(body=[cst.Expr(cst.Name("def"))])  # a keyword as a name


def test_a_mutant_the_engine_cannot_build_is_an_invalid_run(tmp_path):
    source = Path(TINY).read_text()
    (mutant,) = sweeps._mutants(Path(TINY), Path(TINY).name, source, [_DoesNotCompile()], "all")
    identity, mutated, reason = mutant
    assert "does not compile" in reason and identity["identity"].endswith("#0")
    from experiments.harness import RunSpec, run_sweep

    spec = RunSpec(TINY, mutated, loop="tiny", mutant=identity, invalid_reason=reason)
    (row,) = run_sweep([spec], tmp_path)
    assert row["status"] == "invalid" and row["exc_type"] == "MutationError"


def test_cuda_without_a_gpu_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(sweeps.SweepError, match="no CUDA device"):
        check_device("cuda")
    assert not torch.cuda.is_initialized()


def test_app_job_runs_then_an_unchanged_rerun_is_all_cached(tmp_path, capsys):
    results = tmp_path / "results"
    argv = [
        "loop=custom",
        f"loop.script={TINY}",
        "loop.args=[--epochs,1]",
        "loop.seed_arg=--seed",
        "mutation=drop_zero_grad",
        "seeds=[0,1]",
        f"results_dir={results}",
        f"hydra.run.dir={tmp_path / 'outputs'}",
    ]
    main(argv)
    rows = load_results(results)
    assert len(rows) == 4 and {row["status"] for row in rows} == {"ok"}
    assert "'statuses': {'ok': 4}" in capsys.readouterr().err
    main(argv)
    assert "'cached': 4" in capsys.readouterr().err
    assert len(load_results(results)) == 4


def test_app_multirun_sweeps_operators_and_seeds(tmp_path, capsys):
    results = tmp_path / "results"
    main(
        [
            "-m",
            "loop=custom",
            f"loop.script={TINY}",
            "loop.args=[--epochs,1]",
            "loop.seed_arg=--seed",
            "mutation=drop_zero_grad,zero_grad_after_backward",
            "seed=0,1",
            f"results_dir={results}",
            f"hydra.sweep.dir={tmp_path / 'multirun'}",
        ]
    )
    rows = load_results(results)
    # 2 references (one per seed) + 2 operators x 2 seeds, each once though 4 jobs ran.
    assert len(rows) == 6 and len({row["key"] for row in rows}) == 6


def test_config_error_exits_with_a_message_not_a_traceback(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["loop=custom", f"hydra.run.dir={tmp_path}"])
    assert exit_info.value.code == 2
    assert "loop.script is required" in capsys.readouterr().err
    assert os.getcwd() != str(tmp_path)  # hydra.job.chdir=False
