"""``trainwreck operators`` and ``trainwreck mutate``: output formats and user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.cli import main

STYLE = Path(__file__).resolve().parent / "styles" / "trainer_class.py"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_operators_lists_every_operator_as_json(capsys):
    code, out, _ = run(capsys, "operators", "--json")
    rows = json.loads(out)
    assert code == 0
    assert {"drop_zero_grad", "zero_grad_after_backward"} <= {row["name"] for row in rows}
    assert all(row["expected"] and row["summary"] and row["category"] for row in rows)


def test_operators_filters_by_category(capsys):
    code, out, _ = run(capsys, "operators", "--category", "gradient")
    assert code == 0 and "drop_zero_grad" in out
    code, _, err = run(capsys, "operators", "--category", "nonsense")
    assert code == 2 and "choose one of" in err


def test_mutate_lists_sites_flake8_style(capsys):
    code, out, err = run(capsys, "mutate", str(STYLE), "--operator", "drop_zero_grad")
    assert code == 0
    line = out.strip().splitlines()[0]
    location, name, identity, context = line.split(" ")
    path, lineno, col = location.rsplit(":", 2)
    assert path == str(STYLE) and int(lineno) > 0 and int(col) > 0
    assert name == "drop_zero_grad"
    assert identity == "trainer_class.py::Trainer.train_step::drop_zero_grad#0"
    assert context == "[train]"  # the static context of the site (semantics.roles)
    assert "1 mutants" in err


def test_mutate_diff(capsys):
    code, out, _ = run(capsys, "mutate", str(STYLE), "--operator", "drop_zero_grad", "--diff")
    assert code == 0
    assert "-        self.optimizer.zero_grad(set_to_none=True)" in out


def test_mutate_out_writes_files_and_manifest(tmp_path, capsys):
    before = STYLE.read_bytes()
    out_dir = tmp_path / "mutants"
    code, _, err = run(capsys, "mutate", str(STYLE), "--out", str(out_dir))
    assert code == 0, err
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["mutants"]
    for entry in manifest["mutants"]:
        text = (out_dir / entry["file"]).read_text()
        compile(text, entry["file"], "exec")
        assert (
            entry["lines"]
            and entry["sha256"]
            and entry["identity"].startswith("trainer_class.py::")
        )
        assert len(entry["contexts"]) == len(entry["parts"])
    by_identity = {e["identity"]: e["contexts"] for e in manifest["mutants"]}
    assert by_identity["trainer_class.py::Trainer.train_step::drop_zero_grad#0"] == ["train"]
    assert by_identity["trainer_class.py::Trainer.evaluate::drop_no_grad#0"] == ["eval"]
    assert STYLE.read_bytes() == before
    # refuses to write into a non-empty folder, leaving it as it was
    code, _, err = run(capsys, "mutate", str(STYLE), "--out", str(out_dir))
    assert code == 2 and "not an empty folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mutants"], "no staging left behind"


def test_mutate_refuses_the_inputs_own_folder(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(STYLE.read_text())
    code, _, err = run(capsys, "mutate", str(script), "--out", str(tmp_path))
    assert code == 2 and "own folder" in err


def test_mutate_higher_order_is_reproducible(capsys):
    args = ("mutate", str(STYLE), "--order", "2", "--count", "3", "--seed", "7")
    first = run(capsys, *args)
    assert first[0] == 0 and first == run(capsys, *args)
    for line in first[1].strip().splitlines():
        assert line.split(" ")[2].count("+") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["mutate", "missing.py"], "missing.py: no such file"),
        (["mutate", str(STYLE), "--operator", "drop_zero_gard"], "did you mean drop_zero_grad"),
        (["mutate", str(STYLE), "--order", "9"], "between 1 and 5"),
        (["mutate", str(STYLE), "--operator", "drop_zero_grad:factor=2"], "no parameter 'factor'"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_user_errors_are_one_line_exit_2(capsys, argv, message):
    code, _out, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_syntax_error_says_where(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nmodel = (\n")
    code, _, err = run(capsys, "mutate", str(bad))
    assert code == 2 and f"{bad}:2:" in err and "syntax error" in err


def test_file_without_sites_says_so_and_exits_0(tmp_path, capsys):
    plain = tmp_path / "plain.py"
    plain.write_text("print('hello')\n")
    code, out, err = run(capsys, "mutate", str(plain))
    assert code == 0 and out == "" and "no sites" in err


def test_mutate_several_files_names_them_without_dot_dot(tmp_path, capsys, monkeypatch):
    """Files in sibling folders: identities name each from the project folder
    (``pkg/callbacks/clip.py``), never ``../callbacks/clip.py`` from the first one's."""
    for folder in ("training", "callbacks"):
        (tmp_path / "pkg" / folder).mkdir(parents=True)
        (tmp_path / "pkg" / folder / "step.py").write_text(
            "def step(model, optimizer, loss):\n"
            "    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()\n"
        )
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(
        capsys, "mutate", "pkg/training/step.py", "pkg/callbacks/step.py",
        "--operator", "drop_zero_grad",
    )  # fmt: skip
    assert code == 0
    identities = [line.split()[2] for line in out.splitlines()]
    assert identities == [
        "pkg/training/step.py::step::drop_zero_grad#0",
        "pkg/callbacks/step.py::step::drop_zero_grad#0",
    ]
    monkeypatch.chdir(tmp_path / "pkg" / "training")  # a file outside the current folder
    code, out, _ = run(
        capsys, "mutate", "step.py", "../callbacks/step.py", "--operator", "drop_zero_grad"
    )
    assert [line.split()[2].split("::")[0] for line in out.splitlines()] == [
        "training/step.py",
        "callbacks/step.py",
    ]
