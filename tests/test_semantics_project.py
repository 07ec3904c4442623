"""Models read across the script's project (issue 29): mutator.project, semantics.modules,
semantics.constants and semantics.mode. A model the script imports from its own files, or
receives from a sibling script, is read there; what the project does not hold stays unknown."""

from __future__ import annotations

import posixpath
import textwrap

import libcst as cst
import pytest

from mutations.registry import get_operator
from mutator import SourceFile
from mutator.project import Project
from mutator.semantics import mode_dependent
from mutator.semantics.constants import UNBOUND, Mapping, value
from mutator.semantics.modules import callers_elsewhere, definition_of

MODE_OPS = ("drop_eval_mode", "drop_train_mode", "eval_mode_before_training")

TRAIN = """
import torch
from modules import Net

model = Net({args})
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def evaluate(loader):
    model.eval()
    return [model(x) for x, _ in loader]

for epoch in range(3):
    model.train()
    for x, y in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    evaluate(loader)
"""

MODULES = """
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, width, dropout):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Dropout(dropout))

class Net(nn.Module):
    def __init__(self, width=8, dropout=0.0):
        super().__init__()
        layers = []
        for _ in range(3):
            layers.extend([Block(width, dropout), nn.GroupNorm(1, width)])
        layers.append(nn.Linear(width, 2))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)
"""


def _files(files: dict[str, str]) -> Project:
    texts = {path: textwrap.dedent(text) for path, text in files.items()}

    def listdir(folder: str) -> list[str]:
        return sorted(posixpath.basename(p) for p in texts if posixpath.dirname(p) == folder)

    return Project(texts.get, listdir)


def _parse(files: dict[str, str], script: str) -> SourceFile:
    project = _files(files)
    return SourceFile(project.text(script), posixpath.basename(script), project, script)  # type: ignore[arg-type]


def _mode_of(source: SourceFile, name: str = "model") -> bool | None:
    ctx = source.context
    uses = [n for n in ctx.nodes(cst.Name) if n.value == name]  # type: ignore[attr-defined]
    use = next((n for n in uses if ctx.enclosing_function(n)), uses[-1])
    return mode_dependent(use, ctx, use)  # type: ignore[arg-type]


def _mode_sites(source: SourceFile) -> list[str]:
    return [s.operator.name for s in source.find_sites([get_operator(op) for op in MODE_OPS])]


def test_an_imported_class_without_a_mode_layer_is_no_mode_site():
    source = _parse({"train.py": TRAIN.format(args=""), "modules.py": MODULES}, "train.py")
    assert _mode_of(source) is False
    survey = source.survey([get_operator(op) for op in MODE_OPS])
    assert survey.sites == []
    assert {r.site.operator.name for r in survey.rejected} == set(MODE_OPS)
    assert all("no dropout, batch norm" in r.reason for r in survey.rejected)


@pytest.mark.parametrize("args", ["dropout=0.1", "8, 0.5"])
def test_the_construction_s_arguments_decide_the_dropout(args):
    source = _parse({"train.py": TRAIN.format(args=args), "modules.py": MODULES}, "train.py")
    assert _mode_of(source) is True
    assert sorted(_mode_sites(source)) == sorted(MODE_OPS)


def test_a_class_the_project_does_not_hold_stays_unknown():
    alone = _parse({"train.py": TRAIN.format(args="")}, "train.py")
    assert _mode_of(alone) is None
    assert sorted(_mode_sites(alone)) == sorted(MODE_OPS)
    no_project = SourceFile(TRAIN.format(args=""), "train.py")
    assert _mode_of(no_project) is None
    broken = _parse({"train.py": TRAIN.format(args=""), "modules.py": "def (:\n"}, "train.py")
    assert _mode_of(broken) is None


def test_an_unknown_argument_keeps_the_dropout():
    script = TRAIN.format(args="dropout=args.dropout")
    assert _mode_of(_parse({"train.py": script, "modules.py": MODULES}, "train.py")) is True


CONFIG_TRAIN = """
import torch
from gpt import GPT

CONFIG = {"emb": 16, "drop_rate": %s}
SIZES = {"small": {"emb": 16, "layers": 2}, "large": {"emb": 32, "layers": 4}}
CONFIG.update(SIZES["small"])
model = GPT(CONFIG)

def evaluate(model, x):
    model.eval()
    return model(x)
"""

