"""The pieces behind running a user's own project (#12), without training: the working
directory mirror and its write guard, reach probes, loop names and arguments, the files
to mutate, the summary line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from experiments import sweep as sweeps
from experiments.harness import reach, workdir
from experiments.outcomes import status_line
from experiments.project_files import local_imports, mutated_files
from experiments.reference_gate import check

PROJECTS = Path(__file__).parent / "projects"


def _user_tree(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / "out").mkdir(parents=True)
    (project / "data").mkdir()
    (project / "data" / "train.csv").write_text("1,2\n")
    (project / "out" / "ckpt.pt").write_text("old checkpoint")
    (project / "model.pt").write_text("old model")
    (project / "log.txt").write_text("line 1\n")
    return project


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


def _run_in_mirror(project: Path, body: str) -> subprocess.CompletedProcess:
    """``body`` in a fresh interpreter inside a mirror of ``project``, guard installed."""
    mirror = workdir.create(project)
    code = textwrap.dedent(
        f"""
        import os, sys
        os.chdir({str(mirror)!r})
        from experiments.harness import guard
        guard.install({str(mirror)!r}, protected=[{str(project)!r}], allowed=[])
        """
    ) + textwrap.dedent(body)
    try:
        return subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
            timeout=60,
        )
    finally:
        workdir.remove(mirror)


def test_writes_through_the_mirror_never_reach_the_project(tmp_path):
    project = _user_tree(tmp_path)
    before = _snapshot(project)
    done = _run_in_mirror(
        project,
        """
        import shutil, torch
        assert open("data/train.csv").read() == "1,2\\n"        # reads see the project
        open("model.pt", "w").write("new model")                 # overwrite a file
        with open("log.txt", "a") as log:                         # append to one
            log.write("line 2\\n")
        assert open("log.txt").read() == "line 1\\nline 2\\n"
        torch.save({"w": 1}, "out/ckpt.pt")                      # C++ writer, in a folder
        os.makedirs("out/new/deeper", exist_ok=True)
        open("out/new/deeper/x.txt", "w").write("x")
        os.replace("out/ckpt.pt", "out/renamed.pt")
        os.remove("data/train.csv")
        shutil.rmtree("data")
        print("done")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert _snapshot(project) == before


def test_an_absolute_write_into_the_project_is_refused(tmp_path):
    project = _user_tree(tmp_path)
    before = _snapshot(project)
    done = _run_in_mirror(project, f'open({str(project / "model.pt")!r}, "w").write("x")\n')
    assert done.returncode != 0
    assert "PermissionError: trainwreck: this run would write" in done.stderr
    assert _snapshot(project) == before


def test_mirror_sees_siblings_and_excludes_the_results_folder(tmp_path):
    project = _user_tree(tmp_path)
    (tmp_path / "shared_data").mkdir()
    (project / "results").mkdir()
    mirror = workdir.create(project, exclude=[project / "results"])
    try:
        assert (mirror / ".." / "shared_data").is_dir()  # ../data paths work too
        assert (mirror / "data" / "train.csv").read_text() == "1,2\n"
        assert not (mirror / "results").exists()
        assert mirror.name == "proj" and mirror.parent.name.startswith(workdir.PREFIX)
    finally:
        workdir.remove(mirror)
    assert not mirror.parent.exists() and (project / "data" / "train.csv").exists()


ORIGINAL = """\
def f(x):
    if x > 10:
        y = x * 2
        print(y)
    else:
        y = (x +
             1)
    return y
for i in range(3):
    f(i)
"""


@pytest.mark.parametrize(
    ("mutated", "hits"),
    [
        (ORIGINAL.replace("x * 2", "x * 3"), 0),  # inside the branch never taken
        (ORIGINAL.replace("             1)", "             2)"), 3),  # 2nd line of a statement
        (ORIGINAL.replace("        print(y)\n", ""), 0),  # deleted in the untaken branch
        (ORIGINAL.replace("    return y\n", "    y = -y\n    return y\n"), 3),  # inserted
    ],
)
def test_reach_probes_count_executions_and_keep_line_numbers(mutated, hits):
    regions = reach.regions(ORIGINAL, mutated)
    counters = reach.install_counters(len(regions))
    code, probed = reach.compile_probed(mutated, "t.py", regions)
    exec(code, {"__name__": "t"})
    assert probed == set(range(len(regions)))
    assert reach.summary(counters) == {"reached": hits > 0, "reach_hits": hits}
    raising = mutated + "raise ValueError\n"
    code, _ = reach.compile_probed(raising, "t.py", regions)
    with pytest.raises(ValueError) as error:
        exec(code, {"__name__": "t"})
    assert error.value.__traceback__.tb_next.tb_lineno == raising.count("\n")


