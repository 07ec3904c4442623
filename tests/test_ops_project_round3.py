"""Operators that read the script's project (issue 29, third operator round): a package at
the repository's root, a schedule function in another file, ``torch`` through a star import,
a weight-normed model class, a trainer class's subclasses in the same folder."""

from __future__ import annotations

from test_semantics_project import _parse

from mutations.registry import get_operator


def _sites(source, name: str) -> list[int]:
    return [s.line for s in source.find_sites([get_operator(name)])]


def test_a_package_at_the_repository_root_is_read_from_a_script_in_a_subfolder():
    files = {
        "pretrain/train.py": """
            import torch
            from lit.model import Net
            model = Net()
            def validate(x):
                model.eval()
                return model(x)
        """,
        "lit/__init__.py": "",
        "lit/model.py": """
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
        """,
    }
    assert _sites(_parse(files, "pretrain/train.py"), "drop_eval_mode") == []
    files["lit/model.py"] += "        self.drop = nn.Dropout(0.1)\n"
    assert _sites(_parse(files, "pretrain/train.py"), "drop_eval_mode") == [6]


def test_a_schedule_function_of_another_file_is_a_scheduler_step():
    files = {
        "main.py": """
            import torch
            from util import adjust_learning_rate, log
            for epoch in range(3):
                adjust_learning_rate(optimizer, epoch)
                log(optimizer, epoch)
        """,
        "util.py": """
            def adjust_learning_rate(optimizer, epoch):
                for group in optimizer.param_groups:
                    group["lr"] = 0.1 * 0.5 ** epoch

            def log(optimizer, epoch):
                print(epoch, optimizer.param_groups[0]["lr"])
        """,
    }
    assert _sites(_parse(files, "main.py"), "drop_scheduler_step") == [5]


def test_torch_through_a_star_import_of_a_project_module_is_seeded():
    files = {
        "train.py": """
            from modeling import *
            torch.manual_seed(1)
            model = Net()
        """,
        "modeling.py": "import torch\nimport torch.nn as nn\n",
    }
    assert _sites(_parse(files, "train.py"), "drop_manual_seed") == [3]
    files["modeling.py"] = "import numpy as torch\n"
    assert _sites(_parse(files, "train.py"), "drop_manual_seed") == []


def test_an_imported_weight_normed_model_is_no_zero_init_site():
    files = {
        "train.py": """
            import torch
            from models import Generator
            generator = Generator()
            opt = torch.optim.AdamW(generator.parameters(), lr=2e-4)
        """,
        "models.py": """
            import torch.nn as nn
            from torch.nn.utils import weight_norm
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = weight_norm(nn.Conv1d(8, 8, 3))
            class Generator(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.pre = nn.Conv1d(80, 8, 7)
                    self.blocks = nn.ModuleList([Block(), Block()])
        """,
    }
    assert _sites(_parse(files, "train.py"), "zero_init") == []
    files["models.py"] = files["models.py"].replace(
        "weight_norm(nn.Conv1d(8, 8, 3))", "nn.Conv1d(8, 8, 3)"
    )
    assert _sites(_parse(files, "train.py"), "zero_init") == [5]


TRAINER = """
    class Trainer:
        def fit(self, loader):
            for epoch in range(3):
                self._train_epoch(loader)
            self.network.eval()

        def _train_epoch(self, loader):
            self.network.train()
            for x in loader:
                self.network(x).sum().backward()
"""


def test_a_subclass_in_the_same_folder_that_runs_the_model_unswitched_keeps_the_site():
    files = {"pkg/base.py": TRAINER, "pkg/classifier.py": "from pkg.base import Trainer\n"}
    files["pkg/classifier.py"] += (
        "class Classifier(Trainer):\n"
        "    def predict(self, x):\n"
        "        self.network.eval()\n"
        "        return self.network(x)\n"
    )
    assert _sites(_parse(files, "pkg/base.py"), "drop_eval_mode") == []
    files["pkg/classifier.py"] = files["pkg/classifier.py"].replace(
        "        self.network.eval()\n", ""
    )
    assert _sites(_parse(files, "pkg/base.py"), "drop_eval_mode") == [6]