GPT = """
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, emb, dropout):
        super().__init__()
        self.proj = nn.Linear(emb, emb)
        self.drop = nn.Dropout(dropout)

class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.drop = nn.Dropout(cfg["drop_rate"])
        self.blocks = nn.Sequential(*[Attention(cfg["emb"], cfg["drop_rate"]) for _ in range(2)])
"""


@pytest.mark.parametrize(("rate", "reads"), [("0.0", False), ("0.1", True)])
def test_a_config_dict_sets_the_dropout_of_every_layer(rate, reads):
    source = _parse({"train.py": CONFIG_TRAIN % rate, "gpt.py": GPT}, "train.py")
    assert _mode_of(source) is reads


def test_values_through_dicts_updates_and_defaults():
    source = _parse({"train.py": CONFIG_TRAIN % "0.0", "gpt.py": GPT}, "train.py")
    ctx = source.context
    config = next(
        n for n in ctx.nodes(cst.Name) if n.value == "CONFIG" and isinstance(ctx.parent(n), cst.Arg)
    )  # type: ignore[attr-defined]
    held = value(config, ctx, UNBOUND)  # type: ignore[arg-type]
    assert isinstance(held, Mapping)
    assert held.get("drop_rate") == 0.0 and held.get("layers") == 2
    changed = _parse({"t.py": "d = {'p': 0.0}\nd['p'] = x\nf(d)\n"}, "t.py").context
    arg = next(
        n
        for n in changed.nodes(cst.Name)
        if n.value == "d" and isinstance(changed.parent(n), cst.Arg)
    )  # type: ignore[attr-defined]
    assert not isinstance(value(arg, changed, UNBOUND), Mapping)  # type: ignore[arg-type]


def test_re_exports_and_relative_imports_are_followed():
    files = {
        "train.py": TRAIN.format(args="").replace("from modules import Net", "from pkg import Net"),
        "pkg/__init__.py": "from .core import Net\n",
        "pkg/core.py": MODULES.replace(
            "import torch.nn as nn", "import torch.nn as nn\nfrom . import parts"
        ),
        "pkg/parts.py": "X = 1\n",
    }
    source = _parse(files, "train.py")
    found = definition_of("Net", source.context)
    assert found is not None and found[1].path == "pkg/core.py"
    assert _mode_of(source) is False


SIBLING_ENGINE = """
def train_step(model, x):
    model.train()
    model(x).sum().backward()

def test_step(model, x):
    model.eval()
    return model(x)

def train(model, x, epochs):
    for _ in range(epochs):
        train_step(model, x)
        test_step(model, x)
"""

SIBLING_TRAIN = """
import torch.nn as nn
import engine

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), %s nn.Linear(8, 2))
engine.train(model=model, x=x, epochs=3)
"""


@pytest.mark.parametrize(("layer", "reads"), [("", False), ("nn.BatchNorm1d(8),", True)])
def test_a_model_handed_in_by_a_sibling_script_is_read_there(layer, reads):
    files = {"src/engine.py": SIBLING_ENGINE, "src/train.py": SIBLING_TRAIN % layer}
    source = _parse(files, "src/engine.py")
    train = next(f for f in source.context.nodes(cst.FunctionDef) if f.name.value == "train")  # type: ignore[attr-defined]
    assert len(callers_elsewhere(train, source.context)) == 1  # type: ignore[arg-type]
    assert _mode_of(source) is reads
    alone = _parse({"src/engine.py": SIBLING_ENGINE}, "src/engine.py")
    assert _mode_of(alone) is None


def test_a_copy_has_the_mode_of_its_model_and_a_replaced_head_counts():
    files = {
        "train.py": TRAIN.format(args="")
        .replace("opt =", "ema = copy.deepcopy(model).eval()\nopt =")
        .replace("import torch\n", "import copy\nimport torch\n"),
        "modules.py": MODULES,
    }
    assert _mode_of(_parse(files, "train.py"), "ema") is False
    head = TRAIN.format(args="").replace(
        "opt =", "model.head = torch.nn.Sequential(torch.nn.Dropout(0.5))\nopt ="
    )
    assert _mode_of(_parse({"train.py": head, "modules.py": MODULES}, "train.py")) is True