def test_custom_loops_are_named_by_path_and_arguments(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "main.py").write_text("print(1)\n")
    first = sweeps.Loop("a/main.py", cwd=str(tmp_path))
    second = sweeps.Loop("b/main.py", cwd=str(tmp_path))
    with_args = sweeps.Loop("a/main.py", cwd=str(tmp_path), argv_text="--lr 0.1")
    assert {first.label, second.label} == {"a/main", "b/main"}
    assert with_args.label.startswith("a/main@") and with_args.label != first.label
    assert sweeps.Loop("a/main.py", name="mine", cwd=str(tmp_path)).label == "mine"
    assert sweeps.Loop("reference_loops/mlp_digits.py").label == "mlp_digits"


def test_argv_is_split_like_a_shell_and_flags_follow_the_style():
    loop = sweeps.Loop(
        "x.py", argv_text="config/x.py --device=cpu 'a b'", seed_arg="--seed", device_arg=None
    )
    assert loop.argv(3, "cpu") == ("config/x.py", "--device=cpu", "a b", "--seed", "3")
    equals = sweeps.Loop("x.py", seed_arg="--seed", device_arg=None, flag_style="equals")
    assert equals.argv(3, "cpu") == ("--seed=3",)
    with pytest.raises(sweeps.SweepError, match=r"loop\.argv"):
        sweeps.Loop("x.py", argv_text="'unclosed").argv(0, "cpu")


def test_files_to_mutate_explicit_and_discovered():
    project = PROJECTS / "two_file"
    script = (project / "train.py").resolve()
    assert local_imports(script) == [(project / "model.py").resolve()]
    assert mutated_files(script, project, ["auto"]) == [script, (project / "model.py").resolve()]
    assert mutated_files(script, project, []) == [script]
    with pytest.raises(FileNotFoundError, match=r"loop\.mutate"):
        mutated_files(script, project, ["nope.py"])


def test_model_side_mutants_name_their_file_and_run_the_script_unchanged():
    project = PROJECTS / "two_file"
    loop = sweeps.Loop("train.py", cwd=str(project), mutate=("model.py",), seed_arg=None)
    specs = sweeps.build(sweeps.Sweep([loop], operators=["drop_activation"], seeds=[0]))
    reference, mutant = specs
    assert mutant.identity == "model.py::MLP.forward::drop_activation#0"
    assert mutant.target.endswith("model.py") and mutant.script.endswith("train.py")
    assert mutant.mutant["reach_regions"] and "relu" not in mutant.text()
    assert reference.key != mutant.key and reference.context == mutant.context


def test_summary_line_has_a_count_and_an_example_per_status():
    rows = [
        {"status": "ok"},
        {"status": "crash", "exc_type": "RuntimeError", "exc_message": "shapes\nmismatch"},
        {"status": "crash", "exc_type": "ValueError", "exc_message": "other"},
        {"status": "invalid", "exc_type": "SystemExit", "exc_message": "t.py: error: bad"},
        {"status": "unreached"},
    ]
    assert status_line(rows) == (
        "crash 2 (e.g. RuntimeError: shapes mismatch), "
        "invalid 1 (e.g. SystemExit: t.py: error: bad), ok 1, unreached 1"
    )


def test_gate_fails_on_any_reference_seed_and_ignores_mutants():
    rows = [
        {"identity": "none", "loop": "l", "seed": 0, "status": "ok"},
        {"identity": "none", "loop": "l", "seed": 1, "status": "timeout"},
        {"identity": "m", "loop": "l", "seed": 0, "status": "crash"},
    ]
    gate = check(rows)
    assert not gate.ok and "seed 1: status timeout" in gate.message()
    assert check(rows[:1] + rows[2:]).ok


def test_probes_leave_docstrings_and_future_imports_first():
    source = '"""Doc."""\nfrom __future__ import annotations\nx = 1\n'
    regions = [{"start": 1, "end": 3}]
    counters = reach.install_counters(1)
    code, _ = reach.compile_probed(source, "t.py", regions)
    namespace: dict = {}
    exec(code, namespace)
    assert namespace["__doc__"] == "Doc." and counters == [1]


def test_short_curves_are_drawn_as_lines_and_non_finite_gaps_stay():
    import numpy as np

    from experiments.report.svg import Series, band_svg

    steps = np.arange(1, 11, dtype=float)
    short = Series(steps, np.linspace(2.0, 1.0, 10), "seed 0")
    svg = band_svg([short], [short])
    lines = [part.split('points="')[1].split('"')[0] for part in svg.split("<polyline")[1:]]
    assert all(len(points.split()) >= 90 for points in lines)  # one line, not ten dots
    broken = np.linspace(2.0, 1.0, 10)
    broken[5] = np.nan
    svg = band_svg([short], [Series(steps, broken, "seed 1")])
    assert svg.count("<polyline") == 3  # reference median + the mutant in two pieces