def test_files_on_disk_are_the_project_of_a_script_read_from_its_path(tmp_path):
    (tmp_path / "modules.py").write_text(textwrap.dedent(MODULES))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN.format(args="")))
    source = SourceFile.from_path(str(tmp_path / "train.py"))
    assert source.target == "train.py"
    assert _mode_sites(source) == []
    (tmp_path / "modules.py").write_text(textwrap.dedent(MODULES).replace("0.0", "0.2"))
    assert sorted(_mode_sites(SourceFile.from_path(str(tmp_path / "train.py")))) == sorted(MODE_OPS)


def test_a_local_list_spread_into_sequential_is_read_from_its_appends():
    script = """
        import torch.nn as nn

        class MLP(nn.Module):
            def __init__(self, sizes, dropout=0.):
                super().__init__()
                layers = []
                for a, b in zip(sizes, sizes[1:]):
                    layers.extend([nn.Linear(a, b), nn.ReLU(), nn.Dropout(dropout)])
                self.net = nn.Sequential(*layers)

        def build(blocks):
            return nn.Sequential(*blocks)

        model = MLP([4, 8, 2])
        other = build([nn.Linear(2, 2)])

        def evaluate(x):
            model.eval()
            other.eval()
    """
    source = _parse({"t.py": script}, "t.py")
    assert _mode_of(source) is False
    assert _mode_of(source, "other") is None  # the layers are handed in


def test_trainwreck_mutate_reads_the_script_s_project(tmp_path, capsys):
    from experiments.cli import main

    (tmp_path / "modules.py").write_text(textwrap.dedent(MODULES))
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN.format(args="")))
    code = main(
        [
            "mutate",
            str(tmp_path / "train.py"),
            "--operator",
            "drop_eval_mode",
            "--list",
            "--rejected",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "drop_eval_mode" in out and "no dropout, batch norm" in out
    (tmp_path / "modules.py").write_text(textwrap.dedent(MODULES).replace("0.0", "0.3"))
    main(
        [
            "mutate",
            str(tmp_path / "train.py"),
            "--operator",
            "drop_eval_mode",
            "--list",
            "--rejected",
        ]
    )
    assert "no dropout, batch norm" not in capsys.readouterr().out


def test_a_project_class_is_a_model_and_a_project_loss_is_not():
    files = {
        "train.py": """
            from model import Seq2Seq
            from splitcross import SplitCrossEntropyLoss

            seq2seq = Seq2Seq(encoder, decoder).cuda()
            criterion = SplitCrossEntropyLoss(10).cuda()
        """,
        "model.py": "import torch.nn as nn\n\nclass Seq2Seq(nn.Module):\n    pass\n",
        "splitcross.py": "import torch.nn as nn\n\nclass SplitCrossEntropyLoss(nn.Module):\n    pass\n",
    }
    source = _parse(files, "train.py")
    ops = [get_operator("drop_model_to_device"), get_operator("drop_input_to_device")]
    found = {(s.operator.name, s.line) for s in source.find_sites(ops)}
    assert found == {("drop_model_to_device", 5)}
    alone = _parse({"train.py": files["train.py"]}, "train.py")
    assert {(s.operator.name, s.line) for s in alone.find_sites(ops)} == {
        ("drop_input_to_device", 5)
    }


def test_a_loader_factory_of_the_project_hands_on_shuffle_and_batch_size():
    files = {
        "train.py": """
            from data_loader import get_loader

            train_loader = get_loader(train_set, 32, shuffle=True)
            for x, y in train_loader:
                loss = criterion(model(x), y)
                loss.backward()
        """,
        "data_loader.py": """
            import torch

            def get_loader(dataset, batch_size, shuffle):
                return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle)
        """,
    }
    ops = [get_operator("no_shuffle"), get_operator("change_batch_size")]
    source = _parse(files, "train.py")
    mutants = {s.operator.name: source.apply([s]).source for s in source.find_sites(ops)}
    assert "get_loader(train_set, 32, shuffle=False)" in mutants["no_shuffle"]
    assert "get_loader(train_set, 256, shuffle=True)" in mutants["change_batch_size"]
    assert _parse({"train.py": files["train.py"]}, "train.py").find_sites(ops) == []


def test_a_name_from_the_second_star_import_is_found():
    files = {
        "train.py": "from datasets import *\nfrom utils import *\n\nclip_gradient(opt, 5.0)\n",
        "datasets.py": "import torch\n\nclass Captions:\n    pass\n",
        "utils.py": "def clip_gradient(optimizer, grad_clip):\n    pass\n",
    }
    found = definition_of("clip_gradient", _parse(files, "train.py").context)
    assert found is not None and found[1].path == "utils.py"
